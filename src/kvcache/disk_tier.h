// The disk tier: KV blocks in segment files under a user-chosen directory,
// surviving restarts. One Insert batch becomes one segment file, written to
// a temporary name and renamed into place (a crash leaves no half segment
// under a real name). Layout (little-endian):
//
//   header, 64 bytes: "PCKVSEG1", format version (u32), header size (u32),
//     layout fingerprint (16 bytes: model + block size + KV dtype),
//     n_layer, kv_dim, block_size, element bytes, keyed seal (u32 each),
//     zero padding
//   entries: key (16 bytes), payload size (u64), seal tag (32 bytes:
//     PayloadSeal, an HMAC-SHA256 under the tier secret or an unkeyed
//     checksum), payload
//
// At start the directory is scanned: segments of another version,
// fingerprint or seal kind are ignored (left alone, not counted against the
// budget); a truncated segment keeps the entries before the cut. A load
// verifies the tag; a mismatch or short read drops the entry and counts it
// corrupt.
// The byte budget is kept by deleting least recently used segments. A write
// that fails (disk full) stops writes for a minute; serving goes on.
// Thread-safety: all methods lock one mutex.
#pragma once
#include <map>
#include <string>

#include "base/mutex.h"
#include "kvcache/payload_seal.h"
#include "kvcache/tier.h"

namespace pc {

struct DiskTierOptions {
  std::string dir;
  uint64_t budget_bytes = uint64_t{1} << 30;
  Hash128 fingerprint;  // model + layout: entries of another are never read
  uint32_t n_layer = 0, kv_dim = 0, block_size = 0, elem_bytes = 0;  // elem_bytes 1: Q8_0 blocks
  PayloadSeal seal;
};

class DiskTier : public KvTier {
 public:
  explicit DiskTier(DiskTierOptions opt);
  const std::string& name() const override { return name_; }
  void Insert(std::span<const BlockPayload> blocks) override;
  size_t CountLeading(std::span<const Hash128> keys) override;
  size_t LoadInto(std::span<const Hash128> keys, std::vector<std::vector<uint8_t>>* out) override;
  void Erase(std::span<const Hash128> keys) override;
  TierStats stats() const override;
  uint64_t num_ignored_files() const;

  static constexpr uint32_t kFormatVersion = 2;
  static constexpr size_t kHeaderBytes = 64, kEntryHeaderBytes = 24 + PayloadSeal::kTagBytes;

 private:
  struct Loc {
    uint64_t segment = 0, offset = 0, size = 0;
    PayloadSeal::Tag tag{};
  };
  struct Segment {
    std::string path;
    uint64_t bytes = 0, last_used = 0, live = 0;
  };
  void Scan() PC_REQUIRES(mu_);
  void ScanSegment(const std::string& path, uint64_t id) PC_REQUIRES(mu_);
  void DropSegmentLocked(uint64_t id) PC_REQUIRES(mu_);
  void DropEntryLocked(const Hash128& key) PC_REQUIRES(mu_);
  std::string HeaderBytes() const;

  std::string name_ = "disk";
  DiskTierOptions opt_;
  mutable Mutex mu_;
  std::unordered_map<Hash128, Loc, Hash128Hasher> index_ PC_GUARDED_BY(mu_);
  std::map<uint64_t, Segment> segments_ PC_GUARDED_BY(mu_);
  uint64_t next_segment_ PC_GUARDED_BY(mu_) = 1;
  uint64_t clock_ PC_GUARDED_BY(mu_) = 0;
  uint64_t ignored_files_ PC_GUARDED_BY(mu_) = 0;
  int64_t writes_paused_until_ns_ PC_GUARDED_BY(mu_) = 0;
  TierStats stats_ PC_GUARDED_BY(mu_);
};


}  // namespace pc
