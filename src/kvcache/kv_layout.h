// The paged K/V layout as the attention kernels read it: K and V rows of one
// layer live in fixed-size blocks; a sequence's block table maps position p
// to block table[p / block_size], row p % block_size. Header-only, no
// dependencies, so the kernels (below every other layer) can take it; the
// store that owns this memory is kv_store.h, the pool and prefix index that
// share it are block_pool.h and prefix_cache.h, all in this directory.
// Thread-safety: plain values.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

namespace pc {

enum class KvDtype { kF32, kF16 };

// One layer's K/V as seen by one sequence.
struct KvLayerView {
  const void* k = nullptr;  // layer base: [num_blocks][block_size][kv_dim]
  const void* v = nullptr;
  KvDtype dtype = KvDtype::kF16;
  size_t block_size = 16;  // tokens per block
  size_t kv_dim = 0;       // n_kv_heads * head_dim
  std::span<const int32_t> block_table;
};

}  // namespace pc
