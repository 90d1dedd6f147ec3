// The last prompt token's logits of recent prompts, so that a prompt whose
// K/V are all cached starts its output without a forward pass (the pass
// would recompute exactly these bits: the kernels are batch-invariant).
// Entries are filed under PrefixCache::PromptKey (model, KV layout, salt and
// every token) and dropped least recently used past a byte budget.
// Thread-safety: none; owned by the engine's loop thread.
#pragma once
#include <cstddef>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/hash128.h"

namespace pc {

class LogitsMemo {
 public:
  // budget_bytes: the logits kept at most (at least one entry is kept).
  explicit LogitsMemo(size_t budget_bytes) : budget_bytes_(budget_bytes) {}

  void Put(const Hash128& key, std::span<const float> logits);
  // A copy of the logits filed under key (now the most recently used).
  std::optional<std::vector<float>> Get(const Hash128& key);
  size_t size() const { return entries_.size(); }
  size_t bytes() const { return bytes_; }

 private:
  using Entry = std::pair<Hash128, std::vector<float>>;
  size_t budget_bytes_;
  size_t bytes_ = 0;
  std::list<Entry> entries_;  // most recent first
  std::unordered_map<Hash128, std::list<Entry>::iterator, Hash128Hasher> index_;
};

}  // namespace pc
