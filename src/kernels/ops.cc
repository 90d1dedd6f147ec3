#include "kernels/ops.h"

#include "base/check.h"

#include <cmath>

namespace pc {

void RmsNorm(const float* x, const float* w, float* out, size_t n, float eps) {
  // Squares rounded to float, summed in double: the reference engine's
  // order (see ggml_compat.h), at no cost in precision that matters.
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += static_cast<double>(x[i] * x[i]);
  const float scale = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(n)) + eps);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

void RopeAngles(int32_t pos, const RopeParams& p, float* cs) {
  const size_t rope_dim = p.rope_dim;
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(rope_dim));
  float theta_base = static_cast<float>(pos);
  for (size_t i = 0; i < rope_dim / 2; ++i) {
    float theta = p.freq_factors != nullptr ? theta_base / p.freq_factors[i] : theta_base;
    if (p.freq_scale != 1.0f) theta *= p.freq_scale;
    cs[2 * i] = std::cos(theta);
    cs[2 * i + 1] = std::sin(theta);
    theta_base *= theta_scale;
  }
}

void RopeWith(float* x, size_t n_heads, const float* cs, const RopeParams& p) {
  const size_t rope_dim = p.rope_dim;
  const bool neox = p.neox;
  for (size_t h = 0; h < n_heads; ++h) {
    float* v = x + h * p.head_dim;
    for (size_t i = 0; i < rope_dim / 2; ++i) {
      const float c = cs[2 * i], s = cs[2 * i + 1];
      const size_t a = neox ? i : 2 * i;
      const size_t b = neox ? i + rope_dim / 2 : 2 * i + 1;
      const float x0 = v[a], x1 = v[b];
      // One product fused into each sum, the other rounded first: as the
      // reference engine's compiler contracts these lines. Rounding flips
      // here show up downstream once K and Q are rounded to F16.
      v[a] = std::fma(x0, c, -(x1 * s));
      v[b] = std::fma(x0, s, x1 * c);
    }
  }
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

}  // namespace pc
