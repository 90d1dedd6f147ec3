// The reference-order loops built with AVX2+FMA (see ggml_compat_loops.h),
// and the Q8_0/Q4_0 dots with intrinsics: per block the same 8 exact integer
// lanes of 4 products, so the same bits as the portable loops.
#include <immintrin.h>

#include "kernels/ggml_compat_loops.h"

namespace pc {
namespace {

// 8 int32 lanes, lane l = sum of products 4l..4l+3 of 32 signed bytes.
inline __m256i LaneSums(__m256i w, __m256i x) {
  const __m256i aw = _mm256_sign_epi8(w, w);  // |w|, unsigned for maddubs
  const __m256i sx = _mm256_sign_epi8(x, w);  // x with w's sign
  const __m256i pairs = _mm256_maddubs_epi16(aw, sx);  // <= 2*127*128: no saturation
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

inline float Tree8(__m256 acc) {
  float a[8];
  _mm256_storeu_ps(a, acc);
  float t[4];
  for (int i = 0; i < 4; ++i) t[i] = a[i] + a[i + 4];
  return (t[0] + t[2]) + (t[1] + t[3]);
}

float DotQ8_0Avx2(const BlockQ8_0* w, const BlockQ8_0* x, size_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (size_t b = 0; b < nb; ++b) {
    const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs));
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
    const __m256 d = _mm256_set1_ps(Fp16ToFp32(w[b].d) * Fp16ToFp32(x[b].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(LaneSums(wq, xq)), acc);
  }
  return Tree8(acc);
}

float DotQ4_0Avx2(const BlockQ4_0* w, const BlockQ8_0* x, size_t nb) {
  __m256 acc = _mm256_setzero_ps();
  const __m256i low4 = _mm256_set1_epi8(0x0F), eight = _mm256_set1_epi8(8);
  for (size_t b = 0; b < nb; ++b) {
    // Low nibbles are elements 0..15, high nibbles 16..31.
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs));
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
    const __m256i wq = _mm256_sub_epi8(_mm256_and_si256(both, low4), eight);
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
    const __m256 d = _mm256_set1_ps(Fp16ToFp32(w[b].d) * Fp16ToFp32(x[b].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(LaneSums(wq, xq)), acc);
  }
  return Tree8(acc);
}

}  // namespace

const GgmlCompatKernels* GgmlCompatAvx2Kernels() {
  static const GgmlCompatKernels kTable = [] {
    GgmlCompatKernels k = MakeGgmlCompatKernels("avx2");
    k.q8_0 = DotQ8_0Avx2;
    k.q4_0 = DotQ4_0Avx2;
    return k;
  }();
  return &kTable;
}

}  // namespace pc
