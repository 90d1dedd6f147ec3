#include "kernels/ggml_compat.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/fp16.h"

namespace pc {

float GgmlReduce16(const float* lanes) {
  float half[8], quarter[4];
  for (int i = 0; i < 8; ++i) half[i] = lanes[8 + i] + lanes[i];
  for (int i = 0; i < 4; ++i) quarter[i] = half[4 + i] + half[i];
  return (quarter[0] + quarter[2]) + (quarter[1] + quarter[3]);
}

namespace {

// The vector-dot order over elements that load() widens to float. The
// reference keeps the leftover sum in float for F32 rows and in double for
// F16 rows.
template <typename T, typename TailSum>
float VecDot(const T* w, const T* x, size_t n, float (*load)(T)) {
  constexpr size_t kLanes = 16, kAccs = 4, kStep = kLanes * kAccs;
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
  TailSum sum = GgmlReduce16(acc[0]);
  for (size_t i = n_main; i < n; ++i) {
    const float product = load(w[i]) * load(x[i]);  // rounded on its own: not fused
    sum += static_cast<TailSum>(product);
  }
  return static_cast<float>(sum);
}

template <typename T>
float GemmDot(const T* w, const T* x, size_t n, float (*load)(T)) {
  PC_CHECK(n % 16 == 0);
  float acc[16] = {};
  for (size_t i = 0; i < n; i += 16) {
    for (size_t l = 0; l < 16; ++l) acc[l] = std::fma(load(w[i + l]), load(x[i + l]), acc[l]);
  }
  return GgmlReduce16(acc);
}

float LoadF32(float v) { return v; }
float LoadF16(uint16_t v) { return Fp16ToFp32(v); }

}  // namespace

float GgmlDotF32Vec(const float* w, const float* x, size_t n) { return VecDot<float, float>(w, x, n, LoadF32); }
float GgmlDotF32Gemm(const float* w, const float* x, size_t n) { return GemmDot<float>(w, x, n, LoadF32); }
namespace {

// Rounds v to the nearest F16 (ties to even) without double rounding: to
// float with round-to-odd (13 spare bits), then float to F16.
float RoundToF16(double v) {
  float f = static_cast<float>(v);
  if (static_cast<double>(f) != v) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    if ((bits & 1) == 0) f = std::nextafter(f, v > f ? HUGE_VALF : -HUGE_VALF);
  }
  return Fp16ToFp32(Fp32ToFp16(f));
}

// F16 arithmetic as AVX512-FP16 does it: exact result rounded once to F16.
// (Products of F16 values are exact in double and so are their sums with
// an F16 addend in all but extreme exponent spreads.)
float HalfFma(float a, float b, float c) { return RoundToF16(static_cast<double>(a) * b + c); }
float HalfAdd(float a, float b) { return RoundToF16(static_cast<double>(a) + b); }

}  // namespace

float GgmlDotF16Vec(const uint16_t* w, const uint16_t* x, size_t n) {
  constexpr size_t kLanes = 32, kAccs = 4, kStep = kLanes * kAccs;
  float acc[kAccs][kLanes] = {};  // F16 values held in floats
  const size_t n_main = n - n % kStep;
  for (size_t i = 0; i < n_main; i += kStep) {
    for (size_t j = 0; j < kAccs; ++j) {
      const size_t base = i + j * kLanes;
      for (size_t l = 0; l < kLanes; ++l) {
        acc[j][l] = HalfFma(Fp16ToFp32(w[base + l]), Fp16ToFp32(x[base + l]), acc[j][l]);
      }
    }
  }
  for (size_t l = 0; l < kLanes; ++l) {
    acc[0][l] = HalfAdd(acc[0][l], acc[2][l]);
    acc[1][l] = HalfAdd(acc[1][l], acc[3][l]);
  }
  for (size_t l = 0; l < kLanes; ++l) acc[0][l] = HalfAdd(acc[0][l], acc[1][l]);
  // 32-lane tree: halves, quarters, eighths, then the last pair.
  float* a = acc[0];
  for (size_t width = kLanes / 2; width >= 1; width /= 2) {
    for (size_t l = 0; l < width; ++l) a[l] = HalfAdd(a[l], a[l + width]);
  }
  double sum = a[0];
  for (size_t i = n_main; i < n; ++i) sum += static_cast<double>(Fp16ToFp32(w[i]) * Fp16ToFp32(x[i]));
  return static_cast<float>(sum);
}

float GgmlDotF16Gemm(const uint16_t* w, const uint16_t* x, size_t n) { return GemmDot<uint16_t>(w, x, n, LoadF16); }

namespace {

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

}  // namespace

float GgmlDotQ8_0(const BlockQ8_0* w, const BlockQ8_0* x, size_t num_blocks) {
  return QuantDot(w, x, num_blocks, [](const BlockQ8_0& b, int8_t* q) { std::copy(b.qs, b.qs + kQuantBlock, q); });
}

float GgmlDotQ4_0(const BlockQ4_0* w, const BlockQ8_0* x, size_t num_blocks) {
  return QuantDot(w, x, num_blocks, [](const BlockQ4_0& b, int8_t* q) {
    for (size_t j = 0; j < kQuantBlock / 2; ++j) {
      q[j] = static_cast<int8_t>((b.qs[j] & 15) - 8);
      q[j + kQuantBlock / 2] = static_cast<int8_t>((b.qs[j] >> 4) - 8);
    }
  });
}

void GgmlQuantizeRowQ8_K(const float* x, BlockQ8_K* y, size_t n) {
  PC_CHECK(n % kSuperBlock == 0);
  for (size_t b = 0; b < n / kSuperBlock; ++b) {
    const float* xb = x + b * kSuperBlock;
    float amax = 0, max = 0;
    for (size_t i = 0; i < kSuperBlock; ++i) {
      if (std::fabs(xb[i]) > amax) {
        amax = std::fabs(xb[i]);
        max = xb[i];
      }
    }
    if (amax == 0.0f) {
      y[b] = BlockQ8_K{};
      continue;
    }
    const float iscale = -127.0f / max;
    for (size_t i = 0; i < kSuperBlock; ++i) {
      y[b].qs[i] = static_cast<int8_t>(std::min(127.0f, std::nearbyint(iscale * xb[i])));
    }
    y[b].d = 1.0f / iscale;
  }
}

float GgmlDotQ6_K(const BlockQ6_K* w, const BlockQ8_K* x, size_t num_blocks) {
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

void GgmlQuantizeRowQ8_0(const float* x, BlockQ8_0* y, size_t n) {
  PC_CHECK(n % kQuantBlock == 0);
  for (size_t b = 0; b < n / kQuantBlock; ++b) {
    const float* xb = x + b * kQuantBlock;
    float amax = 0;
    for (size_t i = 0; i < kQuantBlock; ++i) amax = std::max(amax, std::fabs(xb[i]));
    y[b].d = Fp32ToFp16(amax / 127.0f);
    const float scale = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (size_t i = 0; i < kQuantBlock; ++i) {
      y[b].qs[i] = static_cast<int8_t>(std::nearbyint(xb[i] * scale));  // ties to even
    }
  }
}

float GgmlExpApprox(float x) {
  // exp(x) = 2^k * exp(r), k = round(x / ln2), r = x - k*ln2 with ln2 split
  // in a high and a low part; exp(r) by a degree-5 polynomial evaluated as
  // two interleaved halves (the reference's Estrin-like scheme).
  constexpr float kShift = 0x1.8p23f;  // adding it rounds to an integer
  const float shifted = std::fma(x, 0x1.715476p+0f, kShift);
  const float k = shifted - kShift;
  if (std::fabs(k) > 126.0f) return std::exp(x);
  const float r = std::fma(-k, 0x1.7f7d1cp-20f, std::fma(-k, 0x1.62e4p-1f, x));
  const float r2 = r * r;
  const float high = std::fma(std::fma(0x1.0e4020p-7f, r, 0x1.573e2ep-5f), r2, std::fma(0x1.555e66p-3f, r, 0x1.fffdb6p-2f));
  const float poly = std::fma(high, r2, std::fma(0x1.ffffecp-1f, r, 1.0f));
  return std::ldexp(poly, static_cast<int>(k));
}

void GgmlSiluMul(const float* gate, const float* up, float* out, size_t num_rows, size_t row_len) {
  const size_t n_approx = row_len - row_len % 16;
  for (size_t r = 0; r < num_rows; ++r) {
    const size_t base = r * row_len;
    for (size_t i = 0; i < row_len; ++i) {
      const float g = gate[base + i];
      const float e = i < n_approx ? GgmlExpApprox(0.0f - g) : std::exp(-g);
      const float silu = g / (1.0f + e);
      out[base + i] = silu * up[base + i];
    }
  }
}

}  // namespace pc
