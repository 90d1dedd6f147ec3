// Hyperparameters of the llama-family architectures read from GGUF metadata
// (<arch>.* keys), and the switches that vary the one forward recipe:
//   llama, mistral  the base recipe (optional q/k/v/o biases, rope_freqs)
//   qwen2           + q/k/v biases, NeoX rotation
//   qwen3           + per-head RMSNorm of q and k, NeoX rotation
//   phi3            fused q/k/v and gate/up matrices, NeoX rotation
//   gemma2, gemma3  sliding-window layers, GeGLU, post-attention and post-FFN
//                   norms, embeddings scaled by sqrt(n_embd), tied output;
//                   gemma2 soft-caps attention and final logits, gemma3 has
//                   q/k norms and its own rotation base on windowed layers
//   qwen3moe, llama with experts (Mixtral)  a routed mixture of experts FFN
//   gpt-oss         experts with biases and the clamped SwiGLU, attention
//                   sinks, windows on every other layer, its FFN norm named
//                   post_attention_norm
// and, for every architecture that carries them, YaRN rope scaling, q/k/v/o
// biases and attention sinks (attn_sinks).
// Metadata that would change the arithmetic and that the recipe does not
// implement is refused by name, never ignored.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/gguf.h"
#include "kvcache/kv_sequence.h"

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

  // YaRN (rope.scaling.type yarn): rotation angles blend interpolated and
  // extrapolated frequencies over the dimensions between the two correction
  // dims, and cos/sin are scaled by the attention factor (ggml's rope_yarn).
  bool rope_yarn = false;
  int rope_orig_ctx = 0;           // rope.scaling.original_context_length
  float yarn_beta_fast = 32.0f, yarn_beta_slow = 1.0f;
  float yarn_ext_factor = 1.0f, yarn_attn_factor = 1.0f;

  // Sliding-window attention: a layer with swa_layers[l] set sees, at
  // position p, only positions (p - sliding_window, p]. 0: no window.
  int sliding_window = 0;
  std::vector<uint8_t> swa_layers;  // [n_layer]
  float swa_rope_base = 0;          // rotation base and linear scale of windowed layers
  float swa_rope_freq_scale = 1.0f; // (the global layers' unless the family says otherwise)
  float attn_scale = 0;             // query scale; 0: 1 / sqrt(head_dim)
  float attn_softcap = 0;           // scores s -> cap * tanh(s / cap); 0: none
  float final_softcap = 0;          // logits likewise
  bool embed_scale = false;         // gemma: embeddings times sqrt(n_embd)
  bool post_norms = false;          // gemma: RMSNorm of attention and FFN outputs before the residual add
  // The gate's activation: SwiGLU, GeGLU, or gpt-oss's clamped SwiGLU
  // (gate g = min(g, 7), up u = clamp(u, -7, 7), g * sigmoid(1.702 g) * (u + 1)).
  enum class Act { kSilu, kGeluTanh, kSwigluOai };
  Act ffn_act = Act::kSilu;
  // The FFN's input norm: blk.N.<this>.weight (gpt-oss: post_attention_norm).
  std::string ffn_norm_tensor = "ffn_norm";

  // Mixture of experts: n_expert FFNs of n_ff_expert, n_expert_used per
  // token chosen by a router (softmax, top-k, weights renormalised). 0: dense.
  int n_expert = 0, n_expert_used = 0, n_ff_expert = 0;

  int q_dim() const { return n_head * head_dim; }
  bool is_swa(int layer) const { return sliding_window > 0 && swa_layers[static_cast<size_t>(layer)] != 0; }
  int kv_dim() const { return n_kv_head * head_dim; }
  KvShape kv_shape() const {
    return {static_cast<size_t>(n_layer), static_cast<size_t>(kv_dim()), static_cast<size_t>(n_ctx),
            sliding_window > 0 ? swa_layers : std::vector<uint8_t>{}, static_cast<size_t>(std::max(0, sliding_window))};
  }
};

// The architectures this recipe runs.
const std::vector<std::string>& SupportedArchitectures();

// Reads and validates the hyperparameters; n_vocab comes from the token
// embedding. Rejects values that could not describe a real model (so a
// corrupt file cannot request huge buffers), unknown architectures and
// <arch>.* keys whose meaning the recipe does not implement.
Result<ModelConfig> ReadModelConfig(const GgufFile& gguf);

}  // namespace pc
