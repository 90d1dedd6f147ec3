// The per-token passes of a forward pass with AVX2 and FMA, bit for bit
// the scalar functions of ops.cc and quant_dot.cc (tests/kernels/
// ops_simd_test.cc): RmsNormRows, AddInPlace, RopeWith and the Q8A
// activation quantizer. Why they matter: on a 2-core Zen 5 guest, a
// 15-token cache hit at depth 272 spent 18% of its step in these passes
// while they ran one float at a time (RmsNormRows of 8 rows x 576 took
// 2.9 us hot in L1). This file alone is compiled with those flags; it runs
// only after ActiveIsa() confirmed them.
#include <immintrin.h>

#include "kernels/ops_simd.h"
#include "kernels/quantize_avx2.h"
#include "kernels/quant.h"

namespace pc {
namespace {

// No inline helpers from shared headers here (std::min, std::sqrt, std::fma):
// the linker could pick this file's AVX2 copy for callers on other CPUs.
constexpr size_t kRowsPerGroup = 8;
inline size_t MinSize(size_t a, size_t b) { return a < b ? a : b; }

// rows[0..7]: pointers to eight rows; returns the 8x8 block at column i
// transposed: t[k] holds element i + k of every row, row r in lane r.
inline void Transpose8(const float* const* rows, size_t i, __m256 t[8]) {
  __m256 a[8];
  for (int r = 0; r < 8; ++r) a[r] = _mm256_loadu_ps(rows[r] + i);
  const __m256 u0 = _mm256_unpacklo_ps(a[0], a[1]), u1 = _mm256_unpackhi_ps(a[0], a[1]);
  const __m256 u2 = _mm256_unpacklo_ps(a[2], a[3]), u3 = _mm256_unpackhi_ps(a[2], a[3]);
  const __m256 u4 = _mm256_unpacklo_ps(a[4], a[5]), u5 = _mm256_unpackhi_ps(a[4], a[5]);
  const __m256 u6 = _mm256_unpacklo_ps(a[6], a[7]), u7 = _mm256_unpackhi_ps(a[6], a[7]);
  const __m256 s0 = _mm256_shuffle_ps(u0, u2, 0x44), s1 = _mm256_shuffle_ps(u0, u2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(u1, u3, 0x44), s3 = _mm256_shuffle_ps(u1, u3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(u4, u6, 0x44), s5 = _mm256_shuffle_ps(u4, u6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(u5, u7, 0x44), s7 = _mm256_shuffle_ps(u5, u7, 0xEE);
  t[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  t[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  t[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  t[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  t[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  t[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  t[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  t[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// The sums of squares of G groups of eight rows, each row's one sequential
// chain of double adds as the scalar RmsNorm sums it (square rounded to
// float, then widened), the chains of a group side by side in the lanes.
// Groups run interleaved so that their chains overlap (an add's latency is
// what bounds one chain). ss: G * 8 doubles.
template <int G>
void SumSquares(const float* const* rows, size_t n, double* ss) {
  __m256d lo[G], hi[G];
  for (int g = 0; g < G; ++g) lo[g] = hi[g] = _mm256_setzero_pd();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 t[G][8];
    for (int g = 0; g < G; ++g) Transpose8(rows + g * kRowsPerGroup, i, t[g]);
    for (int k = 0; k < 8; ++k) {
      for (int g = 0; g < G; ++g) {
        const __m256 sq = _mm256_mul_ps(t[g][k], t[g][k]);
        lo[g] = _mm256_add_pd(lo[g], _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
        hi[g] = _mm256_add_pd(hi[g], _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
      }
    }
  }
  for (int g = 0; g < G; ++g) {
    _mm256_storeu_pd(ss + g * kRowsPerGroup, lo[g]);
    _mm256_storeu_pd(ss + g * kRowsPerGroup + 4, hi[g]);
  }
  for (size_t r = 0; r < G * kRowsPerGroup; ++r) {
    for (size_t j = i; j < n; ++j) ss[r] += static_cast<double>(rows[r][j] * rows[r][j]);
  }
}

// out = (x * scale) * w, as the scalar line rounds it (two products).
void ScaleRow(const float* x, const float* w, float* out, size_t n, double ss, float eps) {
  const float scale = 1.0f / __builtin_sqrtf(static_cast<float>(ss / static_cast<double>(n)) + eps);
  const __m256 vs = _mm256_set1_ps(scale);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(w + i)));
  }
  for (; i < n; ++i) out[i] = x[i] * scale * w[i];
}

void RmsNormRowsAvx2(const float* x, const float* w, float* out, size_t rows, size_t n, float eps) {
  if (rows < 2) return RmsNormRows(x, w, out, rows, n, eps);  // one chain: nothing to put side by side
  for (size_t r = 0; r < rows;) {
    const size_t left = rows - r;
    const int groups = left > kRowsPerGroup ? 2 : 1;
    const size_t take = MinSize(left, groups * kRowsPerGroup);
    // Pointers past the rows left repeat the last row: computed, not used.
    const float* p[2 * kRowsPerGroup];
    for (size_t j = 0; j < 2 * kRowsPerGroup; ++j) p[j] = x + (r + MinSize(j, take - 1)) * n;
    double ss[2 * kRowsPerGroup];
    if (groups == 2) {
      SumSquares<2>(p, n, ss);
    } else {
      SumSquares<1>(p, n, ss);
    }
    for (size_t j = 0; j < take; ++j) ScaleRow(x + (r + j) * n, w, out + (r + j) * n, n, ss[j], eps);
    r += take;
  }
}

void AddAvx2(float* y, const float* x, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] += x[i];
}

// One head's rotation, as the scalar RopeBody: v[a] = fma(x0, c, -(x1 s)),
// v[b] = fma(x0, s, x1 c) for each pair (a, b) with cos c and sin s.
void RopeHead(float* v, const float* cs, const RopeParams& p) {
  const size_t half = p.rope_dim / 2;
  size_t i = 0;
  if (p.neox) {  // pairs (i, i + half): c and s taken out of the interleaved table
    for (; i + 8 <= half; i += 8) {
      const __m256 a = _mm256_loadu_ps(cs + 2 * i), b = _mm256_loadu_ps(cs + 2 * i + 8);
      const __m256 c = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
      const __m256 s = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
      const __m256 x0 = _mm256_loadu_ps(v + i), x1 = _mm256_loadu_ps(v + half + i);
      _mm256_storeu_ps(v + i, _mm256_fmsub_ps(x0, c, _mm256_mul_ps(x1, s)));
      _mm256_storeu_ps(v + half + i, _mm256_fmadd_ps(x0, s, _mm256_mul_ps(x1, c)));
    }
  } else {  // pairs (2i, 2i + 1), interleaved as the table is
    for (; i + 4 <= half; i += 4) {
      const __m256 x = _mm256_loadu_ps(v + 2 * i), t = _mm256_loadu_ps(cs + 2 * i);
      const __m256 x0 = _mm256_moveldup_ps(x), x1 = _mm256_movehdup_ps(x);
      // Even lanes x1 * s, odd lanes x1 * c; fmaddsub subtracts it in the even ones.
      const __m256 prod = _mm256_mul_ps(x1, _mm256_permute_ps(t, 0xB1));
      _mm256_storeu_ps(v + 2 * i, _mm256_fmaddsub_ps(x0, t, prod));
    }
  }
  for (; i < half; ++i) {
    const float c = cs[2 * i], s = cs[2 * i + 1];
    const size_t a = p.neox ? i : 2 * i;
    const size_t b = p.neox ? i + half : 2 * i + 1;
    const float x0 = v[a], x1 = v[b];
    v[a] = __builtin_fmaf(x0, c, -(x1 * s));
    v[b] = __builtin_fmaf(x0, s, x1 * c);
  }
}

void RopeAvx2(float* x, size_t n_heads, const float* cs, const RopeParams& p) {
  for (size_t h = 0; h < n_heads; ++h) RopeHead(x + h * p.head_dim, cs, p);
}

// QuantizeQ8A in 8 lanes: the AVX2 Q8_0 quantizer's block (quantize_avx2.h),
// the scale through F16 and back, and the block's sum taken from the packed
// bytes, as Q8_0ToQ8A takes it: for a block with a NaN or an infinity the
// packs saturate, and the sum stays that of the bytes the kernels multiply
// (an int32 sum before packing would not). Signed bytes summed as unsigned
// (x ^ 0x80, psadbw) less 32 x 128.
void QuantizeQ8AAvx2(const float* x, BlockQ8A* y, size_t n) {
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  for (size_t b = 0; b < n / 32; ++b) {
    __m256i q[4];
    const float a = avx2::QuantizeBlock32(x + b * 32, q);
    y[b].d = _cvtsh_ss(_cvtss_sh(a / 127.0f, _MM_FROUND_TO_NEAREST_INT));
    const __m256i bytes = avx2::Pack32(q);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs), bytes);
    const __m256i sad = _mm256_sad_epu8(_mm256_xor_si256(bytes, bias), _mm256_setzero_si256());
    const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
    const int64_t total = _mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1);
    y[b].sum = static_cast<int32_t>(total - 32 * 128);
  }
}

constexpr RowOps kAvx2Ops = {
    .name = "avx2",
    .rms_norm_rows = RmsNormRowsAvx2,
    .add = AddAvx2,
    .rope = RopeAvx2,
    .quantize_q8a = QuantizeQ8AAvx2,
};

}  // namespace

const RowOps* Avx2RowOps() { return &kAvx2Ops; }

}  // namespace pc
