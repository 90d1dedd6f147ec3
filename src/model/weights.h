// Views of a model's weights inside a mapped GGUF file, checked for shape.
// Norm vectors are copied to float; matrices stay in place in their stored type.
#pragma once
#include <array>
#include <cstdlib>
#include <memory>
#include <span>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "model/config.h"
#include "runtime/thread_pool.h"

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

// The seven projection matrices of a layer, for code that visits them all.
inline std::array<WeightMatrix*, 7> Matrices(LayerWeights& l) {
  return {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down};
}

struct ModelWeights {
  WeightMatrix token_embd;        // [n_vocab][n_embd]
  std::vector<LayerWeights> layers;
  std::vector<float> output_norm;  // [n_embd]
  WeightMatrix output;            // [n_vocab][n_embd]; token_embd when tied
  bool tied_output = false;
};

Result<ModelWeights> BindWeights(const GgufFile& gguf, const ModelConfig& config);

// Q8_0 matrices repacked into 8-row groups (BlockQ8_0x8) for the decode and
// prefill kernels: one sequential stream per 8 rows and a lane per row. Owns
// the copies; the matrices' `packed` views point into them.
struct PackedWeights {
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::vector<std::unique_ptr<BlockQ8_0x8, Free>> buffers;
  std::vector<size_t> buffer_bytes;                   // per buffer
  std::vector<std::span<const uint8_t>> originals;  // mapped bytes the copies replace
  size_t num_matrices = 0;
  size_t bytes = 0;    // memory of the copies
  double load_ms = 0;  // time spent repacking
};

// Repacks every Q8_0 matrix of w with at least 8 rows, split across pool,
// and drops the originals' pages from the resident set (the embedding lookup
// reads the copies; the ggml-compat numerics map the originals again on
// demand), so resident memory stays about one copy of the weights.
PackedWeights PackQ8_0Weights(ModelWeights& w, const GgufFile& gguf, ThreadPool& pool);
// Points every matrix back at the file's layout only (before the copies are
// freed).
void ForgetPacked(ModelWeights& w);

}  // namespace pc
