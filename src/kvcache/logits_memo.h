// The last prompt token's logits of recent prompts, so that a prompt whose
// K/V are all cached starts its output without a forward pass (the pass
// would recompute exactly these bits: the kernels are batch-invariant).
// Entries are filed under PrefixCache::PromptKey (model, KV layout, salt and
// every token) and dropped least recently used past a byte budget.
// Every entry is one row of the vocabulary's floats, kept in a slot of one
// buffer made at construction: a fresh 128 KiB+ vector per prompt was a
// fresh mapping (glibc maps blocks that large), its pages faulted in inside
// the step that computed them: 0.42-0.52 ms of a 6-token cache hit's ~6 ms
// step on a virtualised CPU (docs/BENCHMARKS.md, thirteenth session).
// Thread-safety: none; owned by the engine's loop thread.
#pragma once
#include <cstddef>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/hash128.h"
#include "base/page_buffer.h"

namespace pc {

class LogitsMemo {
 public:
  // budget_bytes: the logits kept at most (0: none; else at least one row);
  // row_floats: every entry's length (the vocabulary size).
  LogitsMemo(size_t budget_bytes, size_t row_floats);

  // logits.size() must be row_floats; replaces an entry of the same key.
  void Put(const Hash128& key, std::span<const float> logits);
  // Copies the logits filed under key into *out (now the most recently
  // used); false, and *out untouched, when there are none.
  bool Get(const Hash128& key, std::vector<float>* out);
  size_t size() const { return lru_.size(); }
  size_t capacity() const { return num_slots_; }
  size_t bytes() const { return size() * row_floats_ * sizeof(float); }

 private:
  struct Entry {
    Hash128 key;
    size_t slot;
  };
  float* Row(size_t slot) { return reinterpret_cast<float*>(store_.data()) + slot * row_floats_; }

  size_t row_floats_;
  size_t num_slots_;
  PageBuffer store_;  // num_slots_ rows of row_floats_
  size_t next_unused_ = 0;  // slots below it hold (or held) an entry
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<Hash128, std::list<Entry>::iterator, Hash128Hasher> index_;
};

}  // namespace pc
