// Llama-family hyperparameters read from GGUF metadata (<arch>.* keys).
#pragma once
#include <cstddef>
#include <string>

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
  bool rope_neox = false;  // rotate (i, i + d/2) instead of (2i, 2i + 1)
  float rms_eps = 1e-5f;

  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_kv_head * head_dim; }
};

// Reads and validates the hyperparameters; n_vocab comes from the token
// embedding. Rejects values that could not describe a real model (so a
// corrupt file cannot request huge buffers).
Result<ModelConfig> ReadModelConfig(const GgufFile& gguf);

}  // namespace pc
