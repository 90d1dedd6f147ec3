#include "kvcache/kv_store.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "kernels/dot.h"
#include "kernels/quant.h"

namespace pc {

Result<KvDtype> ParseKvDtype(const std::string& name, size_t head_dim) {
  if (name == "f16") return KvDtype::kF16;
  if (name == "f32") return KvDtype::kF32;
  if (name != "q8_0") return Errorf("unknown KV type '{}' (f16, f32, q8_0)", name);
  if (head_dim % kKvQ8Block != 0) {
    return Errorf("--kv-type q8_0 needs heads of a multiple of {} dims; this model's have {}", kKvQ8Block, head_dim);
  }
  return KvDtype::kQ8_0;
}

KvStore::KvStore(size_t n_layer, size_t kv_dim, size_t block_size, size_t num_blocks, KvDtype dtype)
    : KvStore(n_layer, kv_dim, block_size, num_blocks, dtype, {}, 0) {}

KvStore::KvStore(size_t n_layer, size_t kv_dim, size_t block_size, size_t num_blocks, KvDtype dtype,
                 const std::vector<uint8_t>& local_layers, size_t num_local_blocks)
    : kv_dim_(kv_dim), block_size_(block_size), num_blocks_(num_blocks), dtype_(dtype),
      to_f16_(ActiveDotKernels().to_f16) {
  PC_CHECK(dtype != KvDtype::kQ8_0 || kv_dim % kKvQ8Block == 0);
  PC_CHECK(local_layers.empty() || local_layers.size() == n_layer);
  local_.assign(n_layer, 0);
  if (num_local_blocks > 0) {
    for (size_t l = 0; l < local_layers.size(); ++l) local_[l] = local_layers[l] != 0;
    num_local_layers_ = static_cast<size_t>(std::count(local_.begin(), local_.end(), 1));
    if (num_local_layers_ > 0) num_local_blocks_ = num_local_blocks;
  }
  // Layer l's K, then its V, each starting on a cache line.
  auto layer_bytes = [&](size_t l) {
    return ((local_[l] && split() ? num_local_blocks_ : num_blocks_) * block_layer_bytes() + 63) / 64 * 64;
  };
  size_t total = 0;
  for (size_t l = 0; l < n_layer; ++l) total += 2 * layer_bytes(l);
  arena_ = PageBuffer(total);
  k_.resize(n_layer);
  v_.resize(n_layer);
  uint8_t* at = arena_.data();
  for (size_t l = 0; l < n_layer; ++l) {
    k_[l] = at;
    v_[l] = at + layer_bytes(l);
    at += 2 * layer_bytes(l);
  }
}

void KvStore::Write(size_t layer, std::span<const int32_t> table, size_t pos, const float* k,
                    const float* v) {
  PC_CHECK(pos / block_size_ < table.size());
  const int32_t block = table[pos / block_size_];
  PC_CHECK(block >= 0 && static_cast<size_t>(block) < (is_local(layer) ? num_local_blocks_ : num_blocks_));
  const size_t row = static_cast<size_t>(block) * block_size_ + pos % block_size_;
  uint8_t* kd = k_[layer] + row * row_bytes();
  uint8_t* vd = v_[layer] + row * row_bytes();
  if (dtype_ == KvDtype::kQ8_0) {  // the reference's rounding of a Q8_0 row
    QuantizeRow(TensorType::kQ8_0, k, kd, kv_dim_);
    QuantizeRow(TensorType::kQ8_0, v, vd, kv_dim_);
    return;
  }
  if (dtype_ == KvDtype::kF32) {
    std::memcpy(kd, k, kv_dim_ * 4);
    std::memcpy(vd, v, kv_dim_ * 4);
    return;
  }
  to_f16_(k, reinterpret_cast<uint16_t*>(kd), kv_dim_);
  to_f16_(v, reinterpret_cast<uint16_t*>(vd), kv_dim_);
}

KvLayerView KvStore::View(size_t layer, std::span<const int32_t> table) const {
  return KvLayerView{k_[layer], v_[layer], dtype_, block_size_, kv_dim_, table};
}

uint8_t* KvStore::BlockK(size_t layer, int32_t block) {
  return k_[layer] + static_cast<size_t>(block) * block_layer_bytes();
}

uint8_t* KvStore::BlockV(size_t layer, int32_t block) {
  return v_[layer] + static_cast<size_t>(block) * block_layer_bytes();
}

}  // namespace pc
