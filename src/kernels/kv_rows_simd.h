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
  // Q8_0: scale[b][j] is row j's scale of block b, so a block's 16 scales
  // are one vector with the rows in the lanes (the transposed K tiles).
  alignas(64) float scale[T == KvDtype::kQ8_0 ? kMaxBlocks : 1][kLaneTile];
  bool widened = true;  // scale holds the Q8_0 scales

  // Head slice at `offset` bytes into each of rows[0..16). widen_scales
  // false: the Q8_0 scale table left unfilled (Scales invalid; Scale widens
  // each from its row), for rows whose scales are read where they are used.
  KvHeadRows(const uint8_t* const* rows, size_t offset, size_t head_dim, bool widen_scales = true) {
    for (size_t j = 0; j < kLaneTile; ++j) row[j] = rows[j] + offset;
    if constexpr (T == KvDtype::kQ8_0) {
      widened = widen_scales;
      if (!widen_scales) return;
      // The 16 rows' F16 scale bits of a block side by side, widened 8 at a
      // time (converting one by one cost a fifth of a decode tile's time).
      for (size_t b = 0; b < head_dim / kKvQ8Block; ++b) {
        alignas(16) uint16_t h[kLaneTile];
        for (size_t j = 0; j < kLaneTile; ++j) std::memcpy(&h[j], row[j] + b * kKvQ8BlockBytes, sizeof h[j]);
        _mm256_store_ps(scale[b], _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h))));
        _mm256_store_ps(scale[b] + 8, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h + 8))));
      }
    }
  }
  // Q8_0: the address of element d's byte (blocks of a scale and 32 bytes).
  const uint8_t* Q8At(int j, size_t d) const { return row[j] + d / kKvQ8Block * kKvQ8BlockBytes + 2 + d % kKvQ8Block; }
  // Q8_0: the F16 scale bits of element d's block in row j.
  uint16_t ScaleBits(int j, size_t d) const {
    uint16_t h;
    std::memcpy(&h, row[j] + d / kKvQ8Block * kKvQ8BlockBytes, sizeof h);
    return h;
  }
  float Scale(int j, size_t d) const { return widened ? scale[d / kKvQ8Block][j] : _cvtsh_ss(ScaleBits(j, d)); }
  // Block b's scales, row j in lane j (16 floats, 64-byte aligned).
  const float* Scales(size_t b) const { return scale[b]; }
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
