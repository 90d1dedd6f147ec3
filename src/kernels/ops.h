// Elementwise and normalisation kernels over float spans. Pure functions:
// no allocation, no threads.
#pragma once
#include <cstddef>
#include <cstdint>

namespace pc {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]; out may alias x.
void RmsNorm(const float* x, const float* w, float* out, size_t n, float eps);

// Rotary position embedding. Normal style rotates pairs (2i, 2i+1); NeoX
// style rotates (i, i + rope_dim/2). The angle of pair i at position pos is
//   theta_i = freq_scale * (pos * base^(-2i/rope_dim) / freq_factors[i])
// (the power by repeated multiplication; freq_scale < 1 is linear position
// scaling, freq_factors the per-dimension divisors of Llama 3.1+ files).
struct RopeParams {
  size_t head_dim = 0, rope_dim = 0;
  float freq_base = 10000.0f;
  bool neox = false;
  float freq_scale = 1.0f;
  const float* freq_factors = nullptr;  // rope_dim / 2 divisors, or null
};
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

// y[i] += x[i].
void AddInPlace(float* y, const float* x, size_t n);

// Log-softmax of n logits into out (may alias); computed in double.
void LogSoftmax(const float* logits, float* out, size_t n);

}  // namespace pc
