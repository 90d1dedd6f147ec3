#include "model/weights.h"

#include <fmt/format.h>

#include <chrono>

#include "kernels/quant.h"

namespace pc {
namespace {

Result<const GgufTensorInfo*> Find(const GgufFile& g, const std::string& name,
                                   std::vector<uint64_t> want) {
  const GgufTensorInfo* t = g.FindTensor(name);
  if (t == nullptr) return Errorf("tensor '{}' is missing", name);
  if (t->dims != want) {
    return Errorf("tensor '{}' has shape [{}], expected [{}]", name, fmt::join(t->dims, ", "),
                  fmt::join(want, ", "));
  }
  return t;
}

Result<WeightMatrix> Matrix(const GgufFile& g, const std::string& name, int cols, int rows) {
  PC_ASSIGN_OR_RETURN(const GgufTensorInfo* t,
                      Find(g, name, {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)}));
  return WeightMatrix{t->type, t->data, static_cast<size_t>(rows), static_cast<size_t>(cols)};
}

Result<std::vector<float>> Vector(const GgufFile& g, const std::string& name, int n) {
  PC_ASSIGN_OR_RETURN(const GgufTensorInfo* t, Find(g, name, {static_cast<uint64_t>(n)}));
  std::vector<float> out(static_cast<size_t>(n));
  DequantizeRow(t->type, t->data, out.data(), out.size());
  return out;
}

}  // namespace

Result<ModelWeights> BindWeights(const GgufFile& g, const ModelConfig& c) {
  ModelWeights w;
  PC_ASSIGN_OR_RETURN(w.token_embd, Matrix(g, "token_embd.weight", c.n_embd, c.n_vocab));
  PC_ASSIGN_OR_RETURN(w.output_norm, Vector(g, "output_norm.weight", c.n_embd));
  if (g.FindTensor("output.weight") != nullptr) {
    PC_ASSIGN_OR_RETURN(w.output, Matrix(g, "output.weight", c.n_embd, c.n_vocab));
  } else {
    w.output = w.token_embd;
    w.tied_output = true;
  }
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    LayerWeights lw;
    PC_ASSIGN_OR_RETURN(lw.attn_norm, Vector(g, p + "attn_norm.weight", c.n_embd));
    PC_ASSIGN_OR_RETURN(lw.wq, Matrix(g, p + "attn_q.weight", c.n_embd, c.q_dim()));
    PC_ASSIGN_OR_RETURN(lw.wk, Matrix(g, p + "attn_k.weight", c.n_embd, c.kv_dim()));
    PC_ASSIGN_OR_RETURN(lw.wv, Matrix(g, p + "attn_v.weight", c.n_embd, c.kv_dim()));
    PC_ASSIGN_OR_RETURN(lw.wo, Matrix(g, p + "attn_output.weight", c.q_dim(), c.n_embd));
    PC_ASSIGN_OR_RETURN(lw.ffn_norm, Vector(g, p + "ffn_norm.weight", c.n_embd));
    PC_ASSIGN_OR_RETURN(lw.w_gate, Matrix(g, p + "ffn_gate.weight", c.n_embd, c.n_ff));
    PC_ASSIGN_OR_RETURN(lw.w_up, Matrix(g, p + "ffn_up.weight", c.n_embd, c.n_ff));
    PC_ASSIGN_OR_RETURN(lw.w_down, Matrix(g, p + "ffn_down.weight", c.n_ff, c.n_embd));
    w.layers.push_back(std::move(lw));
  }
  return w;
}

PackedWeights PackQ8_0Weights(ModelWeights& w, const GgufFile& gguf, ThreadPool& pool) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<WeightMatrix*> todo;
  auto add = [&](WeightMatrix& m) {
    if (m.type == TensorType::kQ8_0 && m.rows >= 8 && m.packed == nullptr) todo.push_back(&m);
  };
  for (LayerWeights& l : w.layers) {
    for (WeightMatrix* m : Matrices(l)) add(*m);
  }
  add(w.tied_output ? w.token_embd : w.output);  // the embedding lookup itself reads rows of data
  PackedWeights out;
  for (WeightMatrix* m : todo) {
    const size_t nb = m->cols / kQuantBlock, groups = m->rows / 8;
    const size_t bytes = (groups * nb * sizeof(BlockQ8_0x8) + 63) / 64 * 64;
    auto* dst = static_cast<BlockQ8_0x8*>(std::aligned_alloc(64, bytes));
    if (dst == nullptr) continue;  // out of memory: this matrix keeps the file's layout
    const size_t rb = m->row_bytes();
    pool.ParallelFor(groups, 4, [&](size_t g0, size_t g1, int) {
      for (size_t g = g0; g < g1; ++g) PackQ8_0x8(m->data + g * 8 * rb, rb, nb, dst + g * nb);
      gguf.ReleasePages(m->data + g0 * 8 * rb, (g1 - g0) * 8 * rb);
    });
    m->packed = dst;
    out.buffers.emplace_back(dst);
    out.buffer_bytes.push_back(bytes);
    out.originals.emplace_back(m->data, m->rows / 8 * 8 * rb);
    out.bytes += bytes;
    ++out.num_matrices;
  }
  if (w.tied_output) w.output.packed = w.token_embd.packed;
  out.load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

void ForgetPacked(ModelWeights& w) {
  w.token_embd.packed = nullptr;
  w.output.packed = nullptr;
  for (LayerWeights& l : w.layers) {
    for (WeightMatrix* m : Matrices(l)) m->packed = nullptr;
  }
}

}  // namespace pc
