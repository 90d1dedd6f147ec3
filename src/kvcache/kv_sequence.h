// What the cache layer needs to know of a model and of a running sequence,
// so it sits below the model: the K/V shape (layers, row width, context)
// and the KvSequence interface the forward passes write through.
// Thread-safety: KvShape is a plain value; a KvSequence belongs to the
// thread running its forward passes (the engine's step loop).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "kvcache/kv_store.h"

namespace pc {

// One model's K/V geometry (ModelConfig::kv_shape()).
struct KvShape {
  size_t n_layer = 0;
  size_t kv_dim = 0;  // n_kv_heads * head_dim: one K (or V) row, in elements
  size_t n_ctx = 0;   // the model's trained context, tokens
  // Sliding-window layers: local_layers[l] = 1 when layer l sees, at
  // position p, only positions (p - window, p]. Empty or window 0: none.
  std::vector<uint8_t> local_layers = {};
  size_t window = 0;  // tokens
};

// Where one sequence's K/V live. Generate asks for capacity before each
// batch and reports which tokens it computed, so an implementation can
// share and register blocks (the prefix cache) or just own them (Session).
class KvSequence {
 public:
  virtual ~KvSequence() = default;
  virtual KvStore& store() = 0;
  virtual std::span<const int32_t> block_table() const = 0;
  // The local layers' blocks when store() is split (kv_store.h), else empty.
  virtual std::span<const int32_t> local_block_table() const { return {}; }
  // Tokens at positions [0, num_computed()) already have K/V.
  virtual size_t num_computed() const = 0;
  // Blocks for positions [0, num_tokens); error if the pool is exhausted.
  virtual Status Reserve(size_t num_tokens) = 0;
  // The K/V of `tokens` were written at positions num_computed()...
  virtual void Computed(std::span<const int32_t> tokens) = 0;
};

}  // namespace pc
