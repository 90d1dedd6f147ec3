// One K/V head's 16 rows of an attention tile as the cache stores them
// (KvTile, dot.h), for the column kernels that widen them as they read:
// the row addresses, Q8_0's blocks and scales, and the scalar read of one
// element. attention_avx2.cc and attention_avx512.cc derive their
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
  const uint8_t* row[kLaneTile];

  // Head slice at `offset` bytes into each of rows[0..16). (Q8_0 scales are
  // widened where they are used: a table of a tile's scales built one by
  // one cost a fifth of a decode tile's time.)
  KvHeadRows(const uint8_t* const* rows, size_t offset) {
    for (size_t j = 0; j < kLaneTile; ++j) row[j] = rows[j] + offset;
  }
  // Q8_0: the address of element d's byte (blocks of a scale and 32 bytes).
  const uint8_t* Q8At(int j, size_t d) const { return row[j] + d / kKvQ8Block * kKvQ8BlockBytes + 2 + d % kKvQ8Block; }
  // Q8_0: the F16 scale bits of element d's block in row j.
  uint16_t ScaleBits(int j, size_t d) const {
    uint16_t h;
    std::memcpy(&h, row[j] + d / kKvQ8Block * kKvQ8BlockBytes, sizeof h);
    return h;
  }
  float Scale(int j, size_t d) const { return _cvtsh_ss(ScaleBits(j, d)); }
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
