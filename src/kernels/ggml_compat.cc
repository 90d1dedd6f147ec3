#include "kernels/ggml_compat.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <atomic>
#include <cstring>

#include "base/check.h"
#include "base/fp16.h"
#include "kernels/ggml_compat_loops.h"

namespace pc {

GgmlTarget DefaultGgmlTarget();

namespace {

const GgmlCompatKernels kGgmlScalar[] = {
    MakeGgmlCompatKernels("scalar", GgmlTarget::kAvx512Fp16, DotF16Vec),
    MakeGgmlCompatKernels("scalar/avx512", GgmlTarget::kAvx512, DotF16Vec),
    MakeGgmlCompatKernels("scalar/avx2", GgmlTarget::kAvx2, DotF16Vec),
};
std::atomic<GgmlTarget> g_target{DefaultGgmlTarget()};
constexpr const char* kTargetNames[] = {"avx512fp16", "avx512", "avx2"};

}  // namespace

GgmlTarget DefaultGgmlTarget() {
  const CpuFeatures& f = DetectCpuFeatures();
  if (f.avx512f && f.avx512bw && f.avx512vl) return f.avx512fp16 ? GgmlTarget::kAvx512Fp16 : GgmlTarget::kAvx512;
  return GgmlTarget::kAvx2;
}

void SetGgmlTarget(GgmlTarget t) { g_target.store(t, std::memory_order_relaxed); }
GgmlTarget ActiveGgmlTarget() { return g_target.load(std::memory_order_relaxed); }
const char* GgmlTargetName(GgmlTarget t) { return kTargetNames[static_cast<int>(t)]; }
Result<GgmlTarget> ParseGgmlTarget(const std::string& name) {
  for (int i = 0; i < 3; ++i) {
    if (name == kTargetNames[i]) return static_cast<GgmlTarget>(i);
  }
  return Errorf("unknown ggml numerics target '{}' (expected avx512fp16, avx512 or avx2)", name);
}

const GgmlCompatKernels& GgmlCompatKernelsFor(Isa isa, GgmlTarget target) {
  if (isa >= Isa::kAvx2) {
    if (const GgmlCompatKernels* k = GgmlCompatAvx2Kernels(target)) return *k;
  }
  return kGgmlScalar[static_cast<int>(target)];
}
const GgmlCompatKernels& GgmlCompatKernelsFor(Isa isa) { return GgmlCompatKernelsFor(isa, ActiveGgmlTarget()); }

const GgmlCompatKernels& ActiveGgmlCompatKernels() {
  Result<Isa> isa = ActiveIsa();
  return GgmlCompatKernelsFor(isa.ok() ? *isa : Isa::kScalar);
}

float GgmlReduce16(const float* lanes) { return Reduce16(lanes); }
float GgmlDotF32Vec(const float* w, const float* x, size_t n) { return ActiveGgmlCompatKernels().f32_vec(w, x, n); }
float GgmlDotF32Gemm(const float* w, const float* x, size_t n) { return ActiveGgmlCompatKernels().f32_gemm(w, x, n); }
float GgmlDotF16Vec(const uint16_t* w, const uint16_t* x, size_t n) { return ActiveGgmlCompatKernels().f16_vec(w, x, n); }
float GgmlDotF16Gemm(const uint16_t* w, const uint16_t* x, size_t n) { return ActiveGgmlCompatKernels().f16_gemm(w, x, n); }

float GgmlDotQ8_0(const BlockQ8_0* w, const BlockQ8_0* x, size_t num_blocks) {
  return ActiveGgmlCompatKernels().q8_0(w, x, num_blocks);
}

float GgmlDotQ4_0(const BlockQ4_0* w, const BlockQ8_0* x, size_t num_blocks) {
  return ActiveGgmlCompatKernels().q4_0(w, x, num_blocks);
}

void GgmlQuantizeRowQ8_K(const float* x, BlockQ8_K* y, size_t n) { QuantizeRowQ8_K(x, y, n); }

float GgmlDotQ6_K(const BlockQ6_K* w, const BlockQ8_K* x, size_t num_blocks) {
  return ActiveGgmlCompatKernels().q6_k(w, x, num_blocks);
}

float GgmlDotMxfp4(const BlockMXFP4* w, const BlockQ8_0* x, size_t num_blocks) {
  return ActiveGgmlCompatKernels().mxfp4(w, x, num_blocks);
}

bool GgmlRepacksRows(TensorType t, size_t rows) {
  return (t == TensorType::kQ4_0 || t == TensorType::kMXFP4) && rows % 8 == 0;
}

float GgmlDotQ4_0Repacked(const BlockQ4_0* w, const BlockQ8_0* x, size_t num_blocks) {
  return ActiveGgmlCompatKernels().q4_0_repacked(w, x, num_blocks);
}

float GgmlDotMxfp4Repacked(const BlockMXFP4* w, const BlockQ8_0* x, size_t num_blocks) {
  return ActiveGgmlCompatKernels().mxfp4_repacked(w, x, num_blocks);
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

namespace {

// The AVX-512 build's form: 2^k * p(r), p(r) = 1 + ... evaluated in two
// interleaved halves, then scaled (the reference's scalef).
float ExpApproxAvx512(float x, float k, float r) {
  const float r2 = r * r;
  const float high = std::fma(std::fma(0x1.0e4020p-7f, r, 0x1.573e2ep-5f), r2, std::fma(0x1.555e66p-3f, r, 0x1.fffdb6p-2f));
  const float poly = std::fma(high, r2, std::fma(0x1.ffffecp-1f, r, 1.0f));
  (void)x;
  return std::ldexp(poly, static_cast<int>(k));
}

// The AVX2 build's form: j = p(r) - 1 (its linear term a plain product),
// then 2^k + j * 2^k in one fused multiply-add.
float ExpApproxAvx2(float x, float k, float r) {
  const float r2 = r * r;
  const float high = std::fma(std::fma(0x1.0e4020p-7f, r, 0x1.573e2ep-5f), r2, std::fma(0x1.555e66p-3f, r, 0x1.fffdb6p-2f));
  const float j = std::fma(high, r2, 0x1.ffffecp-1f * r);
  const float two_k = std::ldexp(1.0f, static_cast<int>(k));
  (void)x;
  return std::fma(j, two_k, two_k);
}

}  // namespace

float GgmlExpApprox(float x) {
  // exp(x) = 2^k * exp(r), k = round(x / ln2), r = x - k*ln2 with ln2 split
  // in a high and a low part; exp(r) by a degree-5 polynomial.
  constexpr float kShift = 0x1.8p23f;  // adding it rounds to an integer
  const float shifted = std::fma(x, 0x1.715476p+0f, kShift);
  const float k = shifted - kShift;
  if (std::fabs(k) > 126.0f) return std::exp(x);
  const float r = std::fma(-k, 0x1.7f7d1cp-20f, std::fma(-k, 0x1.62e4p-1f, x));
  return ActiveGgmlTarget() == GgmlTarget::kAvx2 ? ExpApproxAvx2(x, k, r) : ExpApproxAvx512(x, k, r);
}

size_t GgmlVectorLanes() { return ActiveGgmlTarget() == GgmlTarget::kAvx2 ? 8 : 16; }

float GgmlReduceLanes(const float* lanes) {
  if (GgmlVectorLanes() == 16) return Reduce16(lanes);
  float t[4];
  for (int i = 0; i < 4; ++i) t[i] = lanes[i + 4] + lanes[i];
  return (t[0] + t[2]) + (t[1] + t[3]);
}

void GgmlSoftMaxRow(const float* x, float* y, size_t n) {
  float max = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) max = std::max(max, x[i]);
  const size_t lanes = GgmlVectorLanes();
  double sum = 0;
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    for (size_t j = i; j < i + lanes; ++j) y[j] = GgmlExpApprox(x[j] - max);
    sum += GgmlReduceLanes(y + i);
  }
  for (; i < n; ++i) {
    y[i] = std::exp(x[i] - max);
    sum += y[i];
  }
  const float scale = static_cast<float>(1.0 / sum);
  for (size_t j = 0; j < n; ++j) y[j] *= scale;
}

void GgmlSiluMul(const float* gate, const float* up, float* out, size_t num_rows, size_t row_len) {
  const size_t lanes = GgmlVectorLanes();
  const size_t n_approx = row_len - row_len % lanes;
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
