// The paged KV cache with automatic prefix reuse. One KvStore (a single
// allocation of num_blocks blocks), a BlockPool for refcounts, the prefix
// index and eviction, and sequences that adopt cached blocks.
//
// A sequence's prompt is cut into full blocks of block_size tokens; block i
// is keyed by a chained hash: root = H(model fingerprint, salt), key_i =
// H(key_{i-1}, tokens of block i). The salt enters at the root, so different
// tenants never share a block. Only full blocks are indexed; the last partial
// block is always private. Blocks a sequence adopts are shared read-only.
// Past its last whole cached block a prompt may still share the first tokens
// of an indexed block that follows it (a prompt repeated whole, whose last
// block was filled by generated tokens, or was left partial when its
// sequence ended: such a tail is indexed too, under a key of its own that no
// whole block has, and never goes to a tier): that block's K/V are copied
// into a private block and those tokens count as cached, so reuse is
// token-exact rather than block-exact (children_ maps a key to the keys
// indexed after it).
// Sliding-window models (KvShape::window, docs/KV_CACHE.md): the local
// layers' rows live in a second pool keyed by the same chain hashes; a
// running sequence releases its local blocks once they slide out of the
// window (they stay cached for hits while the pool has room), and a hit
// adopts a prefix only up to a block boundary whose window tail, the local
// blocks its next position reads, is still there.
// Thread-safety: none; owned by one step loop.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kvcache/block_pool.h"
#include "kvcache/kv_sequence.h"
#include "sched/request_progress.h"

namespace pc {

struct CacheOptions {
  size_t block_size = 16;  // tokens per block
  KvDtype dtype = KvDtype::kF16;
  size_t mem_bytes = 0;    // K/V bytes for the whole pool
  // Sliding-window models: false keeps every layer's rows for every
  // position in one pool, as a model without windows.
  bool bound_windows = true;
  // The most tokens one step computes for a sequence: the local pool holds at
  // least the windows of 8 sequences plus one such step.
  size_t step_tokens = 2048;
};

class PrefixCache;

// Blocks of the global pool and, for a sliding-window model with
// bound_windows, of the local pool (0 otherwise): PoolSizesFor below.
struct PoolSizes {
  size_t global = 0, local = 0;
};

// Hooks into the pool for the spill tiers, called on the owning (loop)
// thread with a copy of the block's payload (PrefixCache::BlockBytes: the
// block's token ids, then K and V layer by layer).
class PoolListener {
 public:
  virtual ~PoolListener() = default;
  // A block just computed and indexed.
  virtual void OnRegistered(const Hash128& key, std::vector<uint8_t> bytes) = 0;
  // An indexed block about to be overwritten (evicted from the pool).
  virtual void OnEvicted(const Hash128& key, std::vector<uint8_t> bytes) = 0;
  // A buffer for the next payload (one an earlier payload left, so its pages
  // are already mapped: tier.h says why), or an empty one.
  virtual std::vector<uint8_t> SpareBuffer() { return {}; }
};

class CachedSequence : public KvSequence {
 public:
  ~CachedSequence() override;
  KvStore& store() override;
  std::span<const int32_t> block_table() const override { return table_; }
  std::span<const int32_t> local_block_table() const override { return local_table_; }
  // Blocks held now: the global layers' (every position) and the local
  // layers' (the window's; 0 when the cache is not split).
  size_t num_global_blocks() const { return table_.size(); }
  size_t num_local_blocks_held() const;
  // The request's progress record counts what has K/V (request_progress.h):
  // one count, shared with the scheduler.
  size_t num_computed() const override { return progress_->num_computed; }
  Status Reserve(size_t num_tokens) override;
  // For a caller that drives the sequence alone (Generate, tests): the
  // record takes the tokens past its own (generated ones), counts them, and
  // the blocks they fill are indexed.
  void Computed(std::span<const int32_t> tokens) override;
  // Indexes every block the record's count has filled since (the engine:
  // the scheduler counted the step's tokens).
  void IndexComputed();

  size_t num_cached_tokens() const { return num_cached_tokens_; }

 private:
  friend class PrefixCache;

  CachedSequence(PrefixCache& cache, std::shared_ptr<RequestProgress> progress, Hash128 root, bool use_cache)
      : cache_(cache), progress_(std::move(progress)), last_hash_(root), use_cache_(use_cache) {}
  // The tokens whose K/V are in table_.
  std::span<const int32_t> computed_tokens() const { return {progress_->tokens.data(), progress_->num_computed}; }

  PrefixCache& cache_;
  std::shared_ptr<RequestProgress> progress_;
  // Releases the local blocks the window has left behind.
  void SlideWindow();

  std::vector<int32_t> table_;
  // Split caches: local_table_[j] is block j's local block, or the cache's
  // sentinel (kNoLocalBlock, zeros, never written) once it slid out of the
  // window; as long as table_.
  std::vector<int32_t> local_table_;
  size_t local_released_ = 0;    // entries below this are the sentinel
  Hash128 last_hash_;            // chain hash of the last full block
  size_t num_hashed_blocks_ = 0;
  std::vector<Hash128> prompt_keys_;  // the prompt's chain hashes, when Start was given them
  size_t num_cached_tokens_ = 0;
  bool use_cache_;
};

class PrefixCache {
 public:
  PrefixCache(const KvShape& shape, const Hash128& model_fingerprint, const CacheOptions& opt);

  // Starts a sequence for `prompt`, adopting the longest chain of cached full
  // blocks (none when use_cache is false). At least one prompt token is left
  // to compute, since the first output needs its logits, unless
  // have_last_logits: the caller holds them (LogitsMemo), and every cached
  // token is adopted, the last one too (num_computed() == prompt.size() when
  // all of them were).
  // keys: the prompt's chain hashes (BlockHashes) when the caller has them
  // already, so a prompt is hashed once on its way in; empty: computed here.
  // The prompt is the record's tokens (a resumed request's include what it
  // generated); Start sets the record's count to what it adopted.
  Result<std::unique_ptr<CachedSequence>> Start(std::shared_ptr<RequestProgress> progress, std::string_view salt,
                                                bool use_cache = true, std::span<const Hash128> keys = {},
                                                bool have_last_logits = false);
  // The prompt alone, in a record of its own (tests, one-off callers).
  Result<std::unique_ptr<CachedSequence>> Start(std::span<const int32_t> prompt, std::string_view salt,
                                                bool use_cache = true, std::span<const Hash128> keys = {},
                                                bool have_last_logits = false);
  // A key for the whole prompt under this salt (its last whole block's
  // chain hash, chained with the tokens after it): what LogitsMemo files
  // the prompt's last logits under. keys as for Start.
  Hash128 PromptKey(std::span<const int32_t> prompt, std::string_view salt, std::span<const Hash128> keys = {}) const;

  // Chain hashes of the prompt's full blocks under this salt: the keys Start
  // would look up (used by the scheduler to spot shared prefixes).
  std::vector<Hash128> BlockHashes(std::span<const int32_t> prompt, std::string_view salt) const;

  void set_listener(PoolListener* l) { listener_ = l; }
  // How many of keys, from the first, are indexed in the pool (split
  // caches: as far as a hit could adopt, to a boundary with its window tail).
  size_t NumPoolLeading(std::span<const Hash128> keys) const;
  // What installing a tier's block did.
  struct Install {
    enum class Result {
      kInstalled,      // block holds it, with one reference (ReleaseBlock drops it)
      kWrongTokens,    // the payload does not hold `tokens` (counted): a tier
                       // entry that claims a key its content does not match
      kMalformed,      // wrong payload or token count
      kAlreadyCached,  // the key is indexed (computed meanwhile)
      kPoolFull,       // no block could be freed
    };
    Result result;
    int32_t block = -1;
    bool installed() const { return result == Result::kInstalled; }
  };
  // Puts a block loaded from a tier into the pool under key (split caches:
  // its window-tail rows too, also when the global rows were there already).
  Install InstallBlock(const Hash128& key, std::span<const uint8_t> payload, std::span<const int32_t> tokens);
  void ReleaseBlock(int32_t b) { pool_.Unref(b); }
  // Holds a reference on each of keys' leading blocks indexed in the pool
  // (ReleaseBlock drops each), so that installing what follows them cannot
  // evict them; returns them.
  std::vector<int32_t> HoldPoolLeading(std::span<const Hash128> keys);
  // A copy of one block as a tier stores it: its block_size token ids
  // (int32), then K and V layer by layer. payload_bytes() long. Split
  // caches: a local layer's rows come from the local block of the same key
  // (zeros when it was evicted), and an int32 at the end says whether they
  // are there (1) or not (0).
  // Written into `into` (its capacity reused).
  std::vector<uint8_t> BlockBytes(int32_t b, std::vector<uint8_t> into = {});
  size_t payload_bytes() const {
    return block_size() * sizeof(int32_t) + store_.block_bytes() + (split() ? sizeof(int32_t) : 0);
  }
  // Adoptions refused because a block's tokens were not the ones its key
  // stands for (from the pool's index or from a tier).
  uint64_t num_token_mismatches() const { return token_mismatches_; }
  // Whole blocks hashed so far (BlockHashes, Start without keys, blocks
  // filled by sequences): how the tests see that a prompt is hashed once.
  uint64_t num_block_hashes() const { return block_hashes_; }

  KvStore& store() { return store_; }
  const KvStore& store() const { return store_; }
  BlockPool& pool() { return pool_; }
  const BlockPool& pool() const { return pool_; }
  // Split caches: the local layers' pool (its block 0 is the sentinel,
  // always referenced) and the window it serves, tokens; 0 when not split.
  bool split() const { return window_ > 0; }
  size_t window_tokens() const { return window_; }
  const BlockPool& local_pool() const { return local_pool_; }
  // The most local blocks a running sequence holds between steps.
  size_t local_blocks_per_sequence() const { return split() ? (window_ + block_size() - 1) / block_size() + 1 : 0; }
  size_t block_size() const { return store_.block_size(); }
  // Identifies model and KV layout: tier entries under another are not ours.
  const Hash128& layout_fingerprint() const { return fingerprint_; }

 private:
  friend class CachedSequence;
  PrefixCache(const KvShape& shape, const Hash128& model_fingerprint, const CacheOptions& opt, const PoolSizes& sizes);
  // Allocate with the eviction hook: an evicted block's bytes go to the listener first.
  std::optional<int32_t> AllocateBlock();
  // The tokens an indexed block holds: every adoption checks them.
  std::span<int32_t> TokensOf(int32_t b) {
    return {block_tokens_.data() + static_cast<size_t>(b) * block_size(), block_size()};
  }
  static constexpr int32_t kNoLocalBlock = 0;
  // The first block whose local rows position `next` reads (the window's
  // first position, next - window + 1).
  size_t FirstLocalBlock(size_t next) const { return next + 1 > window_ ? (next + 1 - window_) / block_size() : 0; }
  // Whether blocks [FirstLocalBlock(next), k) of the chain `keys` have their
  // local rows indexed, for the prompt's tokens.
  bool LocalTailPresent(std::span<const Hash128> keys, std::span<const int32_t> prompt, size_t k, size_t next) const;
  std::span<int32_t> LocalTokensOf(int32_t b) {
    return {local_tokens_.data() + static_cast<size_t>(b) * block_size(), block_size()};
  }
  std::span<const int32_t> LocalTokensOf(int32_t b) const {
    return {local_tokens_.data() + static_cast<size_t>(b) * block_size(), block_size()};
  }
  // Split caches: keeps the longest of the seq's matched blocks (keys
  // `chain`) whose window tail is indexed, and adopts that tail.
  void AdoptWindowTail(CachedSequence& seq, std::span<const Hash128> chain, std::span<const int32_t> prompt,
                       bool have_last_logits);
  // Copies every local layer's rows of local block from into local block to.
  void CopyLocal(int32_t from, int32_t to);
  void CopyGlobal(int32_t from, int32_t to);
  // A tier payload's local rows as a cached local block under key.
  void InstallLocal(const Hash128& key, std::span<const uint8_t> payload, std::span<const int32_t> tokens);
  // Indexes a local block under key (tokens as for the global block).
  void RegisterLocal(int32_t b, const Hash128& key, std::span<const int32_t> tokens);

  size_t window_ = 0;
  KvStore store_;
  BlockPool pool_;
  BlockPool local_pool_;
  std::vector<int32_t> local_tokens_;  // [local blocks][block_size]
  Hash128 fingerprint_;
  PoolListener* listener_ = nullptr;
  std::vector<int32_t> block_tokens_;  // [num_blocks][block_size]
  // Adopts the longest run of a child block's leading tokens (at most
  // `limit`) into a private copy; returns the tokens adopted.
  size_t AdoptPartialBlock(CachedSequence& seq, std::span<const int32_t> rest, size_t limit);
  void NoteChild(const Hash128& parent, const Hash128& child);
  // Indexes a sequence's last, partial block as it ends (see above).
  // local: its local block on a split cache (indexed with it).
  void RegisterPartial(int32_t b, const Hash128& parent, std::span<const int32_t> tokens, int32_t local);
  std::vector<uint8_t> partial_;  // per block: indexed as a partial tail
  std::unordered_multimap<Hash128, Hash128, Hash128Hasher> children_;
  uint64_t token_mismatches_ = 0;
  mutable uint64_t block_hashes_ = 0;
};

// Blocks that fit in mem_bytes for this model (at least 1): the global
// pool's and, for a sliding-window model with bound_windows, the local
// pool's (0 otherwise; see prefix_cache.cc for the split).
PoolSizes PoolSizesFor(const KvShape& c, const CacheOptions& opt);
size_t BlocksForMemory(const KvShape& c, const CacheOptions& opt);
// Default pool size: a quarter of available memory, capped at what 8 full
// contexts need.
size_t DefaultKvCacheBytes(const KvShape& c, const CacheOptions& opt);

}  // namespace pc
