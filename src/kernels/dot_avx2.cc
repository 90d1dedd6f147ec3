// AVX2 + FMA + F16C versions of the DotKernels table. This file alone is
// compiled with -mavx2 -mfma -mf16c; it is only called after ActiveIsa()
// confirmed the CPU supports them.
#include <immintrin.h>

#include <algorithm>

#include <cstring>

#include "kernels/dot.h"
#include "kernels/exp_avx2.h"
#include "kernels/quantize_avx2.h"

namespace pc {
namespace {

using avx2::Exp8;

// Local conversions: inline helpers from shared headers must not be
// instantiated in this file, since the linker could then pick this AVX2 copy
// for callers on CPUs without AVX2.
inline float H2F(uint16_t h) { return _cvtsh_ss(h); }
inline uint16_t F2H(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
inline float B2F(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float HorizontalSum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

inline __m256 LoadF16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline __m256 LoadBf16(const uint16_t* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

// A BF16 element, a type of its own so the tiles can tell it from F16.
struct Bf16 {
  uint16_t bits;
};

// Loads 8 elements widened to F32, and one element, for the float tiles.
inline __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 Load8(const uint16_t* p) { return LoadF16(p); }
inline __m256 Load8(const Bf16* p) { return LoadBf16(&p->bits); }
inline float Widen(float x) { return x; }
inline float Widen(uint16_t h) { return H2F(h); }
inline float Widen(Bf16 b) { return B2F(b.bits); }

// NR weight rows x NT activation rows of F32, F16 or BF16 elements: per output one
// 8-lane fused chain over the elements, the tree, then the scalar tail. The
// single dot is the 1 x 1 tile, so a row's result never depends on the tile
// shape a batch used.
template <typename T, int NR, int NT>
void FloatTileImpl(const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, size_t n, float* y,
                   size_t y_stride) {
  __m256 acc[NR][NT];
  for (int r = 0; r < NR; ++r) {
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 xv[NT];
    for (int t = 0; t < NT; ++t) xv[t] = Load8(reinterpret_cast<const T*>(x + t * x_stride) + i);
    for (int r = 0; r < NR; ++r) {
      const __m256 wv = Load8(reinterpret_cast<const T*>(w + r * w_stride) + i);
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  for (int r = 0; r < NR; ++r) {
    const T* wr = reinterpret_cast<const T*>(w + r * w_stride);
    for (int t = 0; t < NT; ++t) {
      const T* xt = reinterpret_cast<const T*>(x + t * x_stride);
      float s = HorizontalSum(acc[r][t]);
      for (size_t j = i; j < n; ++j) s += Widen(wr[j]) * Widen(xt[j]);
      y[t * y_stride + r] = s;
    }
  }
}

template <typename T>
void FloatTile(const uint8_t* w, size_t w_stride, int nr, const uint8_t* x, size_t x_stride, int nt, size_t n,
               float* y, size_t y_stride) {
  if (nt > 2) {  // dot.h allows 4 activation rows: two calls (each output alone, so the same bits)
    FloatTile<T>(w, w_stride, nr, x, x_stride, 2, n, y, y_stride);
    return FloatTile<T>(w, w_stride, nr, x + 2 * x_stride, x_stride, nt - 2, n, y + 2 * y_stride, y_stride);
  }
  if (nr == 4 && nt == 2) return FloatTileImpl<T, 4, 2>(w, w_stride, x, x_stride, n, y, y_stride);
  if (nr == 4 && nt == 1) return FloatTileImpl<T, 4, 1>(w, w_stride, x, x_stride, n, y, y_stride);
  for (int r = 0; r < nr; ++r) {  // edges: one row at a time
    if (nt == 2) FloatTileImpl<T, 1, 2>(w + r * w_stride, w_stride, x, x_stride, n, y + r, y_stride);
    else FloatTileImpl<T, 1, 1>(w + r * w_stride, w_stride, x, x_stride, n, y + r, y_stride);
  }
}

float DotF32(const float* a, const float* b, size_t n) {
  float y;
  FloatTileImpl<float, 1, 1>(reinterpret_cast<const uint8_t*>(a), 0, reinterpret_cast<const uint8_t*>(b), 0, n, &y, 0);
  return y;
}

float DotF16(const uint16_t* a, const uint16_t* b, size_t n) {
  float y;
  FloatTileImpl<uint16_t, 1, 1>(reinterpret_cast<const uint8_t*>(a), 0, reinterpret_cast<const uint8_t*>(b), 0, n, &y,
                                0);
  return y;
}

float DotBf16(const uint16_t* a, const uint16_t* b, size_t n) {
  float y;
  FloatTileImpl<Bf16, 1, 1>(reinterpret_cast<const uint8_t*>(a), 0, reinterpret_cast<const uint8_t*>(b), 0, n, &y, 0);
  return y;
}

void ToF16(const float* x, uint16_t* y, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
  }
  for (; i < n; ++i) y[i] = F2H(x[i]);
}

// GgmlQuantizeRowQ8_0 in 8 lanes (quantize_avx2.h).
void QuantizeQ8_0(const float* x, BlockQ8_0* y, size_t n) {
  for (size_t b = 0; b < n / 32; ++b) {
    __m256i q[4];
    const float a = avx2::QuantizeBlock32(x + b * 32, q);
    y[b].d = F2H(a / 127.0f);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs), avx2::Pack32(q));
  }
}

// 8 int32 -> the int16 sums of the first and of the last four (the sums of
// 16 int8 values q8 held once widened: maddubs by 1, madd by 1, then these).
inline void SumHalves(__m256i s32, int16_t* out) {
  const __m256i h = _mm256_hadd_epi32(s32, s32);
  const __m256i hh = _mm256_hadd_epi32(h, h);
  out[0] = static_cast<int16_t>(_mm256_extract_epi32(hh, 0));
  out[1] = static_cast<int16_t>(_mm256_extract_epi32(hh, 4));
}

// QuantizeRowQ8_K's arithmetic: the first value of largest magnitude sets
// the sign of the scale (a NaN is skipped as the scalar comparison skips it),
// q = min(127, round-to-even(iscale * x)), d = 1 / iscale.
void QuantizeQ8_K(const float* x, BlockQ8_K* y, size_t n) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  for (size_t b = 0; b < n / 256; ++b) {
    const float* xb = x + b * 256;
    __m256 amax = _mm256_setzero_ps();
    // abs first: max_ps returns its second operand when either is NaN.
    for (int i = 0; i < 32; ++i) amax = _mm256_max_ps(_mm256_andnot_ps(sign_mask, _mm256_loadu_ps(xb + 8 * i)), amax);
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    const float a = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
    y[b] = BlockQ8_K{};
    if (a == 0.0f) continue;
    float extreme = a;
    for (int i = 0; i < 32; ++i) {
      const __m256 abs = _mm256_andnot_ps(sign_mask, _mm256_loadu_ps(xb + 8 * i));
      const int hit = _mm256_movemask_ps(_mm256_cmp_ps(abs, _mm256_set1_ps(a), _CMP_EQ_OQ));
      if (hit != 0) {
        extreme = xb[8 * i + __builtin_ctz(static_cast<unsigned>(hit))];
        break;
      }
    }
    const float iscale = -127.0f / extreme;
    const __m256 vs = _mm256_set1_ps(iscale), top = _mm256_set1_ps(127.0f);
    for (int c = 0; c < 8; ++c) {  // 32 values per pass
      __m256i q[4];
      for (int i = 0; i < 4; ++i) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xb + 32 * c + 8 * i), vs);
        q[i] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), top));
      }
      const __m256i q16 = _mm256_packs_epi32(q[0], q[1]), r16 = _mm256_packs_epi32(q[2], q[3]);
      const __m256i q8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q16, r16), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs + 32 * c), q8);
      const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q8);
      SumHalves(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)), y[b].bsums + 2 * c);
    }
    y[b].d = 1.0f / iscale;
  }
}

void AxpyF32(float a, const float* x, float* y, size_t n) {
  const __m256 va = _mm256_set1_ps(a);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += a * x[i];
}

void AxpyF16(float a, const uint16_t* x, float* y, size_t n) {
  const __m256 va = _mm256_set1_ps(a);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, LoadF16(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += a * H2F(x[i]);
}

float DotF32F16(const float* a, const uint16_t* b, size_t n) {
  __m256 s0 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), LoadF16(b + i), s0);
  float s = HorizontalSum(s0);
  for (; i < n; ++i) s += a[i] * H2F(b[i]);
  return s;
}

// Four 8-lane sums to four floats: lane i of the result is the sum of v[i].
inline __m128 HorizontalSum4(__m256 v0, __m256 v1, __m256 v2, __m256 v3) {
  const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(v0, v1), _mm256_hadd_ps(v2, v3));
  return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

// Dot of q with one K row: 8 lanes over the head dimension, then the same
// tree as HorizontalSum4 (so a row's score does not depend on whether it was
// computed in a group of four); the scalar tail for head sizes not a multiple
// of 8 (which never take the four-row path).
inline float ScoreOne(const float* q, const float* k, size_t head_dim) {
  __m256 a = _mm256_setzero_ps();
  size_t d = 0;
  for (; d + 8 <= head_dim; d += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + d), a);
  float s = _mm_cvtss_f32(HorizontalSum4(a, a, a, a));
  for (; d < head_dim; ++d) s += q[d] * k[d];
  return s;
}

void TileScores(const float* q, const float* k, size_t head_dim, size_t n, float* s) {
  size_t j = 0;
  if (head_dim % 8 == 0) {
    for (; j + 8 <= n; j += 8) {  // eight rows share each load of q: eight FMA chains in flight
      const float* k0 = k + j * head_dim;
      __m256 a[8];
      for (int i = 0; i < 8; ++i) a[i] = _mm256_setzero_ps();
      for (size_t d = 0; d < head_dim; d += 8) {
        const __m256 qd = _mm256_loadu_ps(q + d);
        for (int i = 0; i < 8; ++i) a[i] = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k0 + i * head_dim + d), a[i]);
      }
      _mm_storeu_ps(s + j, HorizontalSum4(a[0], a[1], a[2], a[3]));
      _mm_storeu_ps(s + j + 4, HorizontalSum4(a[4], a[5], a[6], a[7]));
    }
    for (; j + 4 <= n; j += 4) {  // four rows share each load of q
      const float* k0 = k + j * head_dim;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (size_t d = 0; d < head_dim; d += 8) {
        const __m256 qd = _mm256_loadu_ps(q + d);
        a0 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k0 + d), a0);
        a1 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k0 + head_dim + d), a1);
        a2 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k0 + 2 * head_dim + d), a2);
        a3 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k0 + 3 * head_dim + d), a3);
      }
      _mm_storeu_ps(s + j, HorizontalSum4(a0, a1, a2, a3));
    }
  }
  for (; j < n; ++j) s[j] = ScoreOne(q, k + j * head_dim, head_dim);
}

void TileAccum(const float* p, const float* v, size_t head_dim, size_t n, float* acc) {
  size_t d0 = 0;
  for (; d0 + 64 <= head_dim; d0 += 64) {  // 64 dims held in registers: eight FMA chains
    __m256 a[8];
    for (int i = 0; i < 8; ++i) a[i] = _mm256_loadu_ps(acc + d0 + 8 * i);
    for (size_t j = 0; j < n; ++j) {
      const __m256 pj = _mm256_set1_ps(p[j]);
      const float* vj = v + j * head_dim + d0;
      for (int i = 0; i < 8; ++i) a[i] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 8 * i), a[i]);
    }
    for (int i = 0; i < 8; ++i) _mm256_storeu_ps(acc + d0 + 8 * i, a[i]);
  }
  for (; d0 + 32 <= head_dim; d0 += 32) {  // 32 dims held in registers over all rows
    __m256 a0 = _mm256_loadu_ps(acc + d0), a1 = _mm256_loadu_ps(acc + d0 + 8);
    __m256 a2 = _mm256_loadu_ps(acc + d0 + 16), a3 = _mm256_loadu_ps(acc + d0 + 24);
    for (size_t j = 0; j < n; ++j) {
      const __m256 pj = _mm256_set1_ps(p[j]);
      const float* vj = v + j * head_dim + d0;
      a0 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj), a0);
      a1 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 8), a1);
      a2 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 16), a2);
      a3 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 24), a3);
    }
    _mm256_storeu_ps(acc + d0, a0);
    _mm256_storeu_ps(acc + d0 + 8, a1);
    _mm256_storeu_ps(acc + d0 + 16, a2);
    _mm256_storeu_ps(acc + d0 + 24, a3);
  }
  for (; d0 + 8 <= head_dim; d0 += 8) {
    __m256 a = _mm256_loadu_ps(acc + d0);
    for (size_t j = 0; j < n; ++j) a = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_loadu_ps(v + j * head_dim + d0), a);
    _mm256_storeu_ps(acc + d0, a);
  }
  for (; d0 < head_dim; ++d0) {
    float a = acc[d0];
    for (size_t j = 0; j < n; ++j) {
      a = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(p[j]), _mm_set_ss(v[j * head_dim + d0]), _mm_set_ss(a)));
    }
    acc[d0] = a;
  }
}

float ExpSum(float* x, size_t n, float m) {
  const __m256 vm = _mm256_set1_ps(m);
  __m256 acc = _mm256_setzero_ps();
  size_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), vm));
    _mm256_storeu_ps(x + j, e);
    acc = _mm256_add_ps(acc, e);
  }
  float sum = HorizontalSum(acc);
  if (j < n) {  // tail through the same 8-lane code
    float tmp[8] = {};
    for (size_t t = j; t < n; ++t) tmp[t - j] = x[t] - m;
    for (size_t t = n - j; t < 8; ++t) tmp[t] = -100.0f;
    _mm256_storeu_ps(tmp, Exp8(_mm256_loadu_ps(tmp)));
    for (size_t t = j; t < n; ++t) {
      x[t] = tmp[t - j];
      sum += x[t];
    }
  }
  return sum;
}

// g / (1 + exp(arg(g))) * u over n elements, 8 lanes at a time, exp by the
// 8-lane polynomial (inputs past its range saturate: the result tends to g or
// -0); the tail through the same lanes, zero-padded.
template <class Arg>
void SigmoidGateMul(const float* gate, const float* up, float* out, size_t n, Arg arg) {
  const __m256 one = _mm256_set1_ps(1.0f);
  auto lanes = [&](const float* g8, const float* u8, float* o8) {
    const __m256 g = _mm256_loadu_ps(g8);
    _mm256_storeu_ps(o8, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, Exp8(arg(g)))), _mm256_loadu_ps(u8)));
  };
  size_t i = 0;
  for (; i + 8 <= n; i += 8) lanes(gate + i, up + i, out + i);
  if (i < n) {
    float g[8] = {}, u[8] = {};
    std::copy(gate + i, gate + n, g);
    std::copy(up + i, up + n, u);
    lanes(g, u, g);
    std::copy(g, g + (n - i), out + i);
  }
}

// silu(g) * u = g / (1 + exp(-g)) * u.
void SiluMul(const float* gate, const float* up, float* out, size_t n) {
  const __m256 neg = _mm256_set1_ps(-0.0f);
  SigmoidGateMul(gate, up, out, n, [&](__m256 g) { return _mm256_xor_ps(g, neg); });
}

// gelu_tanh(g) * u as g / (1 + exp(-2y)) * u, the sigmoid form of
// 0.5 g (1 + tanh y) (no cancellation for negative g).
void GeluMul(const float* gate, const float* up, float* out, size_t n) {
  const __m256 a = _mm256_set1_ps(0.044715f), minus_2k = _mm256_set1_ps(-2.0f * 0.79788456080286535588f);
  SigmoidGateMul(gate, up, out, n, [&](__m256 g) {
    return _mm256_mul_ps(minus_2k, _mm256_fmadd_ps(_mm256_mul_ps(a, g), _mm256_mul_ps(g, g), g));
  });
}

void AttendTile(const float* q, const float* k, const float* v, size_t head_dim, size_t n, float* s, float* m,
                float* l, float* acc) {
  TileScores(q, k, head_dim, n, s);
  __m256 vmax = _mm256_set1_ps(s[0]);
  size_t j = 0;
  for (; j + 8 <= n; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(s + j));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  float tile_max = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
  for (; j < n; ++j) tile_max = tile_max > s[j] ? tile_max : s[j];
  if (tile_max > *m) {  // rescale what was accumulated under the old max
    const float corr = _mm256_cvtss_f32(Exp8(_mm256_set1_ps(*m - tile_max)));
    *l *= corr;
    const __m256 vc = _mm256_set1_ps(corr);
    size_t d = 0;
    for (; d + 8 <= head_dim; d += 8) _mm256_storeu_ps(acc + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), vc));
    for (; d < head_dim; ++d) acc[d] *= corr;
    *m = tile_max;
  }
  *l += ExpSum(s, n, *m);
  TileAccum(s, v, head_dim, n, acc);
}

void Q8_0ToF32(const void* x, float* y, size_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(x);
  for (size_t i = 0; i < n / 32; ++i) {
    const __m256 d = _mm256_set1_ps(H2F(b[i].d));
    for (int k = 0; k < 4; ++k) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i].qs + 8 * k));  // 8 int8
      const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
      _mm256_storeu_ps(y + i * 32 + 8 * k, _mm256_mul_ps(d, f));
    }
  }
}

void F16ToF32(const uint16_t* x, float* y, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, LoadF16(x + i));
  for (; i < n; ++i) y[i] = H2F(x[i]);
}

const DotKernels kAvx2 = {
    .name = "avx2",
    .f32 = DotF32,
    .f16 = DotF16,
    .bf16 = DotBf16,
    .to_f16 = ToF16,
    .quantize_q8_0 = QuantizeQ8_0,
    .quantize_q8_k = QuantizeQ8_K,
    .f16_to_f32 = F16ToF32,
    .axpy_f32 = AxpyF32,
    .axpy_f16 = AxpyF16,
    .dot_f32_f16 = DotF32F16,
    .tile_scores = TileScores,
    .tile_accum = TileAccum,
    .exp_sum = ExpSum,
    .silu_mul = SiluMul,
    .gelu_mul = GeluMul,
    .attend_tile = AttendTile,
    .tile_f32 = FloatTile<float>,
    .tile_f16 = FloatTile<uint16_t>,
    .tile_bf16 = FloatTile<Bf16>,
    .attend_lanes = Avx2AttendLanes,
    .attend_cols = Avx2AttendCols,
    .attend_lanes_q8 = Avx2AttendLanesQ8,
    .q8_0_to_f32 = Q8_0ToF32,
};

}  // namespace

const DotKernels* Avx2DotKernels() { return &kAvx2; }

const DotKernels* AvxVnniDotKernels() {
  static const DotKernels table = [] {
    DotKernels t = kAvx2;
    t.name = "avxvnni";
    t.attend_lanes = AvxVnniAttendLanes;
    t.attend_cols = AvxVnniAttendCols;
    t.attend_lanes_q8 = AvxVnniAttendLanesQ8;
    return t;
  }();
  return &table;
}

}  // namespace pc
