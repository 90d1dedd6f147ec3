// Views of a model's weights inside a mapped GGUF file, checked for shape.
// Norm vectors are copied to float; matrices stay in place in their stored type.
#pragma once
#include <vector>

#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "model/config.h"

namespace pc {

struct LayerWeights {
  std::vector<float> attn_norm;  // [n_embd]
  WeightMatrix wq;               // [q_dim][n_embd]
  WeightMatrix wk;               // [kv_dim][n_embd]
  WeightMatrix wv;               // [kv_dim][n_embd]
  WeightMatrix wo;               // [n_embd][q_dim]
  std::vector<float> ffn_norm;   // [n_embd]
  WeightMatrix w_gate;           // [n_ff][n_embd]
  WeightMatrix w_up;             // [n_ff][n_embd]
  WeightMatrix w_down;           // [n_embd][n_ff]
};

struct ModelWeights {
  WeightMatrix token_embd;        // [n_vocab][n_embd]
  std::vector<LayerWeights> layers;
  std::vector<float> output_norm;  // [n_embd]
  WeightMatrix output;            // [n_vocab][n_embd]; token_embd when tied
  bool tied_output = false;
};

Result<ModelWeights> BindWeights(const GgufFile& gguf, const ModelConfig& config);

}  // namespace pc
