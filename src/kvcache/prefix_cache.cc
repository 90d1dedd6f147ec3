#include "kvcache/prefix_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"

namespace pc {

namespace {
// Layers marked local, when the windows bound anything: a window shorter
// than the context and at least one global layer left (a model whose layers
// are all windowed keeps one pool).
size_t NumLocalLayers(const KvShape& c, const CacheOptions& opt) {
  if (!opt.bound_windows || c.window == 0 || c.window >= c.n_ctx || c.local_layers.size() != c.n_layer) return 0;
  const size_t n = static_cast<size_t>(std::count_if(c.local_layers.begin(), c.local_layers.end(), [](uint8_t f) { return f != 0; }));
  return n < c.n_layer ? n : 0;
}

// The split, per local block per global one, and the local pool's floor.
struct Split {
  double global_bytes = 0, local_bytes = 0;  // one block of each
  double ratio = 0;                          // local blocks per global block
  size_t floor = 0;                          // local blocks at least
};

Split SplitFor(const KvShape& c, const CacheOptions& opt, size_t n_local) {
  const size_t bs = opt.block_size, layer_block = bs * KvBytes(opt.dtype, c.kv_dim);
  Split s;
  s.global_bytes = 2.0 * static_cast<double>((c.n_layer - n_local) * layer_block);
  s.local_bytes = 2.0 * static_cast<double>(n_local * layer_block);
  // A sequence holds at most `ring` local blocks; the cache keeps a window
  // tail per prefix end worth resuming from. Sized for prefixes a quarter of
  // the context long on average: 4 tails per context's worth of global
  // blocks, never more local blocks than global ones.
  const size_t ring = (c.window + bs - 1) / bs + 1, ctx_blocks = std::max<size_t>(1, (c.n_ctx + bs - 1) / bs);
  s.ratio = std::min(1.0, 4.0 * static_cast<double>(ring) / static_cast<double>(ctx_blocks));
  // Eight sequences' windows and one step of opt.step_tokens, plus the sentinel.
  s.floor = 8 * ring + (opt.step_tokens + bs - 1) / bs + 1;
  return s;
}
}  // namespace

PoolSizes PoolSizesFor(const KvShape& c, const CacheOptions& opt) {
  const size_t full_block = 2 * c.n_layer * opt.block_size * KvBytes(opt.dtype, c.kv_dim);
  const PoolSizes whole{std::max<size_t>(1, opt.mem_bytes / full_block), 0};
  const size_t n_local = NumLocalLayers(c, opt);
  if (n_local == 0) return whole;
  const Split s = SplitFor(c, opt, n_local);
  const double mem = static_cast<double>(opt.mem_bytes);
  if (static_cast<double>(s.floor) * s.local_bytes + s.global_bytes > mem) return whole;  // too small to split
  const double global = std::floor(mem / (s.global_bytes + s.ratio * s.local_bytes));
  const size_t local = std::max(s.floor, static_cast<size_t>(std::ceil(s.ratio * global)) + 1);
  return {std::max<size_t>(1, static_cast<size_t>((mem - static_cast<double>(local) * s.local_bytes) / s.global_bytes)),
          local};
}

size_t BlocksForMemory(const KvShape& c, const CacheOptions& opt) { return PoolSizesFor(c, opt).global; }

size_t DefaultKvCacheBytes(const KvShape& c, const CacheOptions& opt) {
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  const size_t avail = pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : (size_t{4} << 30);
  const size_t contexts = 8 * (c.n_ctx / opt.block_size + 1);
  size_t eight_contexts = contexts * 2 * c.n_layer * opt.block_size * KvBytes(opt.dtype, c.kv_dim);
  if (const size_t n_local = NumLocalLayers(c, opt); n_local > 0) {
    const Split s = SplitFor(c, opt, n_local);
    const double local = std::max(static_cast<double>(s.floor), std::ceil(s.ratio * static_cast<double>(contexts)) + 1);
    eight_contexts = static_cast<size_t>(static_cast<double>(contexts) * s.global_bytes + local * s.local_bytes);
  }
  return std::min(avail / 4, eight_contexts);
}

PrefixCache::PrefixCache(const KvShape& c, const Hash128& fingerprint, const CacheOptions& opt)
    : PrefixCache(c, fingerprint, opt, PoolSizesFor(c, opt)) {}

PrefixCache::PrefixCache(const KvShape& c, const Hash128& fingerprint, const CacheOptions& opt, const PoolSizes& sizes)
    : store_(c.n_layer, c.kv_dim, opt.block_size, sizes.global, opt.dtype, c.local_layers, sizes.local),
      pool_(static_cast<int32_t>(store_.num_blocks())),
      local_pool_(static_cast<int32_t>(std::max<size_t>(1, store_.num_local_blocks()))) {
  if (store_.split()) {
    window_ = c.window;
    PC_CHECK(local_pool_.Allocate() == kNoLocalBlock);  // the sentinel: never freed, never written
  }
  // Blocks are only interchangeable between caches of the same layout.
  // Bits per element (8 for Q8_0 blocks), so no tier hands one type's blocks
  // to another; split caches' payloads carry the local rows' flag.
  uint64_t layout[2] = {opt.block_size, opt.dtype == KvDtype::kF16 ? 16u : opt.dtype == KvDtype::kF32 ? 32u : 8u};
  if (split()) layout[1] |= uint64_t{1} << 32;
  std::vector<uint8_t> buf(32);
  std::memcpy(buf.data(), &fingerprint, 16);
  std::memcpy(buf.data() + 16, layout, 16);
  fingerprint_ = HashBytes(buf);
  block_tokens_.assign(static_cast<size_t>(pool_.num_blocks()) * opt.block_size, -1);
  local_tokens_.assign(static_cast<size_t>(local_pool_.num_blocks()) * opt.block_size, -1);
  partial_.assign(static_cast<size_t>(pool_.num_blocks()), 0);
}

Result<std::unique_ptr<CachedSequence>> PrefixCache::Start(std::span<const int32_t> prompt,
                                                           std::string_view salt, bool use_cache,
                                                           std::span<const Hash128> keys, bool have_last_logits) {
  auto progress = std::make_shared<RequestProgress>();
  progress->tokens.assign(prompt.begin(), prompt.end());
  return Start(std::move(progress), salt, use_cache, keys, have_last_logits);
}

Result<std::unique_ptr<CachedSequence>> PrefixCache::Start(std::shared_ptr<RequestProgress> progress,
                                                           std::string_view salt, bool use_cache,
                                                           std::span<const Hash128> keys, bool have_last_logits) {
  PC_CHECK(progress != nullptr);
  const std::span<const int32_t> prompt = progress->tokens;
  if (prompt.empty()) return Status::Error("the prompt is empty");
  progress->num_computed = 0;
  std::unique_ptr<CachedSequence> seq(new CachedSequence(*this, progress, ChainRoot(fingerprint_, salt), use_cache));
  if (!use_cache) return seq;
  const size_t bs = block_size();
  const bool have_keys = keys.size() == prompt.size() / bs;
  if (have_keys) seq->prompt_keys_.assign(keys.begin(), keys.end());
  std::vector<Hash128> chain;  // the matched blocks' keys
  Hash128 h = seq->last_hash_;
  for (size_t k = 0; (k + 1) * bs <= prompt.size(); ++k) {
    const std::span<const int32_t> block = prompt.subspan(k * bs, bs);
    if (!have_keys) ++block_hashes_;
    const Hash128 next = have_keys ? keys[k] : ChainBlock(h, block);
    const std::optional<int32_t> b = pool_.Lookup(next);
    if (!b) break;
    const std::span<const int32_t> held = TokensOf(*b);
    if (!std::equal(held.begin(), held.end(), block.begin())) {
      ++token_mismatches_;  // a hash collision: never adopt another prompt's K/V
      break;
    }
    pool_.Ref(*b);
    seq->table_.push_back(*b);
    chain.push_back(next);
    h = next;
  }
  if (split()) AdoptWindowTail(*seq, chain, prompt, have_last_logits);
  const size_t matched = seq->table_.size() * bs;
  seq->last_hash_ = seq->table_.empty() ? seq->last_hash_ : chain[seq->table_.size() - 1];
  seq->num_hashed_blocks_ = seq->table_.size();
  size_t adopted = matched;
  // At least one token is left to compute (its logits start the output),
  // unless the caller has those logits.
  const size_t keep = have_last_logits ? 0 : 1;
  if (matched < prompt.size() && prompt.size() - matched > keep) {
    adopted += AdoptPartialBlock(*seq, prompt.subspan(matched), std::min(bs - 1, prompt.size() - matched - keep));
  }
  if (matched > 0 && matched == prompt.size() && !have_last_logits) {
    // The whole prompt is cached. The last prompt token is recomputed to get
    // its logits; its row lives in the last (shared) block, so that block is
    // copied into a private one first and the token's row rewritten there.
    std::optional<int32_t> copy = AllocateBlock();
    std::optional<int32_t> local_copy = split() ? local_pool_.Allocate() : std::optional<int32_t>(kNoLocalBlock);
    if (!copy || !local_copy) {
      if (copy) pool_.Unref(*copy);
      if (local_copy && split()) local_pool_.Unref(*local_copy);
      seq.reset();
      return Status::Error("KV pool exhausted: no free block for a full-hit copy");
    }
    CopyGlobal(seq->table_.back(), *copy);
    pool_.Unref(seq->table_.back());
    seq->table_.back() = *copy;
    if (split()) {
      CopyLocal(seq->local_table_.back(), *local_copy);
      local_pool_.Unref(seq->local_table_.back());
      seq->local_table_.back() = *local_copy;
    }
    --adopted;
  }
  progress->num_computed = seq->num_cached_tokens_ = adopted;
  return seq;
}

void PrefixCache::AdoptWindowTail(CachedSequence& seq, std::span<const Hash128> chain, std::span<const int32_t> prompt,
                                  bool have_last_logits) {
  const size_t bs = block_size();
  // The position computed next after a hit on k blocks (a whole prompt
  // recomputes its last token unless the caller has its logits).
  auto next_after = [&](size_t k) { return k * bs == prompt.size() && !have_last_logits && k > 0 ? k * bs - 1 : k * bs; };
  size_t k = seq.table_.size();
  while (k > 0 && !LocalTailPresent(chain, prompt, k, next_after(k))) --k;
  for (size_t j = k; j < seq.table_.size(); ++j) pool_.Unref(seq.table_[j]);
  seq.table_.resize(k);
  const size_t first = FirstLocalBlock(next_after(k));
  seq.local_table_.assign(k, kNoLocalBlock);
  for (size_t j = first; j < k; ++j) {
    const int32_t b = *local_pool_.Lookup(chain[j]);
    local_pool_.Ref(b);
    seq.local_table_[j] = b;
  }
  seq.local_released_ = first;
}

bool PrefixCache::LocalTailPresent(std::span<const Hash128> keys, std::span<const int32_t> prompt, size_t k,
                                   size_t next) const {
  const size_t bs = block_size();
  for (size_t j = FirstLocalBlock(next); j < k; ++j) {
    const std::optional<int32_t> b = local_pool_.Lookup(keys[j]);
    if (!b) return false;
    const std::span<const int32_t> held = LocalTokensOf(*b);
    if (!std::equal(held.begin(), held.end(), prompt.begin() + static_cast<std::ptrdiff_t>(j * bs))) return false;
  }
  return true;
}

void PrefixCache::CopyGlobal(int32_t from, int32_t to) {
  for (size_t l = 0; l < store_.num_layers(); ++l) {
    if (store_.is_local(l)) continue;
    std::memcpy(store_.BlockK(l, to), store_.BlockK(l, from), store_.block_layer_bytes());
    std::memcpy(store_.BlockV(l, to), store_.BlockV(l, from), store_.block_layer_bytes());
  }
}

void PrefixCache::CopyLocal(int32_t from, int32_t to) {
  for (size_t l = 0; l < store_.num_layers(); ++l) {
    if (!store_.is_local(l)) continue;
    std::memcpy(store_.BlockK(l, to), store_.BlockK(l, from), store_.block_layer_bytes());
    std::memcpy(store_.BlockV(l, to), store_.BlockV(l, from), store_.block_layer_bytes());
  }
}

void PrefixCache::RegisterLocal(int32_t b, const Hash128& key, std::span<const int32_t> tokens) {
  if (b == kNoLocalBlock || !local_pool_.Register(b, key)) return;
  const std::span<int32_t> held = LocalTokensOf(b);
  std::fill(held.begin(), held.end(), -1);
  std::copy(tokens.begin(), tokens.end(), held.begin());
}

Hash128 PrefixCache::PromptKey(std::span<const int32_t> prompt, std::string_view salt,
                               std::span<const Hash128> keys) const {
  const size_t bs = block_size(), whole = prompt.size() / bs;
  Hash128 h = ChainRoot(fingerprint_, salt);
  if (whole > 0) h = keys.size() == whole ? keys.back() : BlockHashes(prompt, salt).back();
  // The tail (possibly empty) and the length: no whole block's key.
  std::vector<int32_t> tail(prompt.begin() + static_cast<std::ptrdiff_t>(whole * bs), prompt.end());
  tail.push_back(-static_cast<int32_t>(prompt.size()) - 1);
  return ChainBlock(h, tail);
}

std::vector<Hash128> PrefixCache::BlockHashes(std::span<const int32_t> prompt, std::string_view salt) const {
  std::vector<Hash128> out;
  const size_t bs = store_.block_size();
  Hash128 h = ChainRoot(fingerprint_, salt);
  for (size_t k = 0; (k + 1) * bs <= prompt.size(); ++k) {
    h = ChainBlock(h, prompt.subspan(k * bs, bs));
    out.push_back(h);
    ++block_hashes_;
  }
  return out;
}

std::vector<uint8_t> PrefixCache::BlockBytes(int32_t b, std::vector<uint8_t> into) {
  const size_t lb = store_.block_layer_bytes(), tb = block_size() * sizeof(int32_t);
  std::vector<uint8_t> out = std::move(into);
  out.assign(payload_bytes(), 0);
  std::memcpy(out.data(), TokensOf(b).data(), tb);
  std::optional<int32_t> local;
  if (split()) {
    if (const std::optional<Hash128> key = pool_.hash_of(b)) local = local_pool_.Lookup(*key);
    const int32_t present = local ? 1 : 0;
    std::memcpy(out.data() + out.size() - sizeof(int32_t), &present, sizeof(int32_t));
  }
  for (size_t l = 0; l < store_.num_layers(); ++l) {
    if (store_.is_local(l) && !local) continue;  // zeros, flagged absent
    const int32_t from = store_.is_local(l) ? *local : b;
    std::memcpy(out.data() + tb + (2 * l) * lb, store_.BlockK(l, from), lb);
    std::memcpy(out.data() + tb + (2 * l + 1) * lb, store_.BlockV(l, from), lb);
  }
  return out;
}

std::optional<int32_t> PrefixCache::AllocateBlock() {
  std::optional<Hash128> evicted;
  std::optional<int32_t> b = pool_.Allocate(&evicted);
  if (!b) return b;
  // A partial tail is not a tier entry (tiers hold whole blocks).
  if (evicted && listener_ && partial_[static_cast<size_t>(*b)] == 0) {
    listener_->OnEvicted(*evicted, BlockBytes(*b, listener_->SpareBuffer()));
  }
  partial_[static_cast<size_t>(*b)] = 0;
  return b;
}

size_t PrefixCache::NumPoolLeading(std::span<const Hash128> keys) const {
  size_t n = 0;
  while (n < keys.size() && pool_.Lookup(keys[n])) ++n;
  // Split caches: only as far as a hit could go, a boundary with its window
  // tail (keys alone: Start checks the tokens).
  while (split() && n > 0) {
    bool tail = true;
    for (size_t j = FirstLocalBlock(n * block_size()); tail && j < n; ++j) tail = local_pool_.Lookup(keys[j]).has_value();
    if (tail) break;
    --n;
  }
  return n;
}

std::vector<int32_t> PrefixCache::HoldPoolLeading(std::span<const Hash128> keys) {
  std::vector<int32_t> held;
  for (const Hash128& k : keys) {
    const std::optional<int32_t> b = pool_.Lookup(k);
    if (!b) break;
    pool_.Ref(*b);
    held.push_back(*b);
  }
  return held;
}

PrefixCache::Install PrefixCache::InstallBlock(const Hash128& key, std::span<const uint8_t> payload,
                                               std::span<const int32_t> tokens) {
  using R = Install::Result;
  const size_t tb = block_size() * sizeof(int32_t);
  if (payload.size() != payload_bytes() || tokens.size() != block_size()) return {R::kMalformed};
  if (std::memcmp(payload.data(), tokens.data(), tb) != 0) {
    ++token_mismatches_;
    return {R::kWrongTokens};
  }
  int32_t has_local = 0;
  if (split()) {
    std::memcpy(&has_local, payload.data() + payload.size() - sizeof(int32_t), sizeof(int32_t));
    if (has_local != 0 && has_local != 1) return {R::kMalformed};
  }
  if (pool_.Lookup(key)) {
    // The global rows are here; the window tail may not be (a tier's copy
    // brings it back).
    if (has_local == 1 && !local_pool_.Lookup(key)) InstallLocal(key, payload, tokens);
    return {R::kAlreadyCached};
  }
  std::optional<int32_t> b = AllocateBlock();
  if (!b) return {R::kPoolFull};
  const size_t lb = store_.block_layer_bytes();
  std::copy(tokens.begin(), tokens.end(), TokensOf(*b).begin());
  for (size_t l = 0; l < store_.num_layers(); ++l) {
    if (store_.is_local(l)) continue;
    std::memcpy(store_.BlockK(l, *b), payload.data() + tb + (2 * l) * lb, lb);
    std::memcpy(store_.BlockV(l, *b), payload.data() + tb + (2 * l + 1) * lb, lb);
  }
  PC_CHECK(pool_.Register(*b, key));
  if (has_local == 1 && !local_pool_.Lookup(key)) InstallLocal(key, payload, tokens);
  return {R::kInstalled, *b};
}

void PrefixCache::InstallLocal(const Hash128& key, std::span<const uint8_t> payload, std::span<const int32_t> tokens) {
  // A cached block like any other (no reference kept); none when every
  // local block is held.
  const std::optional<int32_t> local = local_pool_.Allocate();
  if (!local) return;
  const size_t lb = store_.block_layer_bytes(), tb = block_size() * sizeof(int32_t);
  for (size_t l = 0; l < store_.num_layers(); ++l) {
    if (!store_.is_local(l)) continue;
    std::memcpy(store_.BlockK(l, *local), payload.data() + tb + (2 * l) * lb, lb);
    std::memcpy(store_.BlockV(l, *local), payload.data() + tb + (2 * l + 1) * lb, lb);
  }
  RegisterLocal(*local, key, tokens);
  local_pool_.Unref(*local);
}

void PrefixCache::NoteChild(const Hash128& parent, const Hash128& child) {
  // Stale entries (evicted children) are skipped at lookup and dropped here
  // once they would outnumber the pool's blocks twice over.
  if (children_.size() >= 2 * static_cast<size_t>(pool_.num_blocks())) {
    for (auto it = children_.begin(); it != children_.end();) {
      it = pool_.Lookup(it->second) ? std::next(it) : children_.erase(it);
    }
  }
  children_.emplace(parent, child);
}

size_t PrefixCache::AdoptPartialBlock(CachedSequence& seq, std::span<const int32_t> rest, size_t limit) {
  size_t best = 0;
  int32_t from = -1, local_from = kNoLocalBlock;
  const auto [lo, hi] = children_.equal_range(seq.last_hash_);
  for (auto it = lo; it != hi; ++it) {
    const std::optional<int32_t> b = pool_.Lookup(it->second);
    if (!b) continue;
    // Split caches: the child's local rows are in the window of what follows.
    const std::optional<int32_t> local = split() ? local_pool_.Lookup(it->second) : std::optional<int32_t>(kNoLocalBlock);
    if (!local) continue;
    const std::span<const int32_t> held = TokensOf(*b);
    size_t j = 0;
    while (j < limit && j < rest.size() && held[j] == rest[j]) ++j;
    if (j > best) best = j, from = *b, local_from = *local;
  }
  if (best == 0) return 0;
  // The sources must survive the allocations' evictions.
  pool_.Ref(from);
  if (split()) local_pool_.Ref(local_from);
  std::optional<int32_t> copy = AllocateBlock();
  std::optional<int32_t> local_copy = split() ? local_pool_.Allocate() : std::optional<int32_t>(kNoLocalBlock);
  const bool ok = copy && local_copy;
  if (ok) {
    CopyGlobal(from, *copy);
    seq.table_.push_back(*copy);
    if (split()) {
      CopyLocal(local_from, *local_copy);
      seq.local_table_.push_back(*local_copy);
    }
  } else {
    if (copy) pool_.Unref(*copy);
    if (local_copy && split()) local_pool_.Unref(*local_copy);
  }
  pool_.Unref(from);
  if (split()) local_pool_.Unref(local_from);
  return ok ? best : 0;
}

void PrefixCache::RegisterPartial(int32_t b, const Hash128& parent, std::span<const int32_t> tokens, int32_t local) {
  Hash128 key = ChainBlock(parent, tokens);
  key.hi ^= 0x7061727469616c31ull;  // "partial1": apart from every whole block's key
  if (!pool_.Register(b, key)) return;
  const std::span<int32_t> held = TokensOf(b);
  std::fill(held.begin(), held.end(), -1);  // no token id: matching stops at the tail's end
  std::copy(tokens.begin(), tokens.end(), held.begin());
  partial_[static_cast<size_t>(b)] = 1;
  if (split()) RegisterLocal(local, key, tokens);
  NoteChild(parent, key);
}

CachedSequence::~CachedSequence() {
  const size_t bs = cache_.block_size();
  const std::span<const int32_t> done = computed_tokens();
  const size_t tail = done.size() % bs;
  // Only a tail this sequence computed rows of (not one it merely adopted).
  if (use_cache_ && tail > 0 && done.size() > num_cached_tokens_ && num_hashed_blocks_ == done.size() / bs &&
      table_.size() > num_hashed_blocks_) {
    cache_.RegisterPartial(table_[num_hashed_blocks_], last_hash_, done.subspan(done.size() - tail),
                           num_hashed_blocks_ < local_table_.size() ? local_table_[num_hashed_blocks_]
                                                                    : PrefixCache::kNoLocalBlock);
  }
  for (int32_t b : table_) cache_.pool_.Unref(b);
  for (int32_t b : local_table_) {
    if (b != PrefixCache::kNoLocalBlock) cache_.local_pool_.Unref(b);
  }
}

KvStore& CachedSequence::store() { return cache_.store_; }

size_t CachedSequence::num_local_blocks_held() const {
  return static_cast<size_t>(std::count_if(local_table_.begin(), local_table_.end(),
                                           [](int32_t b) { return b != PrefixCache::kNoLocalBlock; }));
}

Status CachedSequence::Reserve(size_t num_tokens) {
  const size_t bs = cache_.block_size();
  const size_t need = (num_tokens + bs - 1) / bs;
  while (table_.size() < need) {
    std::optional<int32_t> b = cache_.AllocateBlock();
    if (!b) {
      return Errorf("KV pool exhausted: {} tokens need {} blocks, {} of {} are in use by running sequences",
                    num_tokens, need, cache_.pool_.num_blocks() - cache_.pool_.num_free(), cache_.pool_.num_blocks());
    }
    table_.push_back(*b);
  }
  while (cache_.split() && local_table_.size() < need) {
    std::optional<int32_t> b = cache_.local_pool_.Allocate();
    if (!b) {
      return Errorf("KV pool exhausted: the sliding-window layers' blocks ({} tokens each) are all in use by running "
                    "sequences ({} blocks)", bs, cache_.local_pool_.num_blocks());
    }
    local_table_.push_back(*b);
  }
  return OkStatus();
}

void CachedSequence::Computed(std::span<const int32_t> tokens) {
  std::vector<int32_t>& all = progress_->tokens;
  const size_t from = progress_->num_computed;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (from + i < all.size()) {
      PC_CHECK(all[from + i] == tokens[i]);  // the record's own tokens
    } else {
      all.push_back(tokens[i]);
    }
  }
  progress_->num_computed += tokens.size();
  IndexComputed();
}

void CachedSequence::IndexComputed() {
  const std::span<const int32_t> done = computed_tokens();
  const size_t bs = cache_.block_size();
  // Register every block that just became full (prompt and generated tokens).
  while ((num_hashed_blocks_ + 1) * bs <= done.size()) {
    const size_t k = num_hashed_blocks_;
    const std::span<const int32_t> block = done.subspan(k * bs, bs);
    const Hash128 parent = last_hash_;
    if (k < prompt_keys_.size()) {
      last_hash_ = prompt_keys_[k];  // hashed once, before Start
    } else {
      last_hash_ = ChainBlock(last_hash_, block);
      ++cache_.block_hashes_;
    }
    // The local rows first: a tier's copy of the block carries them.
    if (use_cache_ && cache_.split()) cache_.RegisterLocal(local_table_[k], last_hash_, block);
    if (use_cache_ && cache_.pool_.Register(table_[k], last_hash_)) {
      cache_.NoteChild(parent, last_hash_);
      std::copy(block.begin(), block.end(), cache_.TokensOf(table_[k]).begin());
      if (PoolListener* l = cache_.listener_) l->OnRegistered(last_hash_, cache_.BlockBytes(table_[k], l->SpareBuffer()));
    }
    ++num_hashed_blocks_;
  }
  SlideWindow();
}

void CachedSequence::SlideWindow() {
  if (!cache_.split()) return;
  const size_t first = std::min(cache_.FirstLocalBlock(progress_->num_computed), local_table_.size());
  for (; local_released_ < first; ++local_released_) {
    int32_t& b = local_table_[local_released_];
    if (b != PrefixCache::kNoLocalBlock) cache_.local_pool_.Unref(b);  // stays cached if indexed
    b = PrefixCache::kNoLocalBlock;
  }
}

}  // namespace pc
