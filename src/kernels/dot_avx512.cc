// F16 (BF16) weight rows times F16 (BF16) activation rows with AVX-512, for
// the avx512 DotKernels table (assembled in attention_avx512.cc): the f16 and
// bf16 dots and their register tiles. This file alone is compiled with
// AVX-512 flags; it runs only after ActiveIsa() confirmed them. No inline
// helpers shared with other files are instantiated here (the linker could
// pick this copy for callers on other CPUs), except those of
// tree_sum_avx512.h and exp_avx512.h, which only AVX-512 files include.
//
// The arithmetic per output, whatever the tile: one 16-lane fused chain over
// the elements (lane l takes elements 16i + l; the last partial chunk loaded
// with zeros in the missing lanes), then the 16 lanes summed by dot.h's
// tree (j + j+8, j + j+4, j + j+2, j + j+1). The single dot is the 1 x 1
// tile, so a row's bits never depend on the tile shape its batch used.
#include <immintrin.h>

#include "kernels/dot.h"
#include "kernels/exp_avx512.h"
#include "kernels/tree_sum_avx512.h"

namespace pc {
namespace {

// 16 elements (the first `m` of them for the masked form) widened to F32.
struct F16 {
  static __m512 Load(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 Load(const uint16_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
};

struct Bf16 {
  static __m512 Widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static __m512 Load(const uint16_t* p) { return Widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 Load(const uint16_t* p, __mmask16 m) { return Widen(_mm256_maskz_loadu_epi16(m, p)); }
};

// NR weight rows (w, stride in bytes) x NT activation rows (x) of n
// elements of type E each; y[t * y_stride + r]. At most 16 + 4 + 4 registers.
template <typename E, int NR, int NT>
void TileImpl(const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, size_t n, float* y,
              size_t y_stride) {
  const uint16_t* wr[NR];
  const uint16_t* xt[NT];
  for (int r = 0; r < NR; ++r) wr[r] = reinterpret_cast<const uint16_t*>(w + r * w_stride);
  for (int t = 0; t < NT; ++t) xt[t] = reinterpret_cast<const uint16_t*>(x + t * x_stride);
  __m512 acc[NR][NT];
  for (int r = 0; r < NR; ++r) {
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 xv[NT];
    for (int t = 0; t < NT; ++t) xv[t] = E::Load(xt[t] + i);
    for (int r = 0; r < NR; ++r) {
      const __m512 wv = E::Load(wr[r] + i);
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    __m512 xv[NT];
    for (int t = 0; t < NT; ++t) xv[t] = E::Load(xt[t] + i, m);
    for (int r = 0; r < NR; ++r) {
      const __m512 wv = E::Load(wr[r] + i, m);
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  for (int r = 0; r < NR; ++r) {
    for (int t = 0; t < NT; ++t) y[t * y_stride + r] = avx512::TreeSum(acc[r][t]);
  }
}

template <typename E, int NR>
void TileRows(const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, int nt, size_t n, float* y,
              size_t y_stride) {
  switch (nt) {
    case 1: return TileImpl<E, NR, 1>(w, w_stride, x, x_stride, n, y, y_stride);
    case 2: return TileImpl<E, NR, 2>(w, w_stride, x, x_stride, n, y, y_stride);
    case 3: return TileImpl<E, NR, 3>(w, w_stride, x, x_stride, n, y, y_stride);
    default: return TileImpl<E, NR, 4>(w, w_stride, x, x_stride, n, y, y_stride);
  }
}

template <typename E>
void Tile(const uint8_t* w, size_t w_stride, int nr, const uint8_t* x, size_t x_stride, int nt, size_t n, float* y,
          size_t y_stride) {
  switch (nr) {
    case 1: return TileRows<E, 1>(w, w_stride, x, x_stride, nt, n, y, y_stride);
    case 2: return TileRows<E, 2>(w, w_stride, x, x_stride, nt, n, y, y_stride);
    case 3: return TileRows<E, 3>(w, w_stride, x, x_stride, nt, n, y, y_stride);
    default: return TileRows<E, 4>(w, w_stride, x, x_stride, nt, n, y, y_stride);
  }
}

template <typename E>
float Dot(const uint16_t* a, const uint16_t* b, size_t n) {
  float y;
  TileImpl<E, 1, 1>(reinterpret_cast<const uint8_t*>(a), 0, reinterpret_cast<const uint8_t*>(b), 0, n, &y, 0);
  return y;
}

}  // namespace

float Avx512DotF16(const uint16_t* a, const uint16_t* b, size_t n) { return Dot<F16>(a, b, n); }

// Sixteen halves a step, the tail under a mask (exact, as every table's).
void Avx512F16ToF32(const uint16_t* x, float* y, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i))));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + i)));
  }
}
// Q8_0 blocks: sixteen int8 a step, each times its block's scale (one
// rounding, as every table's).
void Avx512Q8_0ToF32(const void* x, float* y, size_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(x);
  for (size_t i = 0; i < n / 32; ++i) {
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(b[i].d));
    for (int k = 0; k < 2; ++k) {
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs + 16 * k));
      _mm512_storeu_ps(y + i * 32 + 16 * k, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q))));
    }
  }
}
float Avx512DotBf16(const uint16_t* a, const uint16_t* b, size_t n) { return Dot<Bf16>(a, b, n); }

namespace {

// g / (1 + exp(arg(g))) * u over n elements, 16 lanes at a time, the tail
// under a mask: per lane the operations of the AVX2 table's 8-lane form
// (dot_avx2.cc), so the same bits. Twice the lanes a division and an exp:
// a gated activation was 4% of a 256-token prefill's samples with 8 (a Zen 5).
template <class Arg>
void SigmoidGateMul16(const float* gate, const float* up, float* out, size_t n, Arg arg) {
  const __m512 one = _mm512_set1_ps(1.0f);
  auto lanes = [&](__m512 g, __m512 u) {
    return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, avx512::Exp16(arg(g)))), u);
  };
  size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, lanes(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(out + i, m, lanes(_mm512_maskz_loadu_ps(m, gate + i), _mm512_maskz_loadu_ps(m, up + i)));
  }
}

void Avx512SiluMul(const float* gate, const float* up, float* out, size_t n) {
  const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));  // -g by its sign bit (no AVX-512 DQ)
  SigmoidGateMul16(gate, up, out, n,
                   [&](__m512 g) { return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(g), sign)); });
}

void Avx512GeluMul(const float* gate, const float* up, float* out, size_t n) {
  const __m512 a = _mm512_set1_ps(0.044715f), minus_2k = _mm512_set1_ps(-2.0f * 0.79788456080286535588f);
  SigmoidGateMul16(gate, up, out, n, [&](__m512 g) {
    return _mm512_mul_ps(minus_2k, _mm512_fmadd_ps(_mm512_mul_ps(a, g), _mm512_mul_ps(g, g), g));
  });
}

}  // namespace

void Avx512TileF16(const uint8_t* w, size_t w_stride, int nr, const uint8_t* x, size_t x_stride, int nt, size_t n,
                   float* y, size_t y_stride) {
  Tile<F16>(w, w_stride, nr, x, x_stride, nt, n, y, y_stride);
}

void Avx512TileBf16(const uint8_t* w, size_t w_stride, int nr, const uint8_t* x, size_t x_stride, int nt, size_t n,
                    float* y, size_t y_stride) {
  Tile<Bf16>(w, w_stride, nr, x, x_stride, nt, n, y, y_stride);
}

// The AVX2 table with this level's kernels put in by name.
const DotKernels* Avx512DotKernels() {
  if (Avx2DotKernels() == nullptr) return nullptr;
  static const DotKernels table = [] {
    DotKernels t = *Avx2DotKernels();
    t.name = "avx512";
    t.attend_lanes = Avx512AttendLanes;
    t.attend_cols = Avx512AttendCols;
    t.attend_lanes_q8 = Avx512AttendLanesQ8;
    t.f16 = Avx512DotF16;
    t.f16_to_f32 = Avx512F16ToF32;
    t.q8_0_to_f32 = Avx512Q8_0ToF32;
    t.bf16 = Avx512DotBf16;
    t.silu_mul = Avx512SiluMul;
    t.gelu_mul = Avx512GeluMul;
    t.tile_f16 = Avx512TileF16;
    t.tile_bf16 = Avx512TileBf16;
    return t;
  }();
  return &table;
}

}  // namespace pc
