// Spill tiers below the hot KV pool: host RAM, disk, Redis. A tier stores
// whole blocks (K and V of every layer, as the pool lays them out) under
// their chained hash. The interface is batch-first so a networked tier pays
// one round trip per call, not per block:
//   Insert(blocks)        store; any block may be dropped (budget, faults)
//   CountLeading(keys)    how many of the keys, from the first, are present
//   LoadInto(keys, out)   payloads of the leading present keys, verified,
//                         into out's buffers (reused: see below); stops at
//                         the first missing or corrupt one. Load(keys) the
//                         same into fresh buffers.
//   Erase(keys)
//   Probe()               refresh the health flag (Redis: reconnect or PING)
// A tier that fails (Redis down, disk full) degrades to storing or finding
// nothing; it never throws and never aborts.
// Why buffers are reused: a block is a few hundred KiB, and a fresh buffer
// that size is fresh pages, each faulted in on first write. On a virtualised
// CPU that cost ~1 ms a block, more than copying it (64 blocks of 368 KiB:
// 50-64 ms into fresh vectors, 1.1 ms into one reused buffer), so the host
// tier loaded slower than the disk tier (docs/BENCHMARKS.md, thirteenth
// session). The tier stack hands LoadInto the buffers of earlier loads.
// Thread-safety: every method of every tier may be called from any thread
// (each tier has its own lock); the tier stack calls them from its worker
// threads, never from the engine's step loop.
#pragma once
#include <cstdint>
#include <list>
#include <mutex>

#include "base/mutex.h"
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/hash128.h"

namespace pc {

struct BlockPayload {
  Hash128 key;
  std::vector<uint8_t> bytes;
};

struct TierStats {
  uint64_t num_inserted = 0, num_dropped = 0;  // blocks stored / refused
  uint64_t num_loaded = 0, num_corrupt = 0;    // blocks loaded / failed verification
  uint64_t num_evicted = 0, num_errors = 0;
  uint64_t bytes_used = 0, bytes_budget = 0;
  uint64_t num_entries = 0;
  bool healthy = true;
};

class KvTier {
 public:
  virtual ~KvTier() = default;
  virtual const std::string& name() const = 0;
  virtual void Insert(std::span<const BlockPayload> blocks) = 0;
  virtual size_t CountLeading(std::span<const Hash128> keys) = 0;
  // Writes payload i into (*out)[i] (resized to the payload; its capacity
  // reused where out already holds that buffer, appended where not) and
  // returns how many; out may hold more buffers than that afterwards.
  virtual size_t LoadInto(std::span<const Hash128> keys, std::vector<std::vector<uint8_t>>* out) = 0;
  std::vector<std::vector<uint8_t>> Load(std::span<const Hash128> keys) {
    std::vector<std::vector<uint8_t>> out;
    out.resize(LoadInto(keys, &out));
    return out;
  }
  virtual void Erase(std::span<const Hash128> keys) = 0;
  virtual TierStats stats() const = 0;
  // Refreshes stats().healthy without storing or loading anything (called
  // about once a second while the tier stack is idle).
  virtual void Probe() {}
};

// (*out)[i] for LoadInto, appended when out has fewer buffers.
inline std::vector<uint8_t>& LoadSlot(std::vector<std::vector<uint8_t>>* out, size_t i) {
  if (out->size() <= i) out->resize(i + 1);
  return (*out)[i];
}

// A compact in-RAM copy that outlives pool eviction, with a byte budget and
// LRU eviction.
class HostTier : public KvTier {
 public:
  explicit HostTier(uint64_t budget_bytes);
  const std::string& name() const override { return name_; }
  void Insert(std::span<const BlockPayload> blocks) override;
  size_t CountLeading(std::span<const Hash128> keys) override;
  size_t LoadInto(std::span<const Hash128> keys, std::vector<std::vector<uint8_t>>* out) override;
  void Erase(std::span<const Hash128> keys) override;
  TierStats stats() const override;

 private:
  struct Entry {
    std::vector<uint8_t> bytes;
    std::list<Hash128>::iterator lru;
  };
  // Drops k's entry; its buffer into *keep when keep is not null.
  void EraseLocked(const Hash128& k, std::vector<uint8_t>* keep) PC_REQUIRES(mu_);
  std::string name_ = "host";
  mutable Mutex mu_;
  std::unordered_map<Hash128, Entry, Hash128Hasher> map_ PC_GUARDED_BY(mu_);
  std::list<Hash128> lru_ PC_GUARDED_BY(mu_);  // front: most recently used
  TierStats stats_ PC_GUARDED_BY(mu_);
};

}  // namespace pc
