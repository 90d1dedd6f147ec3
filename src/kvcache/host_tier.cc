#include "kvcache/tier.h"

namespace pc {

HostTier::HostTier(uint64_t budget_bytes) { stats_.bytes_budget = budget_bytes; }

void HostTier::EraseLocked(const Hash128& k, std::vector<uint8_t>* keep) {
  auto it = map_.find(k);
  if (it == map_.end()) return;
  stats_.bytes_used -= it->second.bytes.size();
  if (keep != nullptr) *keep = std::move(it->second.bytes);
  lru_.erase(it->second.lru);
  map_.erase(it);
}

void HostTier::Insert(std::span<const BlockPayload> blocks) {
  MutexLock lock(mu_);
  for (const BlockPayload& b : blocks) {
    if (b.bytes.size() > stats_.bytes_budget) {
      ++stats_.num_dropped;
      continue;
    }
    // The copy goes into the buffer of an entry it replaces or evicts where
    // there is one (tier.h: a fresh block-sized buffer is page faults).
    std::vector<uint8_t> bytes;
    EraseLocked(b.key, &bytes);
    while (stats_.bytes_used + b.bytes.size() > stats_.bytes_budget && !lru_.empty()) {
      EraseLocked(lru_.back(), &bytes);
      ++stats_.num_evicted;
    }
    bytes.assign(b.bytes.begin(), b.bytes.end());
    lru_.push_front(b.key);
    map_.emplace(b.key, Entry{std::move(bytes), lru_.begin()});
    stats_.bytes_used += b.bytes.size();
    ++stats_.num_inserted;
  }
}

size_t HostTier::CountLeading(std::span<const Hash128> keys) {
  MutexLock lock(mu_);
  size_t n = 0;
  while (n < keys.size() && map_.count(keys[n])) ++n;
  return n;
}

size_t HostTier::LoadInto(std::span<const Hash128> keys, std::vector<std::vector<uint8_t>>* out) {
  MutexLock lock(mu_);
  size_t n = 0;
  for (const Hash128& k : keys) {
    auto it = map_.find(k);
    if (it == map_.end()) break;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    LoadSlot(out, n++).assign(it->second.bytes.begin(), it->second.bytes.end());
    ++stats_.num_loaded;
  }
  return n;
}

void HostTier::Erase(std::span<const Hash128> keys) {
  MutexLock lock(mu_);
  for (const Hash128& k : keys) EraseLocked(k, nullptr);
}

TierStats HostTier::stats() const {
  MutexLock lock(mu_);
  TierStats s = stats_;
  s.num_entries = map_.size();
  return s;
}

}  // namespace pc
