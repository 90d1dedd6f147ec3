// Elementwise and normalisation kernels over float spans. Pure functions:
// no allocation, no threads.
#pragma once
#include <cstddef>
#include <cstdint>

namespace pc {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]; out may alias x.
void RmsNorm(const float* x, const float* w, float* out, size_t n, float eps);
// RmsNorm of `rows` contiguous rows of n floats, the same bits row by row.
// Why: each row's sum of squares is one sequential chain of double adds (the
// reference engine's order), latency-bound at ~4 cycles per element; four
// rows' chains run side by side here (4% of a 25-token prefill was RmsNorm
// on a Zen 5 guest). out may alias x.
void RmsNormRows(const float* x, const float* w, float* out, size_t rows, size_t n, float eps);

// Rotary position embedding. Normal style rotates pairs (2i, 2i+1); NeoX
// style rotates (i, i + rope_dim/2). The angle of pair i at position pos is
//   theta_i = freq_scale * (pos * base^(-2i/rope_dim) / freq_factors[i])
// (the power by repeated multiplication; freq_scale < 1 is linear position
// scaling, freq_factors the per-dimension divisors of Llama 3.1+ files).
// YaRN (ext_factor > 0): pair i's angle blends the interpolated angle above
// with the unscaled one, by a ramp over the pairs between corr_low and
// corr_high, and cos/sin are multiplied by
//   attn_factor * (1 + 0.1 ln(1 / freq_scale))
// (as the reference engine's rope_yarn does; YarnCorrDims gives the two dims).
struct RopeParams {
  size_t head_dim = 0, rope_dim = 0;
  float freq_base = 10000.0f;
  bool neox = false;
  float freq_scale = 1.0f;
  const float* freq_factors = nullptr;  // rope_dim / 2 divisors, or null
  float ext_factor = 0.0f;              // YaRN: 0 off, 1 full ramp
  float attn_factor = 1.0f;
  float corr_low = 0.0f, corr_high = 0.0f;
};
// YaRN's correction dims for rope_dim rotated dims trained at orig_ctx
// positions: where the rotation count over orig_ctx crosses beta_fast and
// beta_slow, floored / ceiled and clamped to [0, rope_dim - 1].
void YarnCorrDims(size_t rope_dim, int orig_ctx, float freq_base, float beta_fast, float beta_slow, float* low,
                  float* high);
// Rotates the first rope_dim dims of each head of x = [n_heads][head_dim] in place.
void Rope(float* x, size_t n_heads, int32_t pos, const RopeParams& p);
constexpr size_t kMaxRopeDim = 1024;
// The same in two steps, so a token's angles are computed once for every
// head and layer: cs[2i], cs[2i+1] = cos, sin of pair i's angle at pos
// (rope_dim floats), then the rotation with them (same bits as Rope).
void RopeAngles(int32_t pos, const RopeParams& p, float* cs);
void RopeWith(float* x, size_t n_heads, const float* cs, const RopeParams& p);

// out[i] = silu(gate[i]) * up[i]; out may alias gate.
void SiluMul(const float* gate, const float* up, float* out, size_t n);
// out[i] = gelu(gate[i]) * up[i] with GELU's tanh form
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)));
// out may alias gate. GeluMulF16: the reference engine's GELU, looked up by
// the F16-rounded input and rounded to F16 (|x| < 10; 0 and x outside).
void GeluMul(const float* gate, const float* up, float* out, size_t n);
void GeluMulF16(const float* gate, const float* up, float* out, size_t n);
// gpt-oss's clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit, limit),
// out = g / (1 + exp(-alpha g)) * (u + 1); out may alias gate.
constexpr float kSwigluOaiAlpha = 1.702f, kSwigluOaiLimit = 7.0f;
void SwigluOaiMul(const float* gate, const float* up, float* out, size_t n, float alpha = kSwigluOaiAlpha,
                  float limit = kSwigluOaiLimit);

// x[i] = cap * tanh(x[i] / cap) (soft-capping of logits; the division as a
// multiplication by 1 / cap, as the reference engine scales).
void SoftCap(float* x, size_t n, float cap);

// y[i] += x[i].
void AddInPlace(float* y, const float* x, size_t n);

// Log-softmax of n logits into out (may alias); computed in double.
void LogSoftmax(const float* logits, float* out, size_t n);

}  // namespace pc
