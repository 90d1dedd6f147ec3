#include "kvcache/logits_memo.h"

namespace pc {

void LogitsMemo::Put(const Hash128& key, std::span<const float> logits) {
  if (auto it = index_.find(key); it != index_.end()) {
    bytes_ -= it->second->second.size() * sizeof(float);
    entries_.erase(it->second);
    index_.erase(it);
  }
  entries_.emplace_front(key, std::vector<float>(logits.begin(), logits.end()));
  index_[key] = entries_.begin();
  bytes_ += logits.size() * sizeof(float);
  while (bytes_ > budget_bytes_ && entries_.size() > 1) {
    bytes_ -= entries_.back().second.size() * sizeof(float);
    index_.erase(entries_.back().first);
    entries_.pop_back();
  }
}

std::optional<std::vector<float>> LogitsMemo::Get(const Hash128& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  entries_.splice(entries_.begin(), entries_, it->second);
  return it->second->second;
}

}  // namespace pc
