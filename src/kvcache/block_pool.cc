#include "kvcache/block_pool.h"

#include <cstring>
#include <string_view>

#include "base/check.h"

namespace pc {

BlockPool::BlockPool(int32_t num_blocks) : blocks_(static_cast<size_t>(num_blocks)), num_free_(num_blocks) {
  for (int32_t b = num_blocks - 1; b >= 0; --b) empty_.push_back(b);
}

std::optional<Hash128> BlockPool::hash_of(int32_t b) const {
  if (!blocks_[b].indexed) return std::nullopt;
  return blocks_[b].hash;
}

void BlockPool::LruRemove(int32_t b) {
  Block& k = blocks_[b];
  if (k.prev >= 0) blocks_[k.prev].next = k.next; else lru_head_ = k.next;
  if (k.next >= 0) blocks_[k.next].prev = k.prev; else lru_tail_ = k.prev;
  k.prev = k.next = -1;
}

void BlockPool::LruPushBack(int32_t b) {
  Block& k = blocks_[b];
  k.prev = lru_tail_;
  k.next = -1;
  if (lru_tail_ >= 0) blocks_[lru_tail_].next = b; else lru_head_ = b;
  lru_tail_ = b;
}

std::optional<int32_t> BlockPool::Allocate(std::optional<Hash128>* evicted) {
  if (evicted) evicted->reset();
  int32_t b;
  if (!empty_.empty()) {
    b = empty_.back();
    empty_.pop_back();
  } else if (lru_head_ >= 0) {
    b = lru_head_;
    LruRemove(b);
    Block& k = blocks_[b];
    index_.erase(k.hash);
    k.indexed = false;
    if (evicted) *evicted = k.hash;
  } else {
    return std::nullopt;
  }
  blocks_[b].refs = 1;
  --num_free_;
  return b;
}

void BlockPool::Ref(int32_t b) {
  Block& k = blocks_[b];
  if (k.refs == 0) {
    PC_CHECK(k.indexed);  // only cached blocks are re-referenced
    LruRemove(b);
    --num_free_;
  }
  ++k.refs;
}

void BlockPool::Unref(int32_t b) {
  Block& k = blocks_[b];
  PC_CHECK(k.refs > 0);
  if (--k.refs > 0) return;
  ++num_free_;
  if (k.indexed) {
    LruPushBack(b);
  } else {
    empty_.push_back(b);
  }
}

std::optional<int32_t> BlockPool::Lookup(const Hash128& h) const {
  auto it = index_.find(h);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

bool BlockPool::Register(int32_t b, const Hash128& h) {
  Block& k = blocks_[b];
  PC_CHECK(k.refs > 0);
  if (k.indexed || index_.count(h)) return false;
  k.indexed = true;
  k.hash = h;
  index_.emplace(h, b);
  return true;
}

bool BlockPool::CheckInvariants() const {
  int32_t free = 0, in_lru = 0;
  std::vector<bool> on_empty(blocks_.size(), false);
  for (int32_t b : empty_) {
    if (on_empty[b] || blocks_[b].refs != 0 || blocks_[b].indexed) return false;
    on_empty[b] = true;
  }
  for (int32_t b = lru_head_, prev = -1; b >= 0; prev = b, b = blocks_[b].next) {
    if (blocks_[b].prev != prev || blocks_[b].refs != 0 || !blocks_[b].indexed) return false;
    if (++in_lru > num_blocks()) return false;  // cycle
  }
  for (size_t b = 0; b < blocks_.size(); ++b) {
    const Block& k = blocks_[b];
    if (k.refs < 0) return false;
    if (k.refs == 0) ++free;
    if (k.indexed) {
      auto it = index_.find(k.hash);
      if (it == index_.end() || it->second != static_cast<int32_t>(b)) return false;
    }
  }
  for (const auto& [h, b] : index_) {
    if (!blocks_[b].indexed || !(blocks_[b].hash == h)) return false;
  }
  return free == num_free_ && free == static_cast<int32_t>(empty_.size()) + in_lru;
}

Hash128 ChainRoot(const Hash128& model_fingerprint, std::string_view salt) {
  std::vector<uint8_t> buf(16 + salt.size());
  std::memcpy(buf.data(), &model_fingerprint.lo, 8);
  std::memcpy(buf.data() + 8, &model_fingerprint.hi, 8);
  std::memcpy(buf.data() + 16, salt.data(), salt.size());
  return HashBytes(buf, /*seed=*/0x5a17);
}

Hash128 ChainBlock(const Hash128& parent, std::span<const int32_t> tokens) {
  std::vector<uint8_t> buf(16 + tokens.size() * 4);
  std::memcpy(buf.data(), &parent.lo, 8);
  std::memcpy(buf.data() + 8, &parent.hi, 8);
  std::memcpy(buf.data() + 16, tokens.data(), tokens.size() * 4);
  return HashBytes(buf, /*seed=*/0xb10c);
}

}  // namespace pc
