// The reference-order loops built with AVX2+FMA (see ggml_compat_loops.h),
// and the Q8_0/Q4_0 dots (MXFP4's repacked order too) with intrinsics: per
// block the same 8 exact integer lanes of 4 products (for the repacked
// order, their exact total), so the same bits as the portable loops.
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

// The 8 lanes' exact integer total (a block's sum in the repacked order).
inline int32_t LaneTotal(__m256i lanes) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(lanes), _mm256_extracti128_si256(lanes, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

inline float Tree8(__m256 acc) {
  float a[8];
  _mm256_storeu_ps(a, acc);
  float t[4];
  for (int i = 0; i < 4; ++i) t[i] = a[i] + a[i + 4];
  return (t[0] + t[2]) + (t[1] + t[3]);
}

inline __m256i UnpackQ4_0Avx2(const BlockQ4_0& b) {
  // Low nibbles are elements 0..15, high nibbles 16..31.
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
  return _mm256_sub_epi8(_mm256_and_si256(both, _mm256_set1_epi8(0x0F)), _mm256_set1_epi8(8));
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
  for (size_t b = 0; b < nb; ++b) {
    const __m256i wq = UnpackQ4_0Avx2(w[b]);
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
    const __m256 d = _mm256_set1_ps(Fp16ToFp32(w[b].d) * Fp16ToFp32(x[b].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(LaneSums(wq, xq)), acc);
  }
  return Tree8(acc);
}

// The repacked rows' order (RepackedDot): the block's exact sum, then one
// fused multiply-add per block.
float DotQ4_0RepackedAvx2(const BlockQ4_0* w, const BlockQ8_0* x, size_t nb) {
  float acc = 0;
  for (size_t b = 0; b < nb; ++b) {
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
    const __m256i lanes = LaneSums(UnpackQ4_0Avx2(w[b]), xq);
    acc = std::fma(static_cast<float>(LaneTotal(lanes)), Fp16ToFp32(w[b].d) * Fp16ToFp32(x[b].d), acc);
  }
  return acc;
}

// MXFP4: the 16 grid values looked up by nibble (low nibbles are elements
// 0..15, high 16..31), then as Q4_0 above.
float DotMxfp4RepackedAvx2(const BlockMXFP4* w, const BlockQ8_0* x, size_t nb) {
  const __m256i grid = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Values)));
  float acc = 0;
  for (size_t b = 0; b < nb; ++b) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs));
    const __m256i nibbles = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), _mm256_set1_epi8(0x0F));
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
    const __m256i lanes = LaneSums(_mm256_shuffle_epi8(grid, nibbles), xq);
    const float dw = Bf16ToFp32(E8m0HalfToBf16(w[b].e));
    acc = std::fma(static_cast<float>(LaneTotal(lanes)), dw * Fp16ToFp32(x[b].d), acc);
  }
  return acc;
}

// HalfFma (ggml_compat_loops.h) on 8 lanes: TwoSum, round to odd, then
// F16C's conversion (round to nearest even, as Fp32ToFp16).
inline __m256 HalfFma8(__m256 a, __m256 b, __m256 c) {
  const __m256 p = _mm256_mul_ps(a, b);
  const __m256 s = _mm256_add_ps(p, c);
  const __m256 bb = _mm256_sub_ps(s, p);
  const __m256 e = _mm256_add_ps(_mm256_sub_ps(p, _mm256_sub_ps(s, bb)), _mm256_sub_ps(c, bb));
  const __m256i bits = _mm256_castps_si256(s), one = _mm256_set1_epi32(1);
  const __m256i inexact = _mm256_castps_si256(_mm256_cmp_ps(e, _mm256_setzero_ps(), _CMP_NEQ_OQ));
  const __m256i even = _mm256_cmpeq_epi32(_mm256_and_si256(bits, one), _mm256_setzero_si256());
  // +1 where e and s share a sign (away from zero), -1 where they differ.
  const __m256i differ = _mm256_srai_epi32(_mm256_xor_si256(_mm256_castps_si256(e), bits), 31);
  const __m256i step = _mm256_or_si256(_mm256_slli_epi32(differ, 1), one);
  const __m256i odd = _mm256_add_epi32(bits, _mm256_and_si256(_mm256_and_si256(inexact, even), step));
  return _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_castsi256_ps(odd), _MM_FROUND_TO_NEAREST_INT));
}

struct Avx2Fma8 {
  void operator()(const uint16_t* w, const uint16_t* x, float* acc, const float* b = nullptr,
                  const float* ones = nullptr) const {
    const __m256 c = _mm256_load_ps(acc);
    if (w != nullptr) {
      const __m256 wv = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
      const __m256 xv = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
      _mm256_store_ps(acc, HalfFma8(wv, xv, c));
    } else {
      _mm256_store_ps(acc, HalfFma8(_mm256_load_ps(b), _mm256_load_ps(ones), c));
    }
  }
};

float DotF16VecAvx2(const uint16_t* w, const uint16_t* x, size_t n) { return F16VecDot(w, x, n, Avx2Fma8{}); }

}  // namespace

const GgmlCompatKernels* GgmlCompatAvx2Kernels(GgmlTarget target) {
  auto make = [](const char* name, GgmlTarget t) {
    GgmlCompatKernels k = MakeGgmlCompatKernels(name, t, DotF16VecAvx2);
    k.q8_0 = DotQ8_0Avx2;
    k.q4_0 = DotQ4_0Avx2;
    k.q4_0_repacked = DotQ4_0RepackedAvx2;
    k.mxfp4_repacked = DotMxfp4RepackedAvx2;
    return k;
  };
  static const GgmlCompatKernels kTables[3] = {make("avx2", GgmlTarget::kAvx512Fp16),
                                               make("avx2/avx512", GgmlTarget::kAvx512),
                                               make("avx2/avx2", GgmlTarget::kAvx2)};
  return &kTables[static_cast<int>(target)];
}

}  // namespace pc
