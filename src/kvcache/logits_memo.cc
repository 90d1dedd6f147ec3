#include "kvcache/logits_memo.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"

namespace pc {

namespace {
size_t SlotsFor(size_t budget_bytes, size_t row_floats) {
  if (budget_bytes == 0 || row_floats == 0) return 0;
  return std::max<size_t>(1, budget_bytes / (row_floats * sizeof(float)));
}
}  // namespace

LogitsMemo::LogitsMemo(size_t budget_bytes, size_t row_floats)
    : row_floats_(row_floats),
      num_slots_(SlotsFor(budget_bytes, row_floats)),
      store_(num_slots_ * row_floats * sizeof(float)) {}

void LogitsMemo::Put(const Hash128& key, std::span<const float> logits) {
  if (num_slots_ == 0) return;
  PC_CHECK(logits.size() == row_floats_);
  size_t slot;
  if (auto it = index_.find(key); it != index_.end()) {
    slot = it->second->slot;  // the same prompt again: its row is rewritten
    lru_.erase(it->second);
    index_.erase(it);
  } else if (next_unused_ < num_slots_) {
    slot = next_unused_++;
  } else {
    slot = lru_.back().slot;  // the least recently used entry gives up its row
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
  std::memcpy(Row(slot), logits.data(), row_floats_ * sizeof(float));
  lru_.push_front({key, slot});
  index_[key] = lru_.begin();
}

bool LogitsMemo::Get(const Hash128& key, std::vector<float>* out) {
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  lru_.splice(lru_.begin(), lru_, it->second);
  const float* row = Row(it->second->slot);
  out->assign(row, row + row_floats_);
  return true;
}

}  // namespace pc
