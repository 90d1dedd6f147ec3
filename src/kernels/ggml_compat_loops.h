// The reference-order loops of ggml_compat.cc, compiled twice: portably
// (ggml_compat.cc) and with AVX2+FMA (ggml_compat_avx2.cc), where fused
// multiply-adds are instructions and the 16-lane loops vectorise. Every lane
// is independent and no sum is reassociated, so both builds give the same
// bits (tests/kernels/ggml_compat_test.cc checks it). That needs -ffp-contract=off
// (src/CMakeLists.txt): GCC otherwise fuses "p = w*x; s += p" into one FMA
// where FMA exists. Internal linkage: each build
// keeps its own copy.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "base/check.h"
#include "base/fp16.h"
#include "kernels/ggml_compat.h"

namespace pc {
namespace {

inline float Reduce16(const float* lanes) {
  float half[8], quarter[4];
  for (int i = 0; i < 8; ++i) half[i] = lanes[8 + i] + lanes[i];
  for (int i = 0; i < 4; ++i) quarter[i] = half[4 + i] + half[i];
  return (quarter[0] + quarter[2]) + (quarter[1] + quarter[3]);
}

// The horizontal sums of the two builds. AVX-512: Reduce16 for both the
// vector dot and the GEMM. AVX2: the vector dot's two horizontal adds over
// t_i = a_i + a_{i+4}, (t0 + t1) + (t2 + t3); the GEMM's 128-bit halves
// added, then (t0 + t2) + (t1 + t3).
template <size_t kLanes>
inline float VecReduce(const float* a) {
  if constexpr (kLanes == 16) {
    return Reduce16(a);
  } else {
    static_assert(kLanes == 8);
    float t[4];
    for (size_t l = 0; l < 4; ++l) t[l] = a[l] + a[l + 4];
    return (t[0] + t[1]) + (t[2] + t[3]);
  }
}
template <size_t kLanes>
inline float GemmReduce(const float* a) {
  if constexpr (kLanes == 16) {
    return Reduce16(a);
  } else {
    static_assert(kLanes == 8);
    float t[4];
    for (size_t l = 0; l < 4; ++l) t[l] = a[l + 4] + a[l];
    return (t[0] + t[2]) + (t[1] + t[3]);
  }
}

// The vector-dot order over elements that load() widens to float, kLanes
// wide (16 in the AVX-512 builds, 8 in the AVX2 one): 4 accumulators over
// steps of 4 kLanes, acc0+acc2, acc1+acc3, their sum, the horizontal sum,
// then the leftover products one at a time. The reference keeps that
// leftover sum in float for F32 rows and in double for F16 rows.
template <size_t kLanes, typename T, typename TailSum, typename Load>
float VecDotW(const T* w, const T* x, size_t n, Load load) {
  constexpr size_t kAccs = 4, kStep = kLanes * kAccs;
  float acc[kAccs][kLanes] = {};
  const size_t n_main = n - n % kStep;
  for (size_t i = 0; i < n_main; i += kStep) {
    for (size_t j = 0; j < kAccs; ++j) {
      const size_t base = i + j * kLanes;
      for (size_t l = 0; l < kLanes; ++l) acc[j][l] = std::fma(load(w[base + l]), load(x[base + l]), acc[j][l]);
    }
  }
  for (size_t l = 0; l < kLanes; ++l) {
    acc[0][l] += acc[2][l];
    acc[1][l] += acc[3][l];
  }
  for (size_t l = 0; l < kLanes; ++l) acc[0][l] += acc[1][l];
  TailSum sum = VecReduce<kLanes>(acc[0]);
  for (size_t i = n_main; i < n; ++i) {
    const float product = load(w[i]) * load(x[i]);  // rounded on its own: not fused
    sum += static_cast<TailSum>(product);
  }
  return static_cast<float>(sum);
}
template <typename T, typename TailSum, typename Load>
float VecDot(const T* w, const T* x, size_t n, Load load) {
  return VecDotW<16, T, TailSum>(w, x, n, load);
}
template <typename T, typename TailSum, typename Load>
float VecDot8(const T* w, const T* x, size_t n, Load load) {
  return VecDotW<8, T, TailSum>(w, x, n, load);
}

// The GEMM order (its tiled kernel; the inner size a multiple of kLanes):
// one accumulator of kLanes, then the horizontal sum.
template <size_t kLanes, typename T, typename Load>
float GemmDotW(const T* w, const T* x, size_t n, Load load) {
  PC_CHECK(n % kLanes == 0);
  float acc[kLanes] = {};
  for (size_t i = 0; i < n; i += kLanes) {
    for (size_t l = 0; l < kLanes; ++l) acc[l] = std::fma(load(w[i + l]), load(x[i + l]), acc[l]);
  }
  return GemmReduce<kLanes>(acc);
}
template <typename T, typename Load>
float GemmDot(const T* w, const T* x, size_t n, Load load) {
  return GemmDotW<16, T>(w, x, n, load);
}
template <typename T, typename Load>
float GemmDot8(const T* w, const T* x, size_t n, Load load) {
  return GemmDotW<8, T>(w, x, n, load);
}

// a * b + c rounded once to F16 (AVX512-FP16's fused multiply-add), for F16
// values a, b, c held in floats: a * b is exact in float (22 significant
// bits); TwoSum gives the float sum s and its exact error e; an inexact s gets
// its last bit set toward e (round to odd, 13 bits below F16's last), so the
// one rounding to F16 that follows is the correct one. No double arithmetic.
inline float HalfFma(float a, float b, float c) {
  const float p = a * b;
  const float s = p + c;
  const float bb = s - p;
  const float e = (p - (s - bb)) + (c - bb);
  float r = s;
  if (e != 0.0f) {
    uint32_t bits;
    std::memcpy(&bits, &s, sizeof(bits));
    if ((bits & 1) == 0) {
      bits += (e > 0.0f) == (s > 0.0f) ? 1u : ~0u;  // away from or toward zero
      std::memcpy(&r, &bits, sizeof(r));
    }
  }
  return Fp16ToFp32(Fp32ToFp16(r));
}

// The F16 vector dot (ggml_compat.h, GgmlDotF16Vec): 4 accumulators of 32
// F16 lanes over steps of 128, F16 adds acc0+acc2, acc1+acc3, their sum, the
// 32-to-1 tree, then the leftover exact products summed in double. fma8 does
// 8 lanes of HalfFma (an add being a multiply by one), in place on acc.
template <typename Fma8>
float F16VecDot(const uint16_t* w, const uint16_t* x, size_t n, Fma8 fma8) {
  constexpr size_t kLanes = 32, kAccs = 4, kStep = kLanes * kAccs;
  alignas(32) float acc[kAccs][kLanes] = {};
  alignas(32) static const float kOnes[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  const size_t n_main = n - n % kStep;
  for (size_t i = 0; i < n_main; i += kStep) {
    for (size_t j = 0; j < kAccs; ++j) {
      for (size_t l = 0; l < kLanes; l += 8) fma8(w + i + j * kLanes + l, x + i + j * kLanes + l, &acc[j][l]);
    }
  }
  auto add8 = [&](float* a, const float* b) { fma8(nullptr, nullptr, a, b, kOnes); };
  for (size_t l = 0; l < kLanes; l += 8) {
    add8(&acc[0][l], &acc[2][l]);
    add8(&acc[1][l], &acc[3][l]);
  }
  for (size_t l = 0; l < kLanes; l += 8) add8(&acc[0][l], &acc[1][l]);
  float* a = acc[0];
  for (size_t width = kLanes / 2; width >= 1; width /= 2) {
    for (size_t l = 0; l < width; ++l) a[l] = HalfFma(a[l + width], 1.0f, a[l]);
  }
  double sum = a[0];
  for (size_t i = n_main; i < n; ++i) sum += static_cast<double>(Fp16ToFp32(w[i]) * Fp16ToFp32(x[i]));
  return static_cast<float>(sum);
}

// 8 lanes of HalfFma, portably: acc[l] = HalfFma(w[l], x[l], acc[l]) for
// F16 rows w and x; or, with w null, acc[l] = HalfFma(b[l], ones[l], acc[l]).
struct PortableFma8 {
  void operator()(const uint16_t* w, const uint16_t* x, float* acc, const float* b = nullptr,
                  const float* ones = nullptr) const {
    for (size_t l = 0; l < 8; ++l) {
      acc[l] = w != nullptr ? HalfFma(Fp16ToFp32(w[l]), Fp16ToFp32(x[l]), acc[l]) : HalfFma(b[l], ones[l], acc[l]);
    }
  }
};

inline float LoadF32(float v) { return v; }
inline float LoadF16(uint16_t v) { return Fp16ToFp32(v); }

// Blocks of 32 int8 products summed in 8 lanes of 4 (exact integers), each
// lane accumulated over blocks as fma(d_w * d_x, lane, acc), then the 8-lane
// tree (t_i = a_i + a_{i+4}; (t0 + t2) + (t1 + t3)).
template <typename WeightBlock, typename Unpack>
float QuantDot(const WeightBlock* w, const BlockQ8_0* x, size_t num_blocks, Unpack unpack) {
  float acc[8] = {};
  int8_t wq[kQuantBlock];
  for (size_t b = 0; b < num_blocks; ++b) {
    unpack(w[b], wq);
    const float d = Fp16ToFp32(w[b].d) * Fp16ToFp32(x[b].d);
    for (size_t l = 0; l < 8; ++l) {
      int32_t lane = 0;
      for (size_t i = 4 * l; i < 4 * l + 4; ++i) lane += int32_t{wq[i]} * x[b].qs[i];
      acc[l] = std::fma(d, static_cast<float>(lane), acc[l]);
    }
  }
  float t[4];
  for (size_t i = 0; i < 4; ++i) t[i] = acc[i] + acc[i + 4];
  return (t[0] + t[2]) + (t[1] + t[3]);
}

// MXFP4 times Q8_0 in the reference's AVX2 order: blocks in pairs, even and
// odd blocks into two accumulators of 8 lanes (lane l: the exact sum of
// products 4l..4l+3 with the grid values; fused multiply-add by d_x times the
// block's power of two), the two accumulators added, the 8-lane tree; an odd
// last block added as one fused multiply-add of d by its exact sum.
inline float DotMxfp4Order(const BlockMXFP4* w, const BlockQ8_0* x, size_t num_blocks) {
  float acc[2][8] = {};
  auto lanes = [&](size_t b, int32_t* lane) {
    for (size_t l = 0; l < 8; ++l) {
      lane[l] = 0;
      for (size_t i = 4 * l; i < 4 * l + 4; ++i) {
        const int nib = i < 16 ? w[b].qs[i] & 15 : w[b].qs[i - 16] >> 4;
        lane[l] += int32_t{kMxfp4Values[nib]} * x[b].qs[i];
      }
    }
  };
  auto scale = [&](size_t b) { return Fp16ToFp32(x[b].d) * Bf16ToFp32(E8m0HalfToBf16(w[b].e)); };
  size_t b = 0;
  for (; b + 1 < num_blocks; b += 2) {
    for (size_t k = 0; k < 2; ++k) {
      int32_t lane[8];
      lanes(b + k, lane);
      const float d = scale(b + k);
      for (size_t l = 0; l < 8; ++l) acc[k][l] = std::fma(d, static_cast<float>(lane[l]), acc[k][l]);
    }
  }
  float a[8], t[4];
  for (size_t l = 0; l < 8; ++l) a[l] = acc[0][l] + acc[1][l];
  for (size_t i = 0; i < 4; ++i) t[i] = a[i] + a[i + 4];
  float sum = (t[0] + t[2]) + (t[1] + t[3]);
  if (b < num_blocks) {
    int32_t lane[8], total = 0;
    lanes(b, lane);
    for (int32_t v : lane) total += v;
    sum = std::fma(scale(b), static_cast<float>(total), sum);
  }
  return sum;
}

// The order of the reference's interleaved 8-row forms (its CPU_REPACK
// buffers, GgmlRepacksRows): every output, one token or several, is a chain
// over blocks of acc = fma(block sum, d_w * d_x, acc) from 0, the block sum
// exact. Unpack gives the block's 32 weight values, Scale its d_w.
template <typename WeightBlock, typename Unpack, typename Scale>
float RepackedDot(const WeightBlock* w, const BlockQ8_0* x, size_t num_blocks, Unpack unpack, Scale scale) {
  float acc = 0;
  int8_t wq[kQuantBlock];
  for (size_t b = 0; b < num_blocks; ++b) {
    unpack(w[b], wq);
    int32_t sum = 0;
    for (size_t i = 0; i < kQuantBlock; ++i) sum += int32_t{wq[i]} * x[b].qs[i];
    acc = std::fma(static_cast<float>(sum), scale(w[b]) * Fp16ToFp32(x[b].d), acc);
  }
  return acc;
}

inline void UnpackQ8_0(const BlockQ8_0& b, int8_t* q) { std::copy(b.qs, b.qs + kQuantBlock, q); }
inline void UnpackQ4_0(const BlockQ4_0& b, int8_t* q) {
  for (size_t j = 0; j < kQuantBlock / 2; ++j) {
    q[j] = static_cast<int8_t>((b.qs[j] & 15) - 8);
    q[j + kQuantBlock / 2] = static_cast<int8_t>((b.qs[j] >> 4) - 8);
  }
}

float DotQ6_K(const BlockQ6_K* w, const BlockQ8_K* x, size_t num_blocks) {
  float acc[8] = {};
  for (size_t b = 0; b < num_blocks; ++b) {
    const BlockQ6_K& wb = w[b];
    int32_t lanes[8] = {};
    for (size_t e = 0; e < kSuperBlock; ++e) {
      // The file layout (see DequantizeBlockQ6_K): halves of 128, each byte
      // of ql/qh feeding four values 32 apart.
      const size_t half = e / 128, group = (e % 128) / 32, l = e % 32;
      const uint8_t* ql = wb.ql + 64 * half;
      const uint8_t* qh = wb.qh + 32 * half;
      const uint8_t lbyte = ql[l + (group == 1 || group == 3 ? 32 : 0)];
      const int lo4 = group < 2 ? (lbyte & 0xF) : (lbyte >> 4);
      const int hi2 = (qh[l] >> (2 * group)) & 3;
      const int q = (lo4 | (hi2 << 4)) - 32;
      const int scale = wb.scales[8 * half + 2 * group + l / 16];
      lanes[l / 4] += scale * q * x[b].qs[e];
    }
    const float d = x[b].d * Fp16ToFp32(wb.d);
    for (size_t i = 0; i < 8; ++i) acc[i] = std::fma(d, static_cast<float>(lanes[i]), acc[i]);
  }
  float t[4];
  for (size_t i = 0; i < 4; ++i) t[i] = acc[i] + acc[i + 4];
  return (t[0] + t[2]) + (t[1] + t[3]);
}


float DotF32Vec(const float* w, const float* x, size_t n) { return VecDot<float, float>(w, x, n, LoadF32); }
float DotF32Gemm(const float* w, const float* x, size_t n) { return GemmDot<float>(w, x, n, LoadF32); }
float DotF16Gemm(const uint16_t* w, const uint16_t* x, size_t n) { return GemmDot<uint16_t>(w, x, n, LoadF16); }
[[maybe_unused]] float DotF16Vec(const uint16_t* w, const uint16_t* x, size_t n) { return F16VecDot(w, x, n, PortableFma8{}); }
float DotQ8_0(const BlockQ8_0* w, const BlockQ8_0* x, size_t nb) { return QuantDot(w, x, nb, UnpackQ8_0); }
float DotQ4_0(const BlockQ4_0* w, const BlockQ8_0* x, size_t nb) { return QuantDot(w, x, nb, UnpackQ4_0); }
inline void UnpackMxfp4(const BlockMXFP4& b, int8_t* q) {
  for (size_t j = 0; j < kQuantBlock / 2; ++j) {
    q[j] = kMxfp4Values[b.qs[j] & 15];
    q[j + kQuantBlock / 2] = kMxfp4Values[b.qs[j] >> 4];
  }
}
float DotQ4_0X8(const BlockQ4_0* w, const BlockQ8_0* x, size_t nb) {
  return RepackedDot(w, x, nb, UnpackQ4_0, [](const BlockQ4_0& b) { return Fp16ToFp32(b.d); });
}
float DotMxfp4X8(const BlockMXFP4* w, const BlockQ8_0* x, size_t nb) {
  return RepackedDot(w, x, nb, UnpackMxfp4, [](const BlockMXFP4& b) { return Bf16ToFp32(E8m0HalfToBf16(b.e)); });
}

float DotF32Vec8(const float* w, const float* x, size_t n) { return VecDot8<float, float>(w, x, n, LoadF32); }
float DotF32Gemm8(const float* w, const float* x, size_t n) { return GemmDot8<float>(w, x, n, LoadF32); }
float DotF16Vec8(const uint16_t* w, const uint16_t* x, size_t n) { return VecDot8<uint16_t, double>(w, x, n, LoadF16); }
float DotF16Gemm8(const uint16_t* w, const uint16_t* x, size_t n) { return GemmDot8<uint16_t>(w, x, n, LoadF16); }
float DotF16VecF32(const uint16_t* w, const uint16_t* x, size_t n) { return VecDot<uint16_t, double>(w, x, n, LoadF16); }

// The table of one target, its F16 vector dot given (the targets' other
// loops are the same code in both builds).
constexpr GgmlCompatKernels MakeGgmlCompatKernels(const char* name, GgmlTarget target,
                                                  float (*f16_vec_fp16)(const uint16_t*, const uint16_t*, size_t)) {
  switch (target) {
    case GgmlTarget::kAvx2:
      return {name, DotF32Vec8, DotF32Gemm8, DotF16Gemm8, DotF16Vec8, DotQ8_0, DotQ4_0, DotQ6_K, DotMxfp4Order, DotQ4_0X8, DotMxfp4X8, 8};
    case GgmlTarget::kAvx512:
      return {name, DotF32Vec, DotF32Gemm, DotF16Gemm, DotF16VecF32, DotQ8_0, DotQ4_0, DotQ6_K, DotMxfp4Order, DotQ4_0X8, DotMxfp4X8, 16};
    default:
      return {name, DotF32Vec, DotF32Gemm, DotF16Gemm, f16_vec_fp16, DotQ8_0, DotQ4_0, DotQ6_K, DotMxfp4Order, DotQ4_0X8, DotMxfp4X8, 16};
  }
}

}  // namespace
}  // namespace pc
