// The x16 kernels' SIMD traits for 256-bit registers (qpack_simd.h
// describes the trait), shared by the AVX2 and AVX-VNNI levels: a pass
// computes all 16 rows of a group in two registers per value (Avx2Pair),
// the memory operands through the traits of each 8-row half of every
// 64-byte vector (Avx2Half). Without
// VNNI, products go through maddubs (exact for the unsigned bytes below 128
// of every format but Q8_0 and the grid ones, which take signed products);
// with it, one vpdpbusd (VEX form) per vector, exact for any byte.
// Included only by qpack_avx2.cc and qpack_avxvnni.cc, which compile it
// for their instruction sets (internal linkage, like qpack_simd.h).
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/qpack_kernels.h"
#include "kernels/qpack_simd.h"

namespace pc {
namespace {

template <int H, bool Vnni>
struct Avx2Half {
  using V = __m256i;
  using F = __m256;
  [[maybe_unused]] static constexpr int kLanes = 8;  // the trait qpack_simd.h describes
  static constexpr bool kVnni = Vnni;
  static constexpr bool kI16Acc = !Vnni;  // VNNI adds into 32-bit lanes at no cost
  static V Load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * H)); }
  static V LanesU8(const uint8_t* p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * H)));
  }
  static V LanesI8(const uint8_t* p) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * H)));
  }
  static F LanesF16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8 * H))); }
  static F LanesBf16(const uint16_t* p) {
    const V w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8 * H)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  static V DotU(V acc, V w, int32_t x4) {
    if constexpr (Vnni) return _mm256_dpbusd_avx_epi32(acc, w, _mm256_set1_epi32(x4));
    const V prod = _mm256_maddubs_epi16(w, _mm256_set1_epi32(x4));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(prod, _mm256_set1_epi16(1)));
  }
  static V DotS(V acc, V w, int32_t x4) {
    const V prod = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(_mm256_set1_epi32(x4), w));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(prod, _mm256_set1_epi16(1)));
  }
  static V Dot16(V acc, V w, int32_t x4) { return _mm256_add_epi16(acc, _mm256_maddubs_epi16(w, _mm256_set1_epi32(x4))); }
  static V Widen(V a, V b) { return _mm256_madd_epi16(a, b); }
  static V Pairs16(const uint8_t* p) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * H));
    return _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(b, b));
  }
  static V Ones16() { return _mm256_set1_epi16(1); }
  static V And(V a, V b) { return _mm256_and_si256(a, b); }
  static V Or(V a, V b) { return _mm256_or_si256(a, b); }
  static V Xor8(V a, int v) { return _mm256_xor_si256(a, _mm256_set1_epi8(static_cast<char>(v))); }
  static V Sub8(V a, char v) { return _mm256_sub_epi8(a, _mm256_set1_epi8(v)); }
  template <int N> static V Srl16(V a) { return _mm256_srli_epi16(a, N); }
  template <int N> static V Sll16(V a) { return _mm256_slli_epi16(a, N); }
  template <int N> static V Srl32(V a) { return _mm256_srli_epi32(a, N); }
  template <int N> static V Sll32(V a) { return _mm256_slli_epi32(a, N); }
  static V Set1x8(char v) { return _mm256_set1_epi8(v); }
  static V Set1x32(int32_t v) { return _mm256_set1_epi32(v); }
  static V Zero() { return _mm256_setzero_si256(); }
  static V Add(V a, V b) { return _mm256_add_epi32(a, b); }
  static V Sub(V a, V b) { return _mm256_sub_epi32(a, b); }
  static V MulLo(V a, V b) { return _mm256_mullo_epi32(a, b); }
  static V Lut(V idx, const void* grid) {
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128(static_cast<const __m128i*>(grid))), idx);
  }
  static F ZeroF() { return _mm256_setzero_ps(); }
  static F Cvt(V a) { return _mm256_cvtepi32_ps(a); }
  static F Mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F AddF(F a, F b) { return _mm256_add_ps(a, b); }
  static F Set1(float v) { return _mm256_set1_ps(v); }
  static F Neg(F a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
  static void Store(float* y, F v) { _mm256_storeu_ps(y + 8 * H, v); }
  static void Prefetch(const uint8_t* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0); }
};

// Both halves at once (16 rows, two registers per value): every activation
// broadcast serves 16 rows instead of 8. Memory operands go through the
// halves' traits; register operations apply to both registers.
template <bool Vnni>
struct Avx2Pair {
  using H0 = Avx2Half<0, Vnni>;
  using H1 = Avx2Half<1, Vnni>;
  struct V {
    __m256i a, b;
  };
  struct F {
    __m256 a, b;
  };
  [[maybe_unused]] static constexpr int kLanes = 16;
  static constexpr bool kVnni = Vnni;
  static constexpr bool kI16Acc = !Vnni;
  // An empty volatile statement the value passes through: loads and
  // products stay in the order written (volatile statements keep theirs).
  static V Pin(V v) {
    asm volatile("" : "+x"(v.a), "+x"(v.b));
    return v;
  }
  static V Load(const uint8_t* p) { return Pin({H0::Load(p), H1::Load(p)}); }
  static V LanesU8(const uint8_t* p) { return {H0::LanesU8(p), H1::LanesU8(p)}; }
  static V LanesI8(const uint8_t* p) { return {H0::LanesI8(p), H1::LanesI8(p)}; }
  static F LanesF16(const uint16_t* p) { return {H0::LanesF16(p), H1::LanesF16(p)}; }
  static F LanesBf16(const uint16_t* p) { return {H0::LanesBf16(p), H1::LanesBf16(p)}; }
  static V Pairs16(const uint8_t* p) { return {H0::Pairs16(p), H1::Pairs16(p)}; }
  static V DotU(V acc, V w, int32_t x4) { return Pin({H0::DotU(acc.a, w.a, x4), H0::DotU(acc.b, w.b, x4)}); }
  static V DotS(V acc, V w, int32_t x4) { return Pin({H0::DotS(acc.a, w.a, x4), H0::DotS(acc.b, w.b, x4)}); }
  static V Dot16(V acc, V w, int32_t x4) { return Pin({H0::Dot16(acc.a, w.a, x4), H0::Dot16(acc.b, w.b, x4)}); }
  static V Widen(V a, V b) { return {H0::Widen(a.a, b.a), H0::Widen(a.b, b.b)}; }
  static V Ones16() { return {H0::Ones16(), H0::Ones16()}; }
  static V And(V a, V b) { return {H0::And(a.a, b.a), H0::And(a.b, b.b)}; }
  static V Or(V a, V b) { return {H0::Or(a.a, b.a), H0::Or(a.b, b.b)}; }
  static V Xor8(V a, int v) { return {H0::Xor8(a.a, v), H0::Xor8(a.b, v)}; }
  static V Sub8(V a, char v) { return {H0::Sub8(a.a, v), H0::Sub8(a.b, v)}; }
  template <int N> static V Srl16(V a) { return {H0::template Srl16<N>(a.a), H0::template Srl16<N>(a.b)}; }
  template <int N> static V Sll16(V a) { return {H0::template Sll16<N>(a.a), H0::template Sll16<N>(a.b)}; }
  template <int N> static V Srl32(V a) { return {H0::template Srl32<N>(a.a), H0::template Srl32<N>(a.b)}; }
  template <int N> static V Sll32(V a) { return {H0::template Sll32<N>(a.a), H0::template Sll32<N>(a.b)}; }
  static V Set1x8(char v) { return {H0::Set1x8(v), H0::Set1x8(v)}; }
  static V Set1x32(int32_t v) { return {H0::Set1x32(v), H0::Set1x32(v)}; }
  static V Zero() { return {H0::Zero(), H0::Zero()}; }
  static V Add(V a, V b) { return {H0::Add(a.a, b.a), H0::Add(a.b, b.b)}; }
  static V Sub(V a, V b) { return {H0::Sub(a.a, b.a), H0::Sub(a.b, b.b)}; }
  static V MulLo(V a, V b) { return {H0::MulLo(a.a, b.a), H0::MulLo(a.b, b.b)}; }
  static V Lut(V idx, const void* grid) { return {H0::Lut(idx.a, grid), H0::Lut(idx.b, grid)}; }
  static F ZeroF() { return {H0::ZeroF(), H0::ZeroF()}; }
  static F Cvt(V a) { return {H0::Cvt(a.a), H0::Cvt(a.b)}; }
  static F Mul(F a, F b) { return {H0::Mul(a.a, b.a), H0::Mul(a.b, b.b)}; }
  static F AddF(F a, F b) { return {H0::AddF(a.a, b.a), H0::AddF(a.b, b.b)}; }
  static F Set1(float v) { return {H0::Set1(v), H0::Set1(v)}; }
  static F Neg(F a) { return {H0::Neg(a.a), H0::Neg(a.b)}; }
  static void Store(float* y, F v) {
    H0::Store(y, v.a);
    H1::Store(y, v.b);
  }
  static void Prefetch(const uint8_t* p) { H0::Prefetch(p); }
};

// Four tokens per pass, all 16 rows at once: each broadcast activation word
// serves both halves. Measured against two 8-row passes on the Zen 5 guest
// (kernels_bench BM_Gemm, 64 tokens, GFLOP/s): AVX2 Q8_0 128 -> 140, Q4_0
// 172 -> 211, Q4_K 145 -> 190, Q6_K 101 -> 116; AVX-VNNI Q8_0 209 -> 278.
// The products are pinned in program order (Avx2Pair::Pin): left to itself
// GCC hoisted every load and broadcast of a block to its top and spilled.
template <bool Vnni>
struct Avx2Runner {
  static constexpr int kMaxTokens = 4;
  template <TensorType T, int NT>
  static void Pass(const uint8_t* group, size_t nb, const uint8_t* xt, size_t x_stride, float* yt, size_t y_stride,
                   const uint8_t* pf, size_t lines) {
    x16::Kernel<Avx2Pair<Vnni>, T, NT>(group, nb, xt, x_stride, yt, y_stride, pf, lines);
  }
  template <TensorType T>
  static void Run(const uint8_t* group, size_t nb, const uint8_t* x, size_t x_stride, int nt, float* y,
                  size_t y_stride, const uint8_t* pf, size_t pf_lines) {
    // The lines to fetch, shared out over the passes (x16::ShareOfPass).
    const size_t passes = static_cast<size_t>((nt + kMaxTokens - 1) / kMaxTokens);
    for (int t = 0; t < nt; t += kMaxTokens) {
      const uint8_t* xt = x + static_cast<size_t>(t) * x_stride;
      float* yt = y + static_cast<size_t>(t) * y_stride;
      const x16::PassLines p = x16::ShareOfPass(pf, pf_lines, static_cast<size_t>(t / kMaxTokens), passes);
      switch (std::min(nt - t, kMaxTokens)) {
        case 1: Pass<T, 1>(group, nb, xt, x_stride, yt, y_stride, p.pf, p.lines); break;
        case 2: Pass<T, 2>(group, nb, xt, x_stride, yt, y_stride, p.pf, p.lines); break;
        case 3: Pass<T, 3>(group, nb, xt, x_stride, yt, y_stride, p.pf, p.lines); break;
        default: Pass<T, 4>(group, nb, xt, x_stride, yt, y_stride, p.pf, p.lines); break;
      }
    }
  }
};

}  // namespace
}  // namespace pc
