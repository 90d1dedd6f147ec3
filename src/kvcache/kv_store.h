// Paged K/V storage: for every layer, num_blocks blocks of block_size token
// rows of kv_dim elements (F16 by default, F32 or Q8_0 blocks optional:
// kv_layout.h). A sequence owns an
// ordered list of block ids (its block table); position p lives in block
// table[p / block_size], row p % block_size.
// Split stores (sliding-window models, docs/KV_CACHE.md): the layers marked
// local have num_local_blocks blocks of their own, addressed by a second
// table (KvTables::local), so a sequence can drop a local block once it has
// slid out of the window while keeping the global layers' rows.
// Thread-safety: writers of distinct rows may run concurrently; callers
// serialise writes to a row against reads of it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/page_buffer.h"
#include "base/status.h"
#include "kernels/kv_layout.h"

namespace pc {

// "f16", "f32" or "q8_0" for heads of head_dim elements; an error names
// what does not fit (Q8_0 needs head_dim % 32 == 0).
Result<KvDtype> ParseKvDtype(const std::string& name, size_t head_dim);

// A sequence's two block tables: local is read for the local layers of a
// split store and ignored otherwise (empty when the store is not split).
struct KvTables {
  std::span<const int32_t> global, local;
};

class KvStore {
 public:
  KvStore(size_t n_layer, size_t kv_dim, size_t block_size, size_t num_blocks, KvDtype dtype);
  // A split store: local_layers[l] marks layer l local (num_local_blocks
  // blocks); with no layer marked or num_local_blocks 0 it is not split.
  KvStore(size_t n_layer, size_t kv_dim, size_t block_size, size_t num_blocks, KvDtype dtype,
          const std::vector<uint8_t>& local_layers, size_t num_local_blocks);

  size_t block_size() const { return block_size_; }
  size_t num_layers() const { return k_.size(); }
  size_t num_blocks() const { return num_blocks_; }
  size_t kv_dim() const { return kv_dim_; }
  KvDtype dtype() const { return dtype_; }
  size_t num_local_blocks() const { return num_local_blocks_; }
  bool split() const { return num_local_layers_ > 0; }
  bool is_local(size_t layer) const { return split() && local_[layer] != 0; }
  size_t num_local_layers() const { return num_local_layers_; }
  size_t bytes() const {
    return 2 * block_layer_bytes() * ((k_.size() - num_local_layers_) * num_blocks_ + num_local_layers_ * num_local_blocks_);
  }
  // Bytes one block occupies across all layers, K and V (split: the global
  // layers' block plus the local layers' block of the same positions).
  size_t block_bytes() const { return 2 * k_.size() * block_layer_bytes(); }
  // Bytes of one block of the global layers, and of the local layers.
  size_t global_block_bytes() const { return 2 * (k_.size() - num_local_layers_) * block_layer_bytes(); }
  size_t local_block_bytes() const { return 2 * num_local_layers_ * block_layer_bytes(); }

  // The table layer reads: tables.local for a local layer of a split store.
  std::span<const int32_t> Table(size_t layer, const KvTables& tables) const {
    return is_local(layer) ? tables.local : tables.global;
  }
  // Stores k and v ([kv_dim] floats each) for position pos.
  void Write(size_t layer, std::span<const int32_t> table, size_t pos, const float* k, const float* v);
  void Write(size_t layer, const KvTables& tables, size_t pos, const float* k, const float* v) {
    Write(layer, Table(layer, tables), pos, k, v);
  }
  KvLayerView View(size_t layer, std::span<const int32_t> table) const;
  KvLayerView View(size_t layer, const KvTables& tables) const { return View(layer, Table(layer, tables)); }

  // Raw bytes of one block's rows in one layer (for copies between tiers);
  // block is a local block id on a local layer of a split store.
  uint8_t* BlockK(size_t layer, int32_t block);
  uint8_t* BlockV(size_t layer, int32_t block);
  size_t block_layer_bytes() const { return block_size_ * row_bytes(); }

 private:
  size_t row_bytes() const { return KvBytes(dtype_, kv_dim_); }

  size_t kv_dim_, block_size_, num_blocks_, num_local_blocks_ = 0, num_local_layers_ = 0;
  KvDtype dtype_;
  // F16 rows: the conversion of the level active at construction (every
  // level rounds exactly as Fp32ToFp16 does).
  void (*to_f16_)(const float* x, uint16_t* y, size_t n);
  std::vector<uint8_t> local_;  // per layer: 1 if local
  // Every layer's K and V rows in one zeroed mapping (huge pages: page_buffer.h);
  // k_[l] and v_[l] point into it.
  PageBuffer arena_;
  std::vector<uint8_t*> k_, v_;  // per layer
};

}  // namespace pc
