// Hyperparameters of the llama-family architectures read from GGUF metadata
// (<arch>.* keys), and the switches that vary the one forward recipe:
//   llama, mistral  the base recipe (optional q/k/v/o biases, rope_freqs)
//   qwen2           + q/k/v biases, NeoX rotation
//   qwen3           + per-head RMSNorm of q and k, NeoX rotation
//   phi3            fused q/k/v and gate/up matrices, NeoX rotation
// Metadata that would change the arithmetic and that the recipe does not
// implement is refused by name, never ignored.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/gguf.h"

namespace pc {

struct ModelConfig {
  std::string arch = "llama";
  int n_vocab = 0;
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_kv_head = 0;
  int head_dim = 0;  // <arch>.attention.key_length, else n_embd / n_head
  int n_ff = 0;
  int n_ctx = 0;      // trained context length
  int rope_dim = 0;   // rotated dims per head (<= head_dim)
  float rope_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // linear rope scaling: positions times this (1 / factor)
  bool rope_neox = false;  // rotate (i, i + d/2) instead of (2i, 2i + 1)
  float rms_eps = 1e-5f;
  bool fused_qkv = false;      // phi3: one attn_qkv matrix (q rows, then k, then v)
  bool fused_gate_up = false;  // phi3: ffn_up holds the gate's rows, then the up projection's

  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_kv_head * head_dim; }
};

// The architectures this recipe runs.
const std::vector<std::string>& SupportedArchitectures();

// Reads and validates the hyperparameters; n_vocab comes from the token
// embedding. Rejects values that could not describe a real model (so a
// corrupt file cannot request huge buffers), unknown architectures and
// <arch>.* keys whose meaning the recipe does not implement.
Result<ModelConfig> ReadModelConfig(const GgufFile& gguf);

}  // namespace pc
