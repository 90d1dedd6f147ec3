// Paged K/V storage: for every layer, num_blocks blocks of block_size token
// rows of kv_dim elements (F16 by default, F32 or Q8_0 blocks optional:
// kv_layout.h). A sequence owns an
// ordered list of block ids (its block table); position p lives in block
// table[p / block_size], row p % block_size.
// Thread-safety: writers of distinct rows may run concurrently; callers
// serialise writes to a row against reads of it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/kv_layout.h"

namespace pc {

// "f16", "f32" or "q8_0" for heads of head_dim elements; an error names
// what does not fit (Q8_0 needs head_dim % 32 == 0).
Result<KvDtype> ParseKvDtype(const std::string& name, size_t head_dim);

class KvStore {
 public:
  KvStore(size_t n_layer, size_t kv_dim, size_t block_size, size_t num_blocks, KvDtype dtype);

  size_t block_size() const { return block_size_; }
  size_t num_layers() const { return k_.size(); }
  size_t num_blocks() const { return num_blocks_; }
  size_t kv_dim() const { return kv_dim_; }
  KvDtype dtype() const { return dtype_; }
  size_t bytes() const { return 2 * k_.size() * layer_bytes_; }
  // Bytes one block occupies across all layers, K and V.
  size_t block_bytes() const { return 2 * k_.size() * block_layer_bytes(); }

  // Stores k and v ([kv_dim] floats each) for position pos.
  void Write(size_t layer, std::span<const int32_t> table, size_t pos, const float* k, const float* v);
  KvLayerView View(size_t layer, std::span<const int32_t> table) const;

  // Raw bytes of one block's rows in one layer (for copies between tiers).
  uint8_t* BlockK(size_t layer, int32_t block);
  uint8_t* BlockV(size_t layer, int32_t block);
  size_t block_layer_bytes() const { return block_size_ * row_bytes(); }

 private:
  size_t row_bytes() const { return KvBytes(dtype_, kv_dim_); }

  size_t kv_dim_, block_size_, num_blocks_;
  KvDtype dtype_;
  size_t layer_bytes_;
  std::vector<std::vector<uint8_t>> k_, v_;  // per layer
};

}  // namespace pc
