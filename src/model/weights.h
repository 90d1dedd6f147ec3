// Views of a model's weights inside a mapped GGUF file, checked for shape.
// Norm vectors and biases are copied to float; matrices stay in place in
// their stored type (fused tensors are split into row ranges). Binding
// accounts for every tensor of the file: one the recipe does not use is an
// error naming it, so no file runs with a part of it silently ignored.
#pragma once
#include <array>
#include <span>
#include <vector>

#include "base/page_buffer.h"
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
  // Optional (empty when the file has none): biases added after the
  // projections, and per-head RMSNorm weights of q and k (before rotation).
  std::vector<float> bq, bk, bv, bo;  // [q_dim], [kv_dim] x2, [n_embd]
  std::vector<float> q_norm, k_norm;  // [head_dim]
  std::vector<float> sinks;           // [n_head] attention sink scores (gpt-oss), or empty
  std::vector<float> ffn_norm;   // [n_embd]
  WeightMatrix w_gate;           // [n_ff][n_embd]   (dense FFN only)
  WeightMatrix w_up;             // [n_ff][n_embd]
  WeightMatrix w_down;           // [n_embd][n_ff]
  // Gemma: RMSNorm weights of the attention and FFN outputs (else empty).
  std::vector<float> post_attn_norm, post_ffn_norm;  // [n_embd]
  // Mixture of experts (else empty): the router and each expert's matrices,
  // views into the file's 3-D tensors (expert e's rows follow expert e-1's).
  WeightMatrix w_router;                    // [n_expert][n_embd]
  std::vector<WeightMatrix> gate_exps;      // [n_expert] x [n_ff_expert][n_embd]
  std::vector<WeightMatrix> up_exps;        // likewise
  std::vector<WeightMatrix> down_exps;      // [n_expert] x [n_embd][n_ff_expert]
  // Optional biases of the router and the experts (gpt-oss), else empty.
  std::vector<float> b_router;                  // [n_expert]
  std::vector<float> b_gate_exps, b_up_exps;    // [n_expert][n_ff_expert]
  std::vector<float> b_down_exps;               // [n_expert][n_embd]
};

// Every projection matrix of a layer (the experts' too), for code that
// visits them all; matrices a layer lacks (no data) are skipped.
template <class Fn>
void ForEachMatrix(LayerWeights& l, Fn&& fn) {
  for (WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.w_router}) {
    if (m->data != nullptr) fn(*m);
  }
  for (auto* v : {&l.gate_exps, &l.up_exps, &l.down_exps}) {
    for (WeightMatrix& m : *v) fn(m);
  }
}

struct ModelWeights {
  WeightMatrix token_embd;        // [n_vocab][n_embd]
  std::vector<LayerWeights> layers;
  std::vector<float> output_norm;  // [n_embd]
  WeightMatrix output;            // [n_vocab][n_embd]; token_embd when tied
  bool tied_output = false;
  std::vector<float> rope_freqs;  // [rope_dim / 2] frequency divisors, or empty
};

Result<ModelWeights> BindWeights(const GgufFile& gguf, const ModelConfig& config);

// Quantized matrices repacked into 16-row groups (qpack.h) for the x16
// kernels, each PackWeights call's copies in one buffer of huge pages
// (base/page_buffer.h). Owns the copies; the matrices' `packed` views point
// into them.
// Why one buffer: copies allocated one by one (most under 2 MiB) sat on
// 4 KiB pages, about 32,000 of them for bench-135m, which a forward pass
// streams in full; on a virtualised CPU whose page tables the host shadows,
// those entries went cold while the server idled: with the copies on 2 MiB
// pages, a cache hit of 8 tokens at depth 448 sent after 0.3-1 s of idle
// answered 6-42% sooner (docs/BENCHMARKS.md, seventeenth session).
struct PackedWeights {
  struct Entry {
    size_t arena = 0, offset = 0, bytes = 0;  // the copy: arenas[arena], bytes from offset
    std::span<const uint8_t> original;        // the mapped bytes it replaces
    TensorType type = TensorType::kF32;
  };
  std::vector<PageBuffer> arenas;
  std::vector<Entry> entries;
  size_t num_matrices = 0;
  size_t bytes = 0;    // memory of the copies
  double load_ms = 0;  // time spent repacking
  const uint8_t* data(const Entry& e) const { return arenas[e.arena].data() + e.offset; }
};

// Repacks every quantized matrix of w with at least 16 rows whose type
// `want` accepts, split across pool, and drops the originals' pages from the
// resident set (the embedding lookup reads the copies), so resident memory
// stays about one copy of the weights. Matrices already packed are skipped.
void PackWeights(ModelWeights& w, const GgufFile& gguf, ThreadPool& pool, bool (*want)(TensorType),
                 PackedWeights* out);
// Points the matrices of the given types back at the file's layout and gives
// their copies' pages back (a buffer left with no copy is freed).
void UnpackWeights(ModelWeights& w, bool (*which)(TensorType), PackedWeights* packed);

}  // namespace pc
