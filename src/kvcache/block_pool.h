// Block bookkeeping for the paged KV cache: reference counts, the prefix
// index (chained block hash -> block id) and the eviction order. Pure
// bookkeeping: no K/V bytes, no I/O, no threads.
//
// Block states:
//   in use     refcount > 0; may be indexed (full, shared read-only) or not
//   cached     refcount 0, indexed: keeps its hash and content, evictable
//   empty      refcount 0, not indexed: holds nothing worth keeping
// Eviction order (Allocate): empty blocks first (lowest id first), then
// cached blocks least recently released first; an evicted block leaves the
// index. Re-referencing a cached block (a prefix hit) takes it out of the
// eviction order.
// Thread-safety: none; the engine's step loop owns the pool.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/hash128.h"

namespace pc {

class BlockPool {
 public:
  explicit BlockPool(int32_t num_blocks);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t num_free() const { return num_free_; }  // empty + cached
  int32_t num_cached() const { return static_cast<int32_t>(index_.size()); }
  int32_t refcount(int32_t b) const { return blocks_[b].refs; }
  std::optional<Hash128> hash_of(int32_t b) const;

  // A block with refcount 1, evicting as documented above; nullopt if every
  // block is in use. `evicted` receives the hash dropped from the index, if any.
  std::optional<int32_t> Allocate(std::optional<Hash128>* evicted = nullptr);
  void Ref(int32_t b);
  void Unref(int32_t b);

  // The block holding this hash, if indexed.
  std::optional<int32_t> Lookup(const Hash128& h) const;
  // Indexes a computed block (whole, or a finished sequence's partial tail) under h. Returns false (and changes
  // nothing) if h is already indexed by another block or b is indexed.
  bool Register(int32_t b, const Hash128& h);

  // Checks every invariant (refcounts >= 0, free list == refcount-0 blocks,
  // index <-> block hashes consistent). For tests; O(num_blocks).
  bool CheckInvariants() const;

 private:
  struct Block {
    int32_t refs = 0;
    bool indexed = false;
    Hash128 hash;
    int32_t prev = -1, next = -1;  // LRU list of cached blocks
  };
  void LruRemove(int32_t b);
  void LruPushBack(int32_t b);

  std::vector<Block> blocks_;
  std::vector<int32_t> empty_;  // stack of empty blocks (lowest id on top)
  int32_t lru_head_ = -1, lru_tail_ = -1;
  int32_t num_free_ = 0;
  std::unordered_map<Hash128, int32_t, Hash128Hasher> index_;
};

// Root of a hash chain: model fingerprint and cache salt (tenant).
Hash128 ChainRoot(const Hash128& model_fingerprint, std::string_view salt);
// Hash of one full block: parent hash plus the block's token ids.
Hash128 ChainBlock(const Hash128& parent, std::span<const int32_t> tokens);

}  // namespace pc
