#include "kvcache/disk_tier.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "base/clock.h"

namespace pc {

namespace fs = std::filesystem;

namespace {
constexpr char kMagic[8] = {'P', 'C', 'K', 'V', 'S', 'E', 'G', '1'};

void PutU32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }
void PutU64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }
uint64_t GetU64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
}  // namespace

DiskTier::DiskTier(DiskTierOptions opt) : opt_(std::move(opt)) {
  stats_.bytes_budget = opt_.budget_bytes;
  std::error_code ec;
  fs::create_directories(opt_.dir, ec);
  if (ec) {
    stats_.healthy = false;
    ++stats_.num_errors;
    return;
  }
  Scan();
}

std::string DiskTier::HeaderBytes() const {
  std::string h(kMagic, 8);
  PutU32(h, kFormatVersion);
  PutU32(h, static_cast<uint32_t>(kHeaderBytes));
  h.append(reinterpret_cast<const char*>(&opt_.fingerprint), 16);
  for (uint32_t v : {opt_.n_layer, opt_.kv_dim, opt_.block_size, opt_.elem_bytes, opt_.seal.keyed() ? 1u : 0u}) {
    PutU32(h, v);
  }
  h.resize(kHeaderBytes, '\0');
  return h;
}

void DiskTier::Scan() {
  std::vector<std::pair<fs::file_time_type, std::string>> files;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(opt_.dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && name.size() > 4 && name.rfind("seg-", 0) == 0 && e.path().extension() == ".pcs") {
      files.emplace_back(e.last_write_time(ec), e.path().string());
    }
  }
  std::sort(files.begin(), files.end());  // oldest first: least recently used
  for (const auto& [t, path] : files) {
    uint64_t id = 0;
    if (std::sscanf(fs::path(path).filename().c_str(), "seg-%lu.pcs", &id) != 1) continue;
    ScanSegment(path, id);
    next_segment_ = std::max(next_segment_, id + 1);
  }
}

void DiskTier::ScanSegment(const std::string& path, uint64_t id) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return;
  const std::string want = HeaderBytes();
  std::string got(kHeaderBytes, '\0');
  if (std::fread(got.data(), 1, kHeaderBytes, f) != kHeaderBytes || got != want) {
    ++ignored_files_;  // other version, model, layout or seal: not ours to read or delete
    std::fclose(f);
    return;
  }
  Segment seg{path, kHeaderBytes, ++clock_, 0};
  uint64_t offset = kHeaderBytes;
  uint8_t eh[kEntryHeaderBytes];
  std::error_code ec;
  const uint64_t file_size = fs::file_size(path, ec);
  while (std::fread(eh, 1, kEntryHeaderBytes, f) == kEntryHeaderBytes) {
    Hash128 key;
    std::memcpy(&key, eh, 16);
    const uint64_t size = GetU64(eh + 16);
    const uint64_t payload_at = offset + kEntryHeaderBytes;
    if (size > file_size || payload_at + size > file_size) {
      ++stats_.num_corrupt;  // truncated: keep what came before
      break;
    }
    if (index_.count(key) == 0) {
      Loc loc{id, payload_at, size, {}};
      std::memcpy(loc.tag.data(), eh + 24, PayloadSeal::kTagBytes);
      index_[key] = loc;
      ++seg.live;
    }
    offset = payload_at + size;
    if (std::fseek(f, static_cast<long>(offset), SEEK_SET) != 0) break;
  }
  std::fclose(f);
  seg.bytes = offset;
  if (seg.live == 0) {
    fs::remove(path, ec);
    return;
  }
  stats_.bytes_used += seg.bytes;
  segments_[id] = seg;
  while (stats_.bytes_used > opt_.budget_bytes && segments_.size() > 1) DropSegmentLocked(segments_.begin()->first);
}

void DiskTier::DropSegmentLocked(uint64_t id) {
  auto it = segments_.find(id);
  if (it == segments_.end()) return;
  for (auto e = index_.begin(); e != index_.end();) {
    if (e->second.segment == id) e = index_.erase(e);
    else ++e;
  }
  std::error_code ec;
  fs::remove(it->second.path, ec);
  stats_.bytes_used -= it->second.bytes;
  ++stats_.num_evicted;
  segments_.erase(it);
}

void DiskTier::DropEntryLocked(const Hash128& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return;
  auto seg = segments_.find(it->second.segment);
  index_.erase(it);
  if (seg != segments_.end() && --seg->second.live == 0) DropSegmentLocked(seg->first);
}

void DiskTier::Insert(std::span<const BlockPayload> blocks) {
  MutexLock lock(mu_);
  if (!stats_.healthy || NowNs() < writes_paused_until_ns_) {
    stats_.num_dropped += blocks.size();
    return;
  }
  std::string data = HeaderBytes();
  std::vector<std::pair<Hash128, Loc>> added;
  const uint64_t id = next_segment_++;
  for (const BlockPayload& b : blocks) {
    if (index_.count(b.key)) continue;  // already on disk
    const PayloadSeal::Tag tag = opt_.seal.Compute(b.key, b.bytes);
    data.append(reinterpret_cast<const char*>(&b.key), 16);
    PutU64(data, b.bytes.size());
    data.append(reinterpret_cast<const char*>(tag.data()), tag.size());
    added.push_back({b.key, Loc{id, data.size(), b.bytes.size(), tag}});
    data.append(reinterpret_cast<const char*>(b.bytes.data()), b.bytes.size());
  }
  if (added.empty()) return;
  if (data.size() > opt_.budget_bytes) {
    stats_.num_dropped += added.size();
    return;
  }
  while (stats_.bytes_used + data.size() > opt_.budget_bytes && !segments_.empty()) {
    auto lru = std::min_element(segments_.begin(), segments_.end(),
                                [](const auto& a, const auto& b) { return a.second.last_used < b.second.last_used; });
    DropSegmentLocked(lru->first);
  }
  const std::string path = fmt::format("{}/seg-{}.pcs", opt_.dir, id);
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  const bool ok = f != nullptr && std::fwrite(data.data(), 1, data.size(), f) == data.size() && std::fflush(f) == 0;
  if (f != nullptr) std::fclose(f);
  std::error_code ec;
  if (ok) fs::rename(tmp, path, ec);
  if (!ok || ec) {
    fs::remove(tmp, ec);
    ++stats_.num_errors;
    stats_.num_dropped += added.size();
    writes_paused_until_ns_ = NowNs() + 60'000'000'000;  // disk full or gone: try again in a minute
    return;
  }
  for (const auto& [k, loc] : added) index_[k] = loc;
  segments_[id] = Segment{path, data.size(), ++clock_, added.size()};
  stats_.bytes_used += data.size();
  stats_.num_inserted += added.size();
}

size_t DiskTier::CountLeading(std::span<const Hash128> keys) {
  MutexLock lock(mu_);
  size_t n = 0;
  while (n < keys.size() && index_.count(keys[n])) ++n;
  return n;
}

size_t DiskTier::LoadInto(std::span<const Hash128> keys, std::vector<std::vector<uint8_t>>* out) {
  MutexLock lock(mu_);
  size_t n = 0;
  for (const Hash128& k : keys) {
    auto it = index_.find(k);
    if (it == index_.end()) break;
    const Loc loc = it->second;
    Segment& seg = segments_.at(loc.segment);
    std::vector<uint8_t>& buf = LoadSlot(out, n);
    buf.resize(loc.size);
    std::FILE* f = std::fopen(seg.path.c_str(), "rb");
    bool ok = f != nullptr && std::fseek(f, static_cast<long>(loc.offset), SEEK_SET) == 0 &&
              std::fread(buf.data(), 1, buf.size(), f) == buf.size();
    if (f != nullptr) std::fclose(f);
    ok = ok && opt_.seal.Verify(k, buf, loc.tag);
    if (!ok) {
      ++stats_.num_corrupt;
      DropEntryLocked(k);  // recomputed by the caller
      break;
    }
    seg.last_used = ++clock_;
    ++stats_.num_loaded;
    ++n;
  }
  return n;
}

void DiskTier::Erase(std::span<const Hash128> keys) {
  MutexLock lock(mu_);
  for (const Hash128& k : keys) DropEntryLocked(k);
}

TierStats DiskTier::stats() const {
  MutexLock lock(mu_);
  TierStats s = stats_;
  s.num_entries = index_.size();
  s.healthy = stats_.healthy && NowNs() >= writes_paused_until_ns_;
  return s;
}

uint64_t DiskTier::num_ignored_files() const {
  MutexLock lock(mu_);
  return ignored_files_;
}

}  // namespace pc
