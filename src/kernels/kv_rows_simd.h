// One K/V head's 16 rows of an attention tile as the cache stores them
// (KvTile, dot.h), for the column kernels that widen them as they read:
// the row addresses, Q8_0's scales converted once, and the scalar read of
// one element. attention_avx2.cc and attention_avx512.cc derive their
// vector loads from it. Internal linkage: the two including files compile
// this code for different instruction sets (both with F16C), and the linker
// must never swap one copy for the other; include it from nowhere else.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/dot.h"

namespace pc {
namespace {

template <KvDtype T>
struct KvHeadRows {
  static constexpr size_t kMaxBlocks = 32;  // Q8_0 blocks a head may have (head_dim <= 1024)
  const uint8_t* row[kLaneTile];
  float scale[kLaneTile][T == KvDtype::kQ8_0 ? kMaxBlocks : 1];

  // Head slice at `offset` bytes into each of rows[0..16).
  KvHeadRows(const uint8_t* const* rows, size_t offset, size_t head_dim) {
    for (size_t j = 0; j < kLaneTile; ++j) {
      row[j] = rows[j] + offset;
      if constexpr (T == KvDtype::kQ8_0) {
        for (size_t b = 0; b < head_dim / kKvQ8Block; ++b) {
          uint16_t h;
          std::memcpy(&h, row[j] + b * kKvQ8BlockBytes, sizeof h);
          scale[j][b] = _cvtsh_ss(h);
        }
      }
    }
  }
  // Q8_0: the address of element d's byte (blocks of a scale and 32 bytes).
  const uint8_t* Q8At(int j, size_t d) const { return row[j] + d / kKvQ8Block * kKvQ8BlockBytes + 2 + d % kKvQ8Block; }
  float Scale(int j, size_t d) const { return scale[j][d / kKvQ8Block]; }
  const float* F32(int j) const { return reinterpret_cast<const float*>(row[j]); }
  const uint16_t* F16(int j) const { return reinterpret_cast<const uint16_t*>(row[j]); }
  // Element d of row j, widened as f16_to_f32 / q8_0_to_f32 do.
  float Elem(int j, size_t d) const {
    if constexpr (T == KvDtype::kF32) return F32(j)[d];
    if constexpr (T == KvDtype::kF16) return _cvtsh_ss(F16(j)[d]);
    return Scale(j, d) * static_cast<float>(static_cast<int8_t>(*Q8At(j, d)));
  }
};

}  // namespace
}  // namespace pc
