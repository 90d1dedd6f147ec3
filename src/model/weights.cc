#include "model/weights.h"

#include <fmt/format.h>

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

}  // namespace pc
