// exp in 16 F32 lanes: exp_avx2.h's Exp8 (ExpLane's constants and steps, the
// polynomial's multiply-adds fused) with 16 lanes, so each lane equals
// ExpLane (dot.h) bit for bit; inputs below -87 give 0. Include only from
// files compiled with AVX-512 flags (this inline function must never be
// instantiated for CPUs without them).
#pragma once
#include <immintrin.h>

namespace pc::avx512 {

inline __m512 Exp16(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.0f);
  const __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  x = _mm512_min_ps(_mm512_max_ps(x, lo), _mm512_set1_ps(88.0f));
  const __m512 i = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(_mm512_sub_ps(x, _mm512_mul_ps(i, _mm512_set1_ps(0.693145751953125f))),
                                 _mm512_mul_ps(i, _mm512_set1_ps(1.428606765330187e-06f)));
  __m512 p = _mm512_set1_ps(1.3981999507e-3f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, f), f, f), _mm512_set1_ps(1.0f));
  const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(i), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mul_ps(static_cast<__mmask16>(~under), p, _mm512_castsi512_ps(bits));
}

}  // namespace pc::avx512
