// One 32-element block quantized to 8 bits in 8 F32 lanes, as the reference
// engine's Q8_0 activations are (GgmlQuantizeRowQ8_0): max|x| is order-free,
// the scale is 127 / max (0 for an all-zero block), and cvtps rounds ties to
// even like nearbyint under the default rounding mode. Shared by the Q8_0
// (dot_avx2.cc) and Q8A (ops_avx2.cc) quantizers. Include only from files
// compiled with AVX2 flags (this inline function must never be instantiated
// for CPUs without them).
#pragma once
#include <immintrin.h>

namespace pc::avx2 {

// The block's 32 values as int32 in q[0..3] (|q| <= 127, in order);
// returns max |x|, whose / 127 is the block's scale.
inline float QuantizeBlock32(const float* xb, __m256i q[4]) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(xb + 8 * i);
    amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_mask, v[i]));
  }
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  const float a = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
  const __m256 scale = _mm256_set1_ps(a != 0.0f ? 127.0f / a : 0.0f);
  for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], scale));
  return a;
}

// q[0..3] packed to 32 int8 in order, saturated (the packs interleave
// 128-bit lanes; the permute restores the order).
inline __m256i Pack32(const __m256i q[4]) {
  const __m256i q16 = _mm256_packs_epi32(q[0], q[1]), r16 = _mm256_packs_epi32(q[2], q[3]);
  return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q16, r16), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

}  // namespace pc::avx2
