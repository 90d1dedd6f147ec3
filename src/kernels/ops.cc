#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "base/check.h"
#include "base/fp16.h"
#include "kernels/ops_simd.h"

namespace pc {

namespace {

// out = x / rms * w, given the row's sum of squares ss.
void ScaleByRms(const float* x, const float* w, float* out, size_t n, double ss, float eps) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(n)) + eps);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

}  // namespace

void RmsNorm(const float* x, const float* w, float* out, size_t n, float eps) {
  // Squares rounded to float, summed in double: the reference engine's
  // order (see ggml_compat.h), at no cost in precision that matters.
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += static_cast<double>(x[i] * x[i]);
  ScaleByRms(x, w, out, n, ss, eps);
}

void RmsNormRows(const float* x, const float* w, float* out, size_t rows, size_t n, float eps) {
  constexpr size_t kChains = 4;
  size_t r = 0;
  for (; r + kChains <= rows; r += kChains) {
    const float* xr = x + r * n;
    double ss[kChains] = {};
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < kChains; ++j) ss[j] += static_cast<double>(xr[j * n + i] * xr[j * n + i]);
    }
    for (size_t j = 0; j < kChains; ++j) ScaleByRms(xr + j * n, w, out + (r + j) * n, n, ss[j], eps);
  }
  for (; r < rows; ++r) RmsNorm(x + r * n, w, out + r * n, n, eps);
}

void YarnCorrDims(size_t rope_dim, int orig_ctx, float freq_base, float beta_fast, float beta_slow, float* low,
                  float* high) {
  // The dim whose rotation count over orig_ctx positions is n_rot.
  const float dims = static_cast<float>(rope_dim);
  auto corr_dim = [&](float n_rot) {
    return dims * std::log(static_cast<float>(orig_ctx) / (n_rot * 2.0f * std::numbers::pi_v<float>)) /
           (2.0f * std::log(freq_base));
  };
  *low = std::max(0.0f, std::floor(corr_dim(beta_fast)));
  *high = std::min(dims - 1.0f, std::ceil(corr_dim(beta_slow)));
}

void RopeAngles(int32_t pos, const RopeParams& p, float* cs) {
  const size_t rope_dim = p.rope_dim;
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(rope_dim));
  float theta_base = static_cast<float>(pos);
  const float yarn_mscale = p.ext_factor != 0.0f ? p.attn_factor * (1.0f + 0.1f * std::log(1.0f / p.freq_scale)) : 1.0f;
  for (size_t i = 0; i < rope_dim / 2; ++i) {
    const float extrap = p.freq_factors != nullptr ? theta_base / p.freq_factors[i] : theta_base;
    float theta = extrap;
    if (p.freq_scale != 1.0f) theta *= p.freq_scale;
    if (p.ext_factor != 0.0f) {
      // 1 below corr_low (extrapolated), 0 above corr_high (interpolated).
      const float y = (static_cast<float>(i) - p.corr_low) / std::max(0.001f, p.corr_high - p.corr_low);
      const float mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
      theta = std::fma(theta, 1.0f - mix, extrap * mix);  // as the reference's FMA builds contract it
      cs[2 * i] = std::cos(theta) * yarn_mscale;
      cs[2 * i + 1] = std::sin(theta) * yarn_mscale;
    } else {
      cs[2 * i] = std::cos(theta);
      cs[2 * i + 1] = std::sin(theta);
    }
    theta_base *= theta_scale;
  }
}

namespace {

// One product fused into each sum, the other rounded first: as the
// reference engine's compiler contracts these lines. Rounding flips here
// show up downstream once K and Q are rounded to F16.
[[gnu::always_inline]] inline void RopeBody(float* x, size_t n_heads, const float* cs, const RopeParams& p) {
  const size_t rope_dim = p.rope_dim;
  const bool neox = p.neox;
  for (size_t h = 0; h < n_heads; ++h) {
    float* v = x + h * p.head_dim;
    for (size_t i = 0; i < rope_dim / 2; ++i) {
      const float c = cs[2 * i], s = cs[2 * i + 1];
      const size_t a = neox ? i : 2 * i;
      const size_t b = neox ? i + rope_dim / 2 : 2 * i + 1;
      const float x0 = v[a], x1 = v[b];
      v[a] = std::fma(x0, c, -(x1 * s));
      v[b] = std::fma(x0, s, x1 * c);
    }
  }
}

// The same code where the CPU has FMA: std::fma becomes one instruction
// instead of a call into libm per element (the same correctly rounded
// result either way).
#if defined(__x86_64__) && defined(__GNUC__)
[[gnu::target("fma")]] void RopeBodyFma(float* x, size_t n_heads, const float* cs, const RopeParams& p) {
  RopeBody(x, n_heads, cs, p);
}
#endif

}  // namespace

void RopeWith(float* x, size_t n_heads, const float* cs, const RopeParams& p) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool has_fma = __builtin_cpu_supports("fma");
  if (has_fma) return RopeBodyFma(x, n_heads, cs, p);
#endif
  RopeBody(x, n_heads, cs, p);
}

void Rope(float* x, size_t n_heads, int32_t pos, const RopeParams& p) {
  float cs[kMaxRopeDim];
  PC_CHECK(p.rope_dim <= kMaxRopeDim);
  RopeAngles(pos, p, cs);
  RopeWith(x, n_heads, cs, p);
}

void SiluMul(const float* gate, const float* up, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

namespace {
float GeluTanh(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535588f, kCoefA = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}
// The reference engine's table entry before its F16 rounding: the same
// formula as its compiler contracts it on the FMA builds (1 + a x^2 fused).
// Unfused, one F16 input of the 37,376 in (-10, 10) (-1.999) rounds to
// another F16 value, and that alone moved Gemma 2 references by up to 0.046.
float GeluTanhFma(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535588f, kCoefA = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * std::fma(kCoefA * x, x, 1.0f)));
}
}  // namespace

void GeluMul(const float* gate, const float* up, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = GeluTanh(gate[i]) * up[i];
}

void GeluMulF16(const float* gate, const float* up, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float x = gate[i];
    float g;
    if (x <= -10.0f) g = 0.0f;
    else if (x >= 10.0f) g = x;
    else g = Fp16ToFp32(Fp32ToFp16(GeluTanhFma(Fp16ToFp32(Fp32ToFp16(x)))));
    out[i] = g * up[i];
  }
}

void SwigluOaiMul(const float* gate, const float* up, float* out, size_t n, float alpha, float limit) {
  for (size_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit);
    const float u = std::clamp(up[i], -limit, limit);
    out[i] = g / (1.0f + std::exp(alpha * -g)) * (u + 1.0f);
  }
}

void SoftCap(float* x, size_t n, float cap) {
  const float inv = 1.0f / cap;
  for (size_t i = 0; i < n; ++i) x[i] = std::tanh(x[i] * inv) * cap;
}

void AddInPlace(float* y, const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += x[i];
}

void LogSoftmax(const float* logits, float* out, size_t n) {
  if (n == 0) return;
  float max = logits[0];
  for (size_t i = 1; i < n; ++i) max = std::fmax(max, logits[i]);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  const double log_sum = std::log(sum);
  for (size_t i = 0; i < n; ++i) {
    out[i] = static_cast<float>(static_cast<double>(logits[i]) - max - log_sum);
  }
}

namespace {
constexpr RowOps kScalarOps = {
    .name = "scalar",
    .rms_norm_rows = RmsNormRows,
    .add = AddInPlace,
    .rope = RopeWith,
    .quantize_q8a = QuantizeRowQ8A,
};
}  // namespace

const RowOps& ScalarRowOps() { return kScalarOps; }

const RowOps& RowOpsFor(Isa isa) {
  if (isa >= Isa::kAvx2) {
    if (const RowOps* ops = Avx2RowOps()) return *ops;
  }
  return kScalarOps;
}

}  // namespace pc
