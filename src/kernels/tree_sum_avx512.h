// The sum of 16 F32 lanes by dot.h's tree: j + j+8, then j + j+4, j + j+2,
// j + j+1. Include only from files compiled with AVX-512 flags (this inline
// function must never be instantiated for CPUs without them).
#pragma once
#include <immintrin.h>

namespace pc::avx512 {

inline float TreeSum(__m512 p) {
  const __m512 u = _mm512_add_ps(p, _mm512_shuffle_f32x4(p, p, 0xEE));
  const __m512 w = _mm512_add_ps(u, _mm512_shuffle_f32x4(u, u, 0x01));
  const __m512 x = _mm512_add_ps(w, _mm512_permute_ps(w, 0x0E));
  return _mm512_cvtss_f32(_mm512_add_ps(x, _mm512_permute_ps(x, 0x01)));
}

}  // namespace pc::avx512
