#include "model/make_model.h"

#include <cmath>
#include <fstream>
#include <set>

#include "gguf/gguf.h"
#include "kernels/quant.h"
#include "model/sampler.h"

namespace pc {

Result<ModelShape> BuiltinShape(const std::string& name) {
  // n_embd, layers, heads, kv heads, ffn, tied
  if (name == "bench-135m") return ModelShape{name, 576, 30, 9, 3, 1536, true};
  if (name == "bench-1b") return ModelShape{name, 2048, 22, 32, 4, 5632, false};
  if (name == "tiny") return ModelShape{name, 128, 2, 4, 2, 256, true, 2048};
  return Errorf("unknown model shape '{}' (built-in: bench-135m, bench-1b, tiny)", name);
}

std::vector<std::string> BuiltinShapeNames() { return {"bench-135m", "bench-1b", "tiny"}; }

namespace {

// SentencePiece-style vocabulary: control tokens, 256 byte-fallback tokens,
// single characters, then whole words ("▁word") from a word list.
Status AddBuiltinVocab(GgufWriter& w, const MakeModelOptions& opt) {
  std::vector<GgufScalar> tokens, scores, types;
  std::set<std::string> seen;
  auto add = [&](const std::string& t, float score, int type) {
    if (!seen.insert(t).second) return;
    tokens.emplace_back(t);
    scores.emplace_back(score);
    types.emplace_back(static_cast<int32_t>(type));
  };
  add("<unk>", 0, 2);
  add("<s>", 0, 3);
  add("</s>", 0, 3);
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

Status MakeModel(const MakeModelOptions& opt, const std::string& out_path) {
  const ModelShape& s = opt.shape;
  if (s.n_embd % 32 != 0 || s.n_ff % 32 != 0 || s.n_head <= 0 || s.n_kv_head <= 0 ||
      s.n_embd % s.n_head != 0 || s.n_head % s.n_kv_head != 0) {
    return Errorf("invalid shape: n_embd and ffn must be multiples of 32, heads must divide evenly");
  }
  GgufWriter w;
  w.Set("general.architecture", GgufValue::Of(std::string("llama")));
  w.Set("general.name", GgufValue::Of(s.name.empty() ? std::string("custom") : s.name));
  w.Set("general.file_type", GgufValue::Of(static_cast<uint32_t>(opt.type)));
  w.Set("llama.context_length", GgufValue::Of(static_cast<uint32_t>(s.n_ctx)));
  w.Set("llama.embedding_length", GgufValue::Of(static_cast<uint32_t>(s.n_embd)));
  w.Set("llama.block_count", GgufValue::Of(static_cast<uint32_t>(s.n_layer)));
  w.Set("llama.feed_forward_length", GgufValue::Of(static_cast<uint32_t>(s.n_ff)));
  w.Set("llama.attention.head_count", GgufValue::Of(static_cast<uint32_t>(s.n_head)));
  w.Set("llama.attention.head_count_kv", GgufValue::Of(static_cast<uint32_t>(s.n_kv_head)));
  w.Set("llama.rope.dimension_count", GgufValue::Of(static_cast<uint32_t>(s.n_embd / s.n_head)));
  w.Set("llama.rope.freq_base", GgufValue::Of(s.rope_base));
  w.Set("llama.attention.layer_norm_rms_epsilon", GgufValue::Of(1e-5f));
  int n_vocab = opt.vocab_size;
  if (opt.vocab_path.empty()) {
    PC_RETURN_IF_ERROR(AddBuiltinVocab(w, opt));
  } else {
    PC_ASSIGN_OR_RETURN(n_vocab, CopyVocab(w, opt.vocab_path));
  }
  w.Set("llama.vocab_size", GgufValue::Of(static_cast<uint32_t>(n_vocab)));
  Sampler rng(SamplingParams{1.0f, 0, 1.0f, opt.seed});
  const auto e = static_cast<size_t>(s.n_embd), ff = static_cast<size_t>(s.n_ff);
  const size_t kv = e / s.n_head * s.n_kv_head;
  auto matrix = [&](const std::string& name, size_t rows, size_t cols) {
    auto data = RandomMatrix(rng, opt.type, rows, cols, opt.weight_std);
    return w.AddTensor(name, opt.type, {cols, rows}, data);
  };
  std::vector<float> ones(e, 1.0f);
  auto norm = [&](const std::string& name) {
    return w.AddTensor(name, TensorType::kF32, {e},
                       {reinterpret_cast<const uint8_t*>(ones.data()), e * sizeof(float)});
  };
  PC_RETURN_IF_ERROR(matrix("token_embd.weight", static_cast<size_t>(n_vocab), e));
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    PC_RETURN_IF_ERROR(norm(p + "attn_norm.weight"));
    PC_RETURN_IF_ERROR(matrix(p + "attn_q.weight", e, e));
    PC_RETURN_IF_ERROR(matrix(p + "attn_k.weight", kv, e));
    PC_RETURN_IF_ERROR(matrix(p + "attn_v.weight", kv, e));
    PC_RETURN_IF_ERROR(matrix(p + "attn_output.weight", e, e));
    PC_RETURN_IF_ERROR(norm(p + "ffn_norm.weight"));
    PC_RETURN_IF_ERROR(matrix(p + "ffn_gate.weight", ff, e));
    PC_RETURN_IF_ERROR(matrix(p + "ffn_up.weight", ff, e));
    PC_RETURN_IF_ERROR(matrix(p + "ffn_down.weight", e, ff));
  }
  PC_RETURN_IF_ERROR(norm("output_norm.weight"));
  if (!s.tied_output) PC_RETURN_IF_ERROR(matrix("output.weight", static_cast<size_t>(n_vocab), e));
  return w.WriteFile(out_path);
}

}  // namespace pc
