#include "model/weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <new>
#include <set>

#include "kernels/qpack.h"
#include "kernels/quant.h"

namespace pc {
namespace {

// Looks tensors up by name and shape, remembering which it handed out.
class Binder {
 public:
  explicit Binder(const GgufFile& g) : g_(g) {}

  bool Has(const std::string& name) const { return g_.FindTensor(name) != nullptr; }

  Result<WeightMatrix> Matrix(const std::string& name, int cols, int rows) {
    PC_ASSIGN_OR_RETURN(const GgufTensorInfo* t, Find(name, {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)}));
    return WeightMatrix{t->type, t->data, static_cast<size_t>(rows), static_cast<size_t>(cols)};
  }

  // A 3-D tensor [count][rows][cols] as `count` matrices (experts).
  Result<std::vector<WeightMatrix>> Stack(const std::string& name, int cols, int rows, int count) {
    PC_ASSIGN_OR_RETURN(const GgufTensorInfo* t, Find(name, {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows),
                                                             static_cast<uint64_t>(count)}));
    const WeightMatrix all{t->type, t->data, static_cast<size_t>(rows) * count, static_cast<size_t>(cols)};
    std::vector<WeightMatrix> out;
    for (int e = 0; e < count; ++e) out.push_back(all.Rows(static_cast<size_t>(e) * rows, static_cast<size_t>(rows)));
    return out;
  }

  // Experts as the file stores them: one 3-D tensor `<p><base>_exps.weight`
  // or, in files converted before that layout existed (the first Mixtral
  // GGUFs, still on disk and on model hubs; the reference engine once merged
  // them at load and now refuses them), one 2-D tensor per expert,
  // `<p><base>.<e>.weight` for e = 0..count-1: our experts are separate
  // matrices either way. Where both are present the split tensors stay
  // unbound and CheckAllUsed refuses the file.
  Result<std::vector<WeightMatrix>> Experts(const std::string& p, const std::string& base, int cols, int rows, int count) {
    const std::string stacked = p + base + "_exps.weight";
    if (Has(stacked) || !Has(p + base + ".0.weight")) return Stack(stacked, cols, rows, count);
    std::vector<WeightMatrix> out;
    for (int e = 0; e < count; ++e) {
      PC_ASSIGN_OR_RETURN(WeightMatrix m, Matrix(fmt::format("{}{}.{}.weight", p, base, e), cols, rows));
      out.push_back(m);
    }
    return out;
  }

  Result<std::vector<float>> Vector(const std::string& name, int n) {
    PC_ASSIGN_OR_RETURN(const GgufTensorInfo* t, Find(name, {static_cast<uint64_t>(n)}));
    std::vector<float> out(static_cast<size_t>(n));
    DequantizeRow(t->type, t->data, out.data(), out.size());
    return out;
  }

  // An optional vector: empty when the file has none.
  Result<std::vector<float>> MaybeVector(const std::string& name, int n) {
    if (!Has(name)) return std::vector<float>{};
    return Vector(name, n);
  }

  // An optional 2-D tensor [rows][cols] as one float vector (per-expert biases).
  Result<std::vector<float>> MaybeRows(const std::string& name, int cols, int rows) {
    if (!Has(name)) return std::vector<float>{};
    PC_ASSIGN_OR_RETURN(const GgufTensorInfo* t, Find(name, {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)}));
    std::vector<float> out(static_cast<size_t>(cols) * static_cast<size_t>(rows));
    DequantizeRow(t->type, t->data, out.data(), out.size());
    return out;
  }

  // Every tensor of the file must have been bound.
  Status CheckAllUsed(const std::string& arch) const {
    for (const GgufTensorInfo& t : g_.tensors()) {
      if (used_.count(t.name) == 0) {
        return Errorf("tensor '{}' is not used by the {} recipe: promptcache does not know what it means, so it "
                      "refuses the file rather than compute without it",
                      t.name, arch);
      }
    }
    return OkStatus();
  }

 private:
  Result<const GgufTensorInfo*> Find(const std::string& name, const std::vector<uint64_t>& want) {
    const GgufTensorInfo* t = g_.FindTensor(name);
    if (t == nullptr) return Errorf("tensor '{}' is missing", name);
    if (t->dims != want) {
      return Errorf("tensor '{}' has shape [{}], expected [{}]", name, fmt::join(t->dims, ", "), fmt::join(want, ", "));
    }
    used_.insert(name);
    return t;
  }

  const GgufFile& g_;
  std::set<std::string> used_;
};

Status BindAttention(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights& lw) {
  if (b.Has(p + "attn_qkv.weight")) {  // phi3: q rows, then k, then v
    PC_ASSIGN_OR_RETURN(WeightMatrix qkv, b.Matrix(p + "attn_qkv.weight", c.n_embd, c.q_dim() + 2 * c.kv_dim()));
    lw.wq = qkv.Rows(0, static_cast<size_t>(c.q_dim()));
    lw.wk = qkv.Rows(static_cast<size_t>(c.q_dim()), static_cast<size_t>(c.kv_dim()));
    lw.wv = qkv.Rows(static_cast<size_t>(c.q_dim() + c.kv_dim()), static_cast<size_t>(c.kv_dim()));
  } else {
    PC_ASSIGN_OR_RETURN(lw.wq, b.Matrix(p + "attn_q.weight", c.n_embd, c.q_dim()));
    PC_ASSIGN_OR_RETURN(lw.wk, b.Matrix(p + "attn_k.weight", c.n_embd, c.kv_dim()));
    PC_ASSIGN_OR_RETURN(lw.wv, b.Matrix(p + "attn_v.weight", c.n_embd, c.kv_dim()));
  }
  PC_ASSIGN_OR_RETURN(lw.wo, b.Matrix(p + "attn_output.weight", c.q_dim(), c.n_embd));
  PC_ASSIGN_OR_RETURN(lw.bq, b.MaybeVector(p + "attn_q.bias", c.q_dim()));
  PC_ASSIGN_OR_RETURN(lw.bk, b.MaybeVector(p + "attn_k.bias", c.kv_dim()));
  PC_ASSIGN_OR_RETURN(lw.bv, b.MaybeVector(p + "attn_v.bias", c.kv_dim()));
  PC_ASSIGN_OR_RETURN(lw.bo, b.MaybeVector(p + "attn_output.bias", c.n_embd));
  PC_ASSIGN_OR_RETURN(lw.sinks, b.MaybeVector(p + "attn_sinks.weight", c.n_head));
  PC_ASSIGN_OR_RETURN(lw.q_norm, b.MaybeVector(p + "attn_q_norm.weight", c.head_dim));
  PC_ASSIGN_OR_RETURN(lw.k_norm, b.MaybeVector(p + "attn_k_norm.weight", c.head_dim));
  if (lw.q_norm.empty() != lw.k_norm.empty()) return Errorf("{}: attn_q_norm and attn_k_norm come in pairs", p);
  if (c.arch == "qwen3" && lw.q_norm.empty()) return Errorf("tensor '{}attn_q_norm.weight' is missing", p);
  return OkStatus();
}

Status BindFeedForward(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights& lw) {
  if (c.n_expert > 0) {
    PC_ASSIGN_OR_RETURN(lw.w_router, b.Matrix(p + "ffn_gate_inp.weight", c.n_embd, c.n_expert));
    if (b.Has(p + "ffn_gate_up_exps.weight")) {
      // Gate and up stacked in one tensor (the converter's --fuse-gate-up-exps):
      // each expert's gate rows, then its up rows.
      const int ff = c.n_ff_expert;
      PC_ASSIGN_OR_RETURN(auto both, b.Stack(p + "ffn_gate_up_exps.weight", c.n_embd, 2 * ff, c.n_expert));
      for (const WeightMatrix& m : both) {
        lw.gate_exps.push_back(m.Rows(0, static_cast<size_t>(ff)));
        lw.up_exps.push_back(m.Rows(static_cast<size_t>(ff), static_cast<size_t>(ff)));
      }
    } else {
      PC_ASSIGN_OR_RETURN(lw.gate_exps, b.Experts(p, "ffn_gate", c.n_embd, c.n_ff_expert, c.n_expert));
      PC_ASSIGN_OR_RETURN(lw.up_exps, b.Experts(p, "ffn_up", c.n_embd, c.n_ff_expert, c.n_expert));
    }
    PC_ASSIGN_OR_RETURN(lw.down_exps, b.Experts(p, "ffn_down", c.n_ff_expert, c.n_embd, c.n_expert));
    PC_ASSIGN_OR_RETURN(lw.b_router, b.MaybeVector(p + "ffn_gate_inp.bias", c.n_expert));
    PC_ASSIGN_OR_RETURN(lw.b_gate_exps, b.MaybeRows(p + "ffn_gate_exps.bias", c.n_ff_expert, c.n_expert));
    PC_ASSIGN_OR_RETURN(lw.b_up_exps, b.MaybeRows(p + "ffn_up_exps.bias", c.n_ff_expert, c.n_expert));
    PC_ASSIGN_OR_RETURN(lw.b_down_exps, b.MaybeRows(p + "ffn_down_exps.bias", c.n_embd, c.n_expert));
    return OkStatus();
  }
  if (c.fused_gate_up) {  // phi3: the gate's rows, then the up projection's
    PC_ASSIGN_OR_RETURN(WeightMatrix up, b.Matrix(p + "ffn_up.weight", c.n_embd, 2 * c.n_ff));
    lw.w_gate = up.Rows(0, static_cast<size_t>(c.n_ff));
    lw.w_up = up.Rows(static_cast<size_t>(c.n_ff), static_cast<size_t>(c.n_ff));
  } else {
    PC_ASSIGN_OR_RETURN(lw.w_gate, b.Matrix(p + "ffn_gate.weight", c.n_embd, c.n_ff));
    PC_ASSIGN_OR_RETURN(lw.w_up, b.Matrix(p + "ffn_up.weight", c.n_embd, c.n_ff));
  }
  PC_ASSIGN_OR_RETURN(lw.w_down, b.Matrix(p + "ffn_down.weight", c.n_ff, c.n_embd));
  return OkStatus();
}

}  // namespace

Result<ModelWeights> BindWeights(const GgufFile& g, const ModelConfig& c) {
  Binder b(g);
  ModelWeights w;
  PC_ASSIGN_OR_RETURN(w.token_embd, b.Matrix("token_embd.weight", c.n_embd, c.n_vocab));
  PC_ASSIGN_OR_RETURN(w.output_norm, b.Vector("output_norm.weight", c.n_embd));
  if (b.Has("output.weight")) {
    PC_ASSIGN_OR_RETURN(w.output, b.Matrix("output.weight", c.n_embd, c.n_vocab));
  } else {
    w.output = w.token_embd;
    w.tied_output = true;
  }
  PC_ASSIGN_OR_RETURN(w.rope_freqs, b.MaybeVector("rope_freqs.weight", c.rope_dim / 2));
  for (float f : w.rope_freqs) {
    if (!(f > 0.0f && f < 1e6f)) return Errorf("tensor 'rope_freqs.weight' holds {}, not a frequency divisor", f);
  }
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    LayerWeights lw;
    PC_ASSIGN_OR_RETURN(lw.attn_norm, b.Vector(p + "attn_norm.weight", c.n_embd));
    PC_RETURN_IF_ERROR(BindAttention(b, c, p, lw));
    PC_ASSIGN_OR_RETURN(lw.ffn_norm, b.Vector(p + c.ffn_norm_tensor + ".weight", c.n_embd));
    PC_RETURN_IF_ERROR(BindFeedForward(b, c, p, lw));
    if (c.post_norms) {
      PC_ASSIGN_OR_RETURN(lw.post_attn_norm, b.Vector(p + "post_attention_norm.weight", c.n_embd));
      PC_ASSIGN_OR_RETURN(lw.post_ffn_norm, b.Vector(p + "post_ffw_norm.weight", c.n_embd));
    }
    w.layers.push_back(std::move(lw));
  }
  PC_RETURN_IF_ERROR(b.CheckAllUsed(c.arch));
  return w;
}

void PackWeights(ModelWeights& w, const GgufFile& gguf, ThreadPool& pool, bool (*want)(TensorType),
                 PackedWeights* out) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<WeightMatrix*> todo;
  auto add = [&](WeightMatrix& m) {
    if (X16LayoutOf(m.type).n > 0 && want(m.type) && m.rows >= kX16Rows && m.packed == nullptr) todo.push_back(&m);
  };
  for (LayerWeights& l : w.layers) {
    ForEachMatrix(l, add);
  }
  add(w.tied_output ? w.token_embd : w.output);  // the embedding lookup itself reads rows of data
  if (!w.tied_output) add(w.token_embd);
  std::vector<size_t> offsets;
  size_t total = 0;
  for (const WeightMatrix* m : todo) {
    offsets.push_back(total);
    total += (m->rows / kX16Rows * m->group_bytes() + 63) / 64 * 64;
  }
  PageBuffer arena;
  try {
    arena = PageBuffer(total);
  } catch (const std::bad_alloc&) {
    todo.clear();  // out of memory: the matrices keep the file's layout
  }
  const size_t index = out->arenas.size();
  if (!todo.empty()) out->arenas.push_back(std::move(arena));
  for (size_t i = 0; i < todo.size(); ++i) {
    WeightMatrix* m = todo[i];
    const size_t groups = m->rows / kX16Rows, gb = m->group_bytes();
    const size_t bytes = (groups * gb + 63) / 64 * 64;
    uint8_t* dst = out->arenas[index].data() + offsets[i];
    const size_t rb = m->row_bytes(), nb = m->cols / BlockElems(m->type);
    pool.ParallelFor(groups, 4, [&](size_t g0, size_t g1, int) {
      for (size_t g = g0; g < g1; ++g) RepackX16(m->type, m->data + g * kX16Rows * rb, rb, nb, dst + g * gb);
      gguf.ReleasePages(m->data + g0 * kX16Rows * rb, (g1 - g0) * kX16Rows * rb);
    });
    m->packed = dst;
    PackedWeights::Entry e;
    e.arena = index;
    e.offset = offsets[i];
    e.bytes = bytes;
    e.original = {m->data, groups * kX16Rows * rb};
    e.type = m->type;
    out->entries.push_back(e);
    out->bytes += bytes;
    ++out->num_matrices;
  }
  if (w.tied_output) w.output.packed = w.token_embd.packed;
  out->load_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

void UnpackWeights(ModelWeights& w, bool (*which)(TensorType), PackedWeights* packed) {
  auto forget = [&](WeightMatrix& m) {
    if (m.packed != nullptr && which(m.type)) m.packed = nullptr;
  };
  forget(w.token_embd);
  forget(w.output);
  for (LayerWeights& l : w.layers) {
    ForEachMatrix(l, forget);
  }
  std::vector<PackedWeights::Entry> keep;
  for (const PackedWeights::Entry& e : packed->entries) {
    if (which(e.type)) {
      packed->arenas[e.arena].Discard(e.offset, e.bytes);
      packed->bytes -= e.bytes;
      --packed->num_matrices;
    } else {
      keep.push_back(e);
    }
  }
  packed->entries = std::move(keep);
  for (size_t a = 0; a < packed->arenas.size(); ++a) {
    const bool used = std::any_of(packed->entries.begin(), packed->entries.end(),
                                  [&](const PackedWeights::Entry& e) { return e.arena == a; });
    if (!used) packed->arenas[a] = PageBuffer();
  }
}

}  // namespace pc
