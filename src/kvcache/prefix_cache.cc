#include "kvcache/prefix_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/check.h"

namespace pc {

namespace {
size_t BlockBytes(const KvShape& c, const CacheOptions& opt) {
  return 2 * c.n_layer * opt.block_size * KvBytes(opt.dtype, c.kv_dim);
}
}  // namespace

size_t BlocksForMemory(const KvShape& c, const CacheOptions& opt) {
  return std::max<size_t>(1, opt.mem_bytes / BlockBytes(c, opt));
}

size_t DefaultKvCacheBytes(const KvShape& c, const CacheOptions& opt) {
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  const size_t avail = pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : (size_t{4} << 30);
  const size_t eight_contexts = 8 * (c.n_ctx / opt.block_size + 1) * BlockBytes(c, opt);
  return std::min(avail / 4, eight_contexts);
}

PrefixCache::PrefixCache(const KvShape& c, const Hash128& fingerprint, const CacheOptions& opt)
    : store_(c.n_layer, c.kv_dim, opt.block_size,
             BlocksForMemory(c, opt), opt.dtype),
      pool_(static_cast<int32_t>(BlocksForMemory(c, opt))) {
  // Blocks are only interchangeable between caches of the same layout.
  // Bits per element (8 for Q8_0 blocks), so no tier hands one type's blocks to another.
  uint64_t layout[2] = {opt.block_size, opt.dtype == KvDtype::kF16 ? 16u : opt.dtype == KvDtype::kF32 ? 32u : 8u};
  std::vector<uint8_t> buf(32);
  std::memcpy(buf.data(), &fingerprint, 16);
  std::memcpy(buf.data() + 16, layout, 16);
  fingerprint_ = HashBytes(buf);
  block_tokens_.assign(static_cast<size_t>(pool_.num_blocks()) * opt.block_size, -1);
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
    h = next;
  }
  const size_t matched = seq->table_.size() * bs;
  seq->last_hash_ = h;
  seq->num_hashed_blocks_ = seq->table_.size();
  size_t adopted = matched;
  // At least one token is left to compute (its logits start the output),
  // unless the caller has those logits.
  const size_t keep = have_last_logits ? 0 : 1;
  if (matched < prompt.size() && prompt.size() - matched > keep) {
    adopted += AdoptPartialBlock(*seq, prompt.subspan(matched), std::min(bs - 1, prompt.size() - matched - keep));
  }
  if (matched == prompt.size() && !have_last_logits) {
    // The whole prompt is cached. The last prompt token is recomputed to get
    // its logits; its row lives in the last (shared) block, so that block is
    // copied into a private one first and the token's row rewritten there.
    std::optional<int32_t> copy = AllocateBlock();
    if (!copy) {
      seq.reset();
      return Status::Error("KV pool exhausted: no free block for a full-hit copy");
    }
    const int32_t shared = seq->table_.back();
    for (size_t l = 0; l < static_cast<size_t>(store_.num_layers()); ++l) {
      std::memcpy(store_.BlockK(l, *copy), store_.BlockK(l, shared), store_.block_layer_bytes());
      std::memcpy(store_.BlockV(l, *copy), store_.BlockV(l, shared), store_.block_layer_bytes());
    }
    pool_.Unref(shared);
    seq->table_.back() = *copy;
    --adopted;
  }
  progress->num_computed = seq->num_cached_tokens_ = adopted;
  return seq;
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

std::vector<uint8_t> PrefixCache::BlockBytes(int32_t b) {
  const size_t lb = store_.block_layer_bytes(), tb = block_size() * sizeof(int32_t);
  std::vector<uint8_t> out(payload_bytes());
  std::memcpy(out.data(), TokensOf(b).data(), tb);
  for (size_t l = 0; l < store_.num_layers(); ++l) {
    std::memcpy(out.data() + tb + (2 * l) * lb, store_.BlockK(l, b), lb);
    std::memcpy(out.data() + tb + (2 * l + 1) * lb, store_.BlockV(l, b), lb);
  }
  return out;
}

std::optional<int32_t> PrefixCache::AllocateBlock() {
  std::optional<Hash128> evicted;
  std::optional<int32_t> b = pool_.Allocate(&evicted);
  if (!b) return b;
  // A partial tail is not a tier entry (tiers hold whole blocks).
  if (evicted && listener_ && partial_[static_cast<size_t>(*b)] == 0) listener_->OnEvicted(*evicted, BlockBytes(*b));
  partial_[static_cast<size_t>(*b)] = 0;
  return b;
}

size_t PrefixCache::NumPoolLeading(std::span<const Hash128> keys) const {
  size_t n = 0;
  while (n < keys.size() && pool_.Lookup(keys[n])) ++n;
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
  if (pool_.Lookup(key)) return {R::kAlreadyCached};
  std::optional<int32_t> b = AllocateBlock();
  if (!b) return {R::kPoolFull};
  const size_t lb = store_.block_layer_bytes();
  std::copy(tokens.begin(), tokens.end(), TokensOf(*b).begin());
  for (size_t l = 0; l < store_.num_layers(); ++l) {
    std::memcpy(store_.BlockK(l, *b), payload.data() + tb + (2 * l) * lb, lb);
    std::memcpy(store_.BlockV(l, *b), payload.data() + tb + (2 * l + 1) * lb, lb);
  }
  PC_CHECK(pool_.Register(*b, key));
  return {R::kInstalled, *b};
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
  int32_t from = -1;
  const auto [lo, hi] = children_.equal_range(seq.last_hash_);
  for (auto it = lo; it != hi; ++it) {
    const std::optional<int32_t> b = pool_.Lookup(it->second);
    if (!b) continue;
    const std::span<const int32_t> held = TokensOf(*b);
    size_t j = 0;
    while (j < limit && j < rest.size() && held[j] == rest[j]) ++j;
    if (j > best) best = j, from = *b;
  }
  if (best == 0) return 0;
  pool_.Ref(from);  // the source must survive the allocation's eviction
  std::optional<int32_t> copy = AllocateBlock();
  if (copy) {
    for (size_t l = 0; l < static_cast<size_t>(store_.num_layers()); ++l) {
      std::memcpy(store_.BlockK(l, *copy), store_.BlockK(l, from), store_.block_layer_bytes());
      std::memcpy(store_.BlockV(l, *copy), store_.BlockV(l, from), store_.block_layer_bytes());
    }
    seq.table_.push_back(*copy);
  }
  pool_.Unref(from);
  return copy ? best : 0;
}

void PrefixCache::RegisterPartial(int32_t b, const Hash128& parent, std::span<const int32_t> tokens) {
  Hash128 key = ChainBlock(parent, tokens);
  key.hi ^= 0x7061727469616c31ull;  // "partial1": apart from every whole block's key
  if (!pool_.Register(b, key)) return;
  const std::span<int32_t> held = TokensOf(b);
  std::fill(held.begin(), held.end(), -1);  // no token id: matching stops at the tail's end
  std::copy(tokens.begin(), tokens.end(), held.begin());
  partial_[static_cast<size_t>(b)] = 1;
  NoteChild(parent, key);
}

CachedSequence::~CachedSequence() {
  const size_t bs = cache_.block_size();
  const std::span<const int32_t> done = computed_tokens();
  const size_t tail = done.size() % bs;
  // Only a tail this sequence computed rows of (not one it merely adopted).
  if (use_cache_ && tail > 0 && done.size() > num_cached_tokens_ && num_hashed_blocks_ == done.size() / bs &&
      table_.size() > num_hashed_blocks_) {
    cache_.RegisterPartial(table_[num_hashed_blocks_], last_hash_, done.subspan(done.size() - tail));
  }
  for (int32_t b : table_) cache_.pool_.Unref(b);
}

KvStore& CachedSequence::store() { return cache_.store_; }

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
    if (use_cache_ && cache_.pool_.Register(table_[k], last_hash_)) {
      cache_.NoteChild(parent, last_hash_);
      std::copy(block.begin(), block.end(), cache_.TokensOf(table_[k]).begin());
      if (cache_.listener_) cache_.listener_->OnRegistered(last_hash_, cache_.BlockBytes(table_[k]));
    }
    ++num_hashed_blocks_;
  }
}

}  // namespace pc
