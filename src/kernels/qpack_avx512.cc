// The x16 kernels with AVX-512 (F, BW, VL) and VNNI: 16 rows in the 16
// lanes of a zmm register, vpdpbusd for the products. This file alone is
// compiled with those flags; it runs only after ActiveIsa() confirmed them.
#include <immintrin.h>

#include "kernels/qpack_kernels.h"
#include "kernels/qpack_simd.h"

namespace pc {
namespace {

struct Avx512 {
  using V = __m512i;
  using F = __m512;
  [[maybe_unused]] static constexpr int kLanes = 16;  // the trait qpack_simd.h describes
  static constexpr bool kVnni = true;
  static constexpr bool kI16Acc = false;
  static V Load(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static V LanesU8(const uint8_t* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static V LanesI8(const uint8_t* p) { return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static F LanesF16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static F LanesBf16(const uint16_t* p) {
    const V w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  }
  static V DotU(V acc, V w, int32_t x4) { return _mm512_dpbusd_epi32(acc, w, _mm512_set1_epi32(x4)); }
  static V DotS(V acc, V w, int32_t x4) { return _mm512_dpbusd_epi32(acc, w, _mm512_set1_epi32(x4)); }  // unused
  static V And(V a, V b) { return _mm512_and_si512(a, b); }
  static V Or(V a, V b) { return _mm512_or_si512(a, b); }
  static V Xor8(V a, int v) { return _mm512_xor_si512(a, _mm512_set1_epi8(static_cast<char>(v))); }
  static V Sub8(V a, char v) { return _mm512_sub_epi8(a, _mm512_set1_epi8(v)); }
  template <int N> static V Srl16(V a) { return _mm512_srli_epi16(a, N); }
  template <int N> static V Sll16(V a) { return _mm512_slli_epi16(a, N); }
  template <int N> static V Srl32(V a) { return _mm512_srli_epi32(a, N); }
  template <int N> static V Sll32(V a) { return _mm512_slli_epi32(a, N); }
  static V Set1x8(char v) { return _mm512_set1_epi8(v); }
  static V Set1x32(int32_t v) { return _mm512_set1_epi32(v); }
  static V Zero() { return _mm512_setzero_si512(); }
  static V Add(V a, V b) { return _mm512_add_epi32(a, b); }
  static V Sub(V a, V b) { return _mm512_sub_epi32(a, b); }
  static V MulLo(V a, V b) { return _mm512_mullo_epi32(a, b); }
  static V Lut(V idx, const void* grid) {
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128(static_cast<const __m128i*>(grid))), idx);
  }
  static F ZeroF() { return _mm512_setzero_ps(); }
  static F Cvt(V a) { return _mm512_cvtepi32_ps(a); }
  static F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F AddF(F a, F b) { return _mm512_add_ps(a, b); }
  static F Set1(float v) { return _mm512_set1_ps(v); }
  static F Neg(F a) { return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN))); }
  static void Store(float* y, F v) { _mm512_storeu_ps(y, v); }
  static void Prefetch(const uint8_t* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0); }
};

// Eight tokens in one pass (32 registers hold their sums); five to seven as
// four and the rest, so that only five widths are compiled (each width is
// an instantiation per format: eight of them doubled the sanitizer build).
struct Runner {
  static int Width(int n) { return n >= 8 ? 8 : n >= 4 ? 4 : n; }
  template <TensorType T>
  static void Run(const uint8_t* group, size_t nb, const uint8_t* x, size_t x_stride, int nt, float* y,
                  size_t y_stride, const uint8_t* pf, size_t pf_lines) {
    size_t passes = 0;
    for (int t = 0; t < nt; t += Width(nt - t)) ++passes;
    for (int t = 0, pass = 0; t < nt; ++pass) {
      const uint8_t* xt = x + static_cast<size_t>(t) * x_stride;
      float* yt = y + static_cast<size_t>(t) * y_stride;
      const x16::PassLines p = x16::ShareOfPass(pf, pf_lines, static_cast<size_t>(pass), passes);
      const int n = Width(nt - t);
      if (n == 8) x16::Kernel<Avx512, T, 8>(group, nb, xt, x_stride, yt, y_stride, p.pf, p.lines);
      if (n == 4) x16::Kernel<Avx512, T, 4>(group, nb, xt, x_stride, yt, y_stride, p.pf, p.lines);
      if (n == 1) x16::Kernel<Avx512, T, 1>(group, nb, xt, x_stride, yt, y_stride, p.pf, p.lines);
      if (n == 2) x16::Kernel<Avx512, T, 2>(group, nb, xt, x_stride, yt, y_stride, p.pf, p.lines);
      if (n == 3) x16::Kernel<Avx512, T, 3>(group, nb, xt, x_stride, yt, y_stride, p.pf, p.lines);
      t += n;
    }
  }
};

// Pairs of groups: about six tokens a pass (up to 28 sums and 2 weight
// vectors in the 32 registers). Six measured fastest as the only width
// (five or seven 10-20% slower, kernels_bench BM_Gemm Q8_0 on a Zen 5), but
// a count that is not a multiple of six then ended in a pass of its rest
// group by group, which cost most of a six-token pass even for one token:
// the weights are loaded as often, for a sixth of the products. So the
// tokens are spread evenly over the passes that six a pass needs (4 to 6
// a pass; seven in one). Interleaved in one process on a Zen 5 (576 x 1536
// and 1536 x 576 Q8_0, in cache) against six a pass and the rest by
// group: 25 tokens 7-8% faster, 23 12%, 15-16 7-14%, 7-8 15-27%, 5 30-39%
// (from four tokens the pair runs); 6, 24 and 256 the same, same bits.
struct PairRunner {
  template <TensorType T, int W>
  static void Pass(const uint8_t* group, size_t gb, size_t nb, const uint8_t* x, size_t x_stride, float* y,
                   size_t y_stride, x16::PassLines p) {
    x16::KernelGroups<Avx512, T, W, 2>(group, gb, nb, x, x_stride, y, y_stride, p.pf, p.lines);
  }
  template <TensorType T>
  static void Run(const uint8_t* group, size_t gb, size_t nb, const uint8_t* x, size_t x_stride, size_t nt, float* y,
                  size_t y_stride, const uint8_t* pf, size_t pf_lines) {
    constexpr size_t kWidth = 6, kMinWidth = 4;
    if (nt < kMinWidth) {  // below kX16PairMinTokens: matmul.cc calls the groups one by one
      for (size_t g = 0; g < 2; ++g) {
        Runner::Run<T>(group + g * gb, nb, x, x_stride, static_cast<int>(nt), y + 16 * g, y_stride, pf, g == 0 ? pf_lines : 0);
      }
      return;
    }
    size_t passes = (nt + kWidth - 1) / kWidth;
    if (nt / passes < kMinWidth) passes = 1;  // seven tokens
    for (size_t pass = 0, t = 0; pass < passes; ++pass) {
      const size_t w = nt / passes + (pass < nt % passes ? 1 : 0);
      // The next pair's lines shared out over every pass (x16::ShareOfPass).
      const x16::PassLines p = x16::ShareOfPass(pf, pf_lines, pass, passes);
      const uint8_t* xt = x + t * x_stride;
      float* yt = y + t * y_stride;
      switch (w) {
        case 4: Pass<T, 4>(group, gb, nb, xt, x_stride, yt, y_stride, p); break;
        case 5: Pass<T, 5>(group, gb, nb, xt, x_stride, yt, y_stride, p); break;
        case 6: Pass<T, 6>(group, gb, nb, xt, x_stride, yt, y_stride, p); break;
        default: Pass<T, 7>(group, gb, nb, xt, x_stride, yt, y_stride, p); break;
      }
      t += w;
    }
  }
};

template <int... I>
constexpr void MakePairs(X16Kernels& k, std::integer_sequence<int, I...>) {
  ((k.pair[I] = &PairRunner::Run<kX16Types[I]>), ...);
}

constexpr X16Kernels MakeAvx512() {
  X16Kernels k = MakeX16Kernels<Runner>("avx512");
  MakePairs(k, std::make_integer_sequence<int, kNumX16Types>{});
  return k;
}
const X16Kernels kAvx512 = MakeAvx512();

}  // namespace

const X16Kernels* Avx512X16Kernels() { return &kAvx512; }

}  // namespace pc
