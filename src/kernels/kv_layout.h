// The paged K/V layout as the attention kernels read it: K and V rows of one
// layer live in fixed-size blocks; a sequence's block table maps position p
// to block table[p / block_size], row p % block_size. Header-only, no
// dependencies. It lives with the kernels because they read it; the store
// that owns this memory (kvcache/kv_store.h) and the pool and prefix index
// that share it (kvcache/block_pool.h, prefix_cache.h) sit above them.
// Thread-safety: plain values.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

namespace pc {

// kQ8_0: each row as kv_dim / 32 blocks of {F16 scale, 32 int8} (34 bytes,
// the GGUF Q8_0 block): half the bytes of F16, so twice the cached tokens
// per GiB and half the K/V read per decoded token. Needs head_dim % 32 == 0
// (every head a whole number of blocks).
enum class KvDtype { kF32, kF16, kQ8_0 };

constexpr size_t kKvQ8Block = 32, kKvQ8BlockBytes = 34;

// Bytes of `elems` elements (a row, a head's slice; a multiple of 32 for Q8_0).
constexpr size_t KvBytes(KvDtype t, size_t elems) {
  return t == KvDtype::kF32 ? 4 * elems : t == KvDtype::kF16 ? 2 * elems : elems / kKvQ8Block * kKvQ8BlockBytes;
}
constexpr const char* KvDtypeName(KvDtype t) { return t == KvDtype::kF32 ? "f32" : t == KvDtype::kF16 ? "f16" : "q8_0"; }

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
