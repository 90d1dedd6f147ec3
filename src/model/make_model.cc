#include "model/make_model.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>
#include <set>

#include "gguf/gguf.h"
#include "kernels/quant.h"
#include "model/induction_weights.h"
#include "model/sampler.h"

namespace pc {

Result<ModelShape> BuiltinShape(const std::string& name) {
  // n_embd, layers, heads, kv heads, ffn, tied
  if (name == "bench-135m") return ModelShape{name, 576, 30, 9, 3, 1536, true};
  if (name == "bench-1b") return ModelShape{name, 2048, 22, 32, 4, 5632, false};
  if (name == "tiny") return ModelShape{name, 128, 2, 4, 2, 256, true, 2048};
  if (name == "bench-moe") {
    ModelShape m{name, 1024, 6, 16, 2, 0, false, 8192, 1e6f};
    m.arch = "qwen3moe";
    m.head_dim = 128;
    m.n_expert = 128, m.n_expert_used = 8, m.n_ff_expert = 384;
    return m;
  }
  if (name == "bench-gemma3") {
    ModelShape m{name, 576, 26, 4, 1, 3456, true, 8192, 1e6f};
    m.arch = "gemma3";
    m.head_dim = 128;
    m.sliding_window = 512;
    return m;
  }
  return Errorf("unknown model shape '{}' (built-in: {})", name, fmt::join(BuiltinShapeNames(), ", "));
}

std::vector<std::string> BuiltinShapeNames() { return {"bench-135m", "bench-1b", "tiny", "bench-moe", "bench-gemma3"}; }

namespace {

// general.file_type values (llama_ftype) of the types make-model writes.
const ModelFileType kFileTypes[] = {
    {"f32", TensorType::kF32, false, 0},      {"f16", TensorType::kF16, false, 1},
    {"bf16", TensorType::kBF16, false, 32},   {"q8_0", TensorType::kQ8_0, false, 7},
    {"q4_0", TensorType::kQ4_0, false, 2},    {"q4_1", TensorType::kQ4_1, false, 3},
    {"q5_0", TensorType::kQ5_0, false, 8},    {"q5_1", TensorType::kQ5_1, false, 9},
    {"iq4_nl", TensorType::kIQ4_NL, false, 25}, {"q2_k", TensorType::kQ2_K, false, 10},
    {"q3_k", TensorType::kQ3_K, false, 11},   {"q4_k", TensorType::kQ4_K, false, 14},
    {"q4_k_m", TensorType::kQ4_K, true, 15},  {"q5_k", TensorType::kQ5_K, false, 16},
    {"q5_k_m", TensorType::kQ5_K, true, 17},  {"q6_k", TensorType::kQ6_K, false, 18},
    {"iq4_xs", TensorType::kIQ4_XS, false, 30}, {"mxfp4", TensorType::kMXFP4, false, 38},
};

// The layers whose attn_v and ffn_down get more bits in an _M mix.
bool MoreBits(int layer, int n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

TensorType Fallback(TensorType t) {
  switch (t) {
    case TensorType::kQ4_K: return TensorType::kQ5_0;
    case TensorType::kQ5_K: return TensorType::kQ5_1;
    case TensorType::kQ6_K: return TensorType::kQ8_0;
    default: return TensorType::kIQ4_NL;  // Q2_K, Q3_K, IQ4_XS
  }
}

}  // namespace

Result<ModelFileType> ParseModelFileType(const std::string& name) {
  for (const ModelFileType& f : kFileTypes) {
    if (f.name == name) return f;
  }
  return Errorf("unknown model type '{}' (expected one of {})", name, fmt::join(ModelFileTypeNames(), ", "));
}

ModelFileType ModelFileTypeFor(TensorType type, bool k_mix) {
  for (const ModelFileType& f : kFileTypes) {
    if (f.type == type && f.k_mix == k_mix) return f;
  }
  return ModelFileType{TensorTypeName(type), type, k_mix, 0};
}

std::vector<std::string> ModelFileTypeNames() {
  std::vector<std::string> v;
  for (const ModelFileType& f : kFileTypes) v.push_back(f.name);
  return v;
}

TensorType MatrixTypeFor(const ModelFileType& ft, const std::string& tensor, int layer, int n_layer, size_t cols) {
  TensorType t = ft.type;
  if (ft.k_mix) {
    // ffn_down_exps too, as the reference tools match the name.
    const bool v_or_down = tensor.find("attn_v.") != std::string::npos || tensor.find("ffn_down") != std::string::npos;
    if (tensor == "output.weight" || (v_or_down && MoreBits(layer, n_layer))) t = TensorType::kQ6_K;
  }
  if (cols % BlockElems(t) != 0) t = Fallback(t);
  return t;
}

namespace {

// SentencePiece-style vocabulary: control tokens, 256 byte-fallback tokens,
// single characters, then whole words ("▁word") from a word list.
Status AddBuiltinVocab(GgufWriter& w, const MakeModelOptions& opt) {
  std::vector<GgufScalar> tokens, scores, types;
  std::set<std::string> seen;
  auto add = [&](const std::string& t, float score, int type) {
    // Exactly vocab_size tokens: the embedding has that many rows.
    if (static_cast<int>(tokens.size()) >= opt.vocab_size || !seen.insert(t).second) return;
    tokens.emplace_back(t);
    scores.emplace_back(score);
    types.emplace_back(static_cast<int32_t>(type));
  };
  add("<unk>", 0, 2);
  add("<s>", 0, 3);
  add("</s>", 0, 3);
  for (const std::string& t : opt.control_tokens) {
    if (t.empty() || seen.count(t)) return Errorf("control token '{}' is empty or repeated", t);
    add(t, 0, 3);
  }
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 0, 6);
  const std::string sp = "\xe2\x96\x81";
  add(sp, -1, 1);
  for (char ch = 33; ch < 127; ++ch) {
    add(std::string(1, ch), -2, 1);
    add(sp + std::string(1, ch), -3, 1);
  }
  std::ifstream words(opt.words_path);
  if (!words) return Errorf("cannot read word list '{}' (install Debian's wamerican)", opt.words_path);
  std::string word;
  while (static_cast<int>(tokens.size()) < opt.vocab_size && std::getline(words, word)) {
    if (word.empty() || word.find('\'') != std::string::npos) continue;
    // Every prefix too, so pairwise merges can reach the whole word.
    std::string piece = sp;
    for (size_t i = 0; i < word.size(); ++i) {
      piece += word[i];
      add(piece, -4.0f - static_cast<float>(tokens.size()) * 1e-4f, 1);
    }
  }
  for (int i = 0; static_cast<int>(tokens.size()) < opt.vocab_size; ++i) {
    add(fmt::format("<unused{}>", i), -1e4f, 5);
  }
  w.Set("tokenizer.ggml.model", GgufValue::Of(std::string("llama")));
  w.Set("tokenizer.ggml.tokens", GgufValue::ArrayOf(GgufType::kString, std::move(tokens)));
  w.Set("tokenizer.ggml.scores", GgufValue::ArrayOf(GgufType::kFloat32, std::move(scores)));
  w.Set("tokenizer.ggml.token_type", GgufValue::ArrayOf(GgufType::kInt32, std::move(types)));
  w.Set("tokenizer.ggml.bos_token_id", GgufValue::Of(uint32_t{1}));
  w.Set("tokenizer.ggml.eos_token_id", GgufValue::Of(uint32_t{2}));
  w.Set("tokenizer.ggml.unknown_token_id", GgufValue::Of(uint32_t{0}));
  w.Set("tokenizer.ggml.add_bos_token", GgufValue::Of(true));
  if (!opt.chat_template.empty()) w.Set("tokenizer.chat_template", GgufValue::Of(opt.chat_template));
  return OkStatus();
}

Result<int> CopyVocab(GgufWriter& w, const std::string& path) {
  PC_ASSIGN_OR_RETURN(GgufFile v, GgufFile::Open(path));
  for (const auto& [key, value] : v.metadata()) {
    if (key.rfind("tokenizer.", 0) == 0) w.Set(key, value);
  }
  PC_ASSIGN_OR_RETURN(std::vector<std::string> tokens, v.GetStringArray("tokenizer.ggml.tokens"));
  return static_cast<int>(tokens.size());
}

// Normal(0, std) weights quantized row by row to `type`.
std::vector<uint8_t> RandomMatrix(Sampler& rng, TensorType type, size_t rows, size_t cols, float std) {
  std::vector<uint8_t> out(rows * RowBytes(type, cols));
  std::vector<float> row(cols);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t i = 0; i < cols; i += 2) {
      // Box-Muller: two normals from two uniforms.
      const double u1 = std::max(rng.NextUniform(), 1e-300), u2 = rng.NextUniform();
      const double mag = std * std::sqrt(-2.0 * std::log(u1));
      row[i] = static_cast<float>(mag * std::cos(2 * M_PI * u2));
      if (i + 1 < cols) row[i + 1] = static_cast<float>(mag * std::sin(2 * M_PI * u2));
    }
    QuantizeRow(type, row.data(), out.data() + r * RowBytes(type, cols), cols);
  }
  return out;
}

}  // namespace

namespace {

// <arch>.* metadata of the shape.
void SetArchMetadata(GgufWriter& w, const ModelShape& s, bool copy) {
  const std::string a = s.arch + ".";
  auto u32 = [&](const std::string& key, int v) { w.Set(a + key, GgufValue::Of(static_cast<uint32_t>(v))); };
  u32("context_length", s.n_ctx);
  u32("embedding_length", s.n_embd);
  u32("block_count", s.n_layer);
  u32("feed_forward_length", s.n_expert > 0 ? s.n_ff_expert : s.n_ff);
  u32("attention.head_count", s.n_head);
  u32("attention.head_count_kv", s.n_kv_head);
  if (s.head_dim > 0) {
    u32("attention.key_length", s.head_dim);
    u32("attention.value_length", s.head_dim);
  }
  u32("rope.dimension_count", s.head_size());
  w.Set(a + "rope.freq_base", GgufValue::Of(copy ? InductionWeights::kRopeBase : s.rope_base));
  w.Set(a + "attention.layer_norm_rms_epsilon", GgufValue::Of(s.arch == "llama" ? 1e-5f : 1e-6f));
  if (s.n_expert > 0) {
    u32("expert_count", s.n_expert);
    u32("expert_used_count", s.n_expert_used);
    u32("expert_feed_forward_length", s.n_ff_expert);
  }
  if (s.sliding_window > 0) u32("attention.sliding_window", s.sliding_window);
}

}  // namespace

namespace {

// The shape's tensors into a GgufWriter: random weights (or the induction
// weights) quantized by the file type's rule, norms of ones.
class TensorWriter {
 public:
  TensorWriter(GgufWriter& w, const MakeModelOptions& opt, const ModelFileType& ft, const InductionWeights* copy)
      : w_(w), opt_(opt), s_(opt.shape), ft_(ft), copy_(copy),
        rng_(SamplingParams{1.0f, 0, 1.0f, opt.seed, 0.0f, 1.0f}),
        ones_(static_cast<size_t>(std::max(s_.n_embd, s_.head_size())), 1.0f) {}

  Status Matrix(const std::string& name, size_t rows, size_t cols) {
    const TensorType t = MatrixTypeFor(ft_, name, layer_, s_.n_layer, cols);
    std::vector<uint8_t> data;
    if (copy_ != nullptr && copy_->Writes(name)) {
      data.resize(rows * RowBytes(t, cols));
      std::vector<float> row(cols);
      for (size_t r = 0; r < rows; ++r) {
        copy_->Row(name, r, row.data(), cols);
        QuantizeRow(t, row.data(), data.data() + r * RowBytes(t, cols), cols);
      }
    } else {
      data = RandomMatrix(rng_, t, rows, cols, opt_.weight_std);
    }
    return w_.AddTensor(name, t, {cols, rows}, data);
  }
  Status Norm(const std::string& name, size_t n) {
    return w_.AddTensor(name, TensorType::kF32, {n}, {reinterpret_cast<const uint8_t*>(ones_.data()), n * sizeof(float)});
  }
  // The experts: one 3-D tensor per projection, [n_expert][rows][cols].
  Status Experts(const std::string& name, size_t rows, size_t cols) {
    const TensorType t = MatrixTypeFor(ft_, name, layer_, s_.n_layer, cols);
    std::vector<uint8_t> data;
    for (int x = 0; x < s_.n_expert; ++x) {
      const std::vector<uint8_t> one = RandomMatrix(rng_, t, rows, cols, opt_.weight_std);
      data.insert(data.end(), one.begin(), one.end());
    }
    return w_.AddTensor(name, t, {cols, rows, static_cast<size_t>(s_.n_expert)}, data);
  }
  Status Layer(int l);
  Status All(int n_vocab) {
    const auto e = static_cast<size_t>(s_.n_embd);
    PC_RETURN_IF_ERROR(Matrix("token_embd.weight", static_cast<size_t>(n_vocab), e));
    for (int l = 0; l < s_.n_layer; ++l) PC_RETURN_IF_ERROR(Layer(l));
    layer_ = -1;
    PC_RETURN_IF_ERROR(Norm("output_norm.weight", e));
    if (!s_.tied_output) PC_RETURN_IF_ERROR(Matrix("output.weight", static_cast<size_t>(n_vocab), e));
    return OkStatus();
  }

 private:
  GgufWriter& w_;
  const MakeModelOptions& opt_;
  const ModelShape& s_;
  const ModelFileType& ft_;
  const InductionWeights* copy_;
  Sampler rng_;
  std::vector<float> ones_;
  int layer_ = -1;  // of the matrices being written
};

Status TensorWriter::Layer(int l) {
  layer_ = l;
  const bool moe = s_.arch == "qwen3moe", gemma = s_.arch == "gemma3";
  const auto e = static_cast<size_t>(s_.n_embd), ff = static_cast<size_t>(moe ? s_.n_ff_expert : s_.n_ff);
  const size_t hd = static_cast<size_t>(s_.head_size()), q = hd * s_.n_head, kv = hd * s_.n_kv_head;
  const std::string p = fmt::format("blk.{}.", l);
  PC_RETURN_IF_ERROR(Norm(p + "attn_norm.weight", e));
  PC_RETURN_IF_ERROR(Matrix(p + "attn_q.weight", q, e));
  PC_RETURN_IF_ERROR(Matrix(p + "attn_k.weight", kv, e));
  PC_RETURN_IF_ERROR(Matrix(p + "attn_v.weight", kv, e));
  PC_RETURN_IF_ERROR(Matrix(p + "attn_output.weight", e, q));
  if (moe || gemma) {
    PC_RETURN_IF_ERROR(Norm(p + "attn_q_norm.weight", hd));
    PC_RETURN_IF_ERROR(Norm(p + "attn_k_norm.weight", hd));
  }
  if (gemma) PC_RETURN_IF_ERROR(Norm(p + "post_attention_norm.weight", e));
  PC_RETURN_IF_ERROR(Norm(p + "ffn_norm.weight", e));
  if (moe) {
    // The router stays F32, as the reference tools leave it.
    const auto n_exp = static_cast<size_t>(s_.n_expert);
    PC_RETURN_IF_ERROR(w_.AddTensor(p + "ffn_gate_inp.weight", TensorType::kF32, {e, n_exp},
                                    RandomMatrix(rng_, TensorType::kF32, n_exp, e, opt_.weight_std)));
    PC_RETURN_IF_ERROR(Experts(p + "ffn_gate_exps.weight", ff, e));
    PC_RETURN_IF_ERROR(Experts(p + "ffn_up_exps.weight", ff, e));
    PC_RETURN_IF_ERROR(Experts(p + "ffn_down_exps.weight", e, ff));
  } else {
    PC_RETURN_IF_ERROR(Matrix(p + "ffn_gate.weight", ff, e));
    PC_RETURN_IF_ERROR(Matrix(p + "ffn_up.weight", ff, e));
    PC_RETURN_IF_ERROR(Matrix(p + "ffn_down.weight", e, ff));
  }
  if (gemma) PC_RETURN_IF_ERROR(Norm(p + "post_ffw_norm.weight", e));
  return OkStatus();
}

Status CheckShape(const MakeModelOptions& opt) {
  const ModelShape& s = opt.shape;
  const bool moe = s.arch == "qwen3moe", gemma = s.arch == "gemma3";
  if (s.arch != "llama" && !moe && !gemma) return Errorf("make-model writes llama, qwen3moe or gemma3, not '{}'", s.arch);
  const int ffn = moe ? s.n_ff_expert : s.n_ff;
  if (s.n_embd % 32 != 0 || ffn % 32 != 0 || s.n_head <= 0 || s.n_kv_head <= 0 || s.n_head % s.n_kv_head != 0 ||
      (s.head_dim == 0 && s.n_embd % s.n_head != 0) || s.head_size() % 2 != 0 || (moe && s.n_expert_used < 1) ||
      (moe && s.n_expert < s.n_expert_used) || (gemma && s.sliding_window < 1)) {
    return Errorf("invalid shape: n_embd and ffn must be multiples of 32, the head size even, heads must divide evenly");
  }
  if (opt.copy && s.arch != "llama") return Status::Error("--copy writes llama models only");
  return OkStatus();
}

}  // namespace

Status MakeModel(const MakeModelOptions& opt, const std::string& out_path) {
  const ModelShape& s = opt.shape;
  PC_RETURN_IF_ERROR(CheckShape(opt));
  std::optional<InductionWeights> copy;
  if (opt.copy) {
    PC_ASSIGN_OR_RETURN(InductionWeights iw, InductionWeights::Make(s, opt.seed));
    copy = std::move(iw);
  }
  GgufWriter w;
  w.Set("general.architecture", GgufValue::Of(s.arch));
  w.Set("general.name", GgufValue::Of(s.name.empty() ? std::string("custom") : s.name));
  const ModelFileType ft = ModelFileTypeFor(opt.type, opt.k_mix);
  w.Set("general.file_type", GgufValue::Of(ft.ftype));
  w.Set("general.quantization_version", GgufValue::Of(uint32_t{2}));
  SetArchMetadata(w, s, copy.has_value());
  int n_vocab = opt.vocab_size;
  if (opt.vocab_path.empty()) {
    PC_RETURN_IF_ERROR(AddBuiltinVocab(w, opt));
  } else if (!opt.control_tokens.empty() || !opt.chat_template.empty()) {
    return Status::Error("control tokens and a chat template go with the built-in vocabulary, not --vocab");
  } else {
    PC_ASSIGN_OR_RETURN(n_vocab, CopyVocab(w, opt.vocab_path));
  }
  w.Set(s.arch + ".vocab_size", GgufValue::Of(static_cast<uint32_t>(n_vocab)));
  TensorWriter tensors(w, opt, ft, copy ? &*copy : nullptr);
  PC_RETURN_IF_ERROR(tensors.All(n_vocab));
  return w.WriteFile(out_path);
}

}  // namespace pc
