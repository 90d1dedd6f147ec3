// Elementwise and normalisation kernels over float spans. Pure functions:
// no allocation, no threads.
#pragma once
#include <cstddef>
#include <cstdint>

namespace pc {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]; out may alias x.
void RmsNorm(const float* x, const float* w, float* out, size_t n, float eps);

// Rotary position embedding on x = [n_heads][head_dim] in place, rotating the
// first rope_dim dims of each head. Normal style rotates pairs (2i, 2i+1);
// NeoX style rotates (i, i + rope_dim/2). theta_i = pos * base^(-2i/rope_dim).
void Rope(float* x, size_t n_heads, size_t head_dim, size_t rope_dim, int32_t pos,
          float freq_base, bool neox);

// out[i] = silu(gate[i]) * up[i]; out may alias gate.
void SiluMul(const float* gate, const float* up, float* out, size_t n);

// y[i] += x[i].
void AddInPlace(float* y, const float* x, size_t n);

// Log-softmax of n logits into out (may alias); computed in double.
void LogSoftmax(const float* logits, float* out, size_t n);

}  // namespace pc
