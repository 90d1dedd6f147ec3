#include "model/config.h"

#include <algorithm>

namespace pc {
namespace {

Result<int> ReadDim(const GgufFile& g, const std::string& key, int64_t max) {
  PC_ASSIGN_OR_RETURN(int64_t v, g.GetInt(key));
  if (v <= 0 || v > max) return Errorf("metadata '{}' = {} is out of range (1..{})", key, v, max);
  return static_cast<int>(v);
}

struct ArchInfo {
  const char* name;
  bool neox, fused;
};
constexpr ArchInfo kArchs[] = {
    {"llama", false, false}, {"mistral", false, false}, {"qwen2", true, false}, {"qwen3", true, false}, {"phi3", true, true},
};

// <arch>.* keys read below, and those that carry no arithmetic here
// (vocab_size restates the embedding; the original context of a linear
// scaling and its "finetuned" flag describe training).
const char* const kKnownKeys[] = {
    "context_length", "embedding_length", "block_count", "feed_forward_length", "attention.head_count",
    "attention.head_count_kv", "attention.key_length", "attention.value_length", "rope.dimension_count",
    "rope.freq_base", "attention.layer_norm_rms_epsilon", "rope.scaling.type", "rope.scaling.factor",
    "rope.scale_linear", "vocab_size", "rope.scaling.original_context_length", "rope.scaling.finetuned",
    "expert_count", "expert_used_count", "attention.sliding_window",
};

// Every <arch>.* key must be one we implement or know to be inert.
Status CheckArchKeys(const GgufFile& g, const std::string& arch) {
  const std::string p = arch + ".";
  for (const auto& [key, value] : g.metadata()) {
    if (key.rfind(p, 0) != 0) continue;
    const std::string k = key.substr(p.size());
    if (std::find(std::begin(kKnownKeys), std::end(kKnownKeys), k) == std::end(kKnownKeys)) {
      return Errorf("metadata '{}' is not supported: it changes the computation in a way promptcache does not implement",
                    key);
    }
  }
  for (const char* moe : {"expert_count", "expert_used_count"}) {
    if (g.Find(p + moe) != nullptr) {
      PC_ASSIGN_OR_RETURN(int64_t n, g.GetInt(p + moe));
      if (n != 0) return Errorf("'{}{}' = {}: mixture-of-experts models are not supported", p, moe, n);
    }
  }
  return OkStatus();
}

Status ReadRopeScaling(const GgufFile& g, const std::string& p, ModelConfig* c) {
  std::string type = "linear";
  if (g.Find(p + "rope.scaling.type") != nullptr) {
    PC_ASSIGN_OR_RETURN(type, g.GetString(p + "rope.scaling.type"));
  }
  if (type == "none") return OkStatus();
  if (type != "linear") {
    return Errorf("metadata '{}rope.scaling.type' = '{}' is not supported (supported: none, linear)", p, type);
  }
  for (const char* key : {"rope.scale_linear", "rope.scaling.factor"}) {
    if (g.Find(p + key) == nullptr) continue;
    PC_ASSIGN_OR_RETURN(double factor, g.GetFloat(p + key));
    if (!(factor >= 1.0 / 64 && factor <= 1024)) return Errorf("metadata '{}{}' = {} is out of range", p, key, factor);
    c->rope_freq_scale = static_cast<float>(1.0 / factor);
  }
  return OkStatus();
}

}  // namespace

const std::vector<std::string>& SupportedArchitectures() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const ArchInfo& a : kArchs) v.emplace_back(a.name);
    return v;
  }();
  return names;
}

Result<ModelConfig> ReadModelConfig(const GgufFile& g) {
  ModelConfig c;
  PC_ASSIGN_OR_RETURN(c.arch, g.GetString("general.architecture"));
  const ArchInfo* arch = nullptr;
  std::string names;
  for (const ArchInfo& a : kArchs) {
    if (c.arch == a.name) arch = &a;
    names += (names.empty() ? "" : ", ") + std::string(a.name);
  }
  if (arch == nullptr) return Errorf("unsupported architecture '{}' (supported: {})", c.arch, names);
  c.rope_neox = arch->neox;
  c.fused_qkv = c.fused_gate_up = arch->fused;
  const std::string p = c.arch + ".";
  PC_RETURN_IF_ERROR(CheckArchKeys(g, c.arch));
  PC_ASSIGN_OR_RETURN(c.n_embd, ReadDim(g, p + "embedding_length", 1 << 16));
  PC_ASSIGN_OR_RETURN(c.n_layer, ReadDim(g, p + "block_count", 1024));
  PC_ASSIGN_OR_RETURN(c.n_head, ReadDim(g, p + "attention.head_count", 1024));
  c.n_kv_head = c.n_head;
  if (g.Find(p + "attention.head_count_kv") != nullptr) {
    PC_ASSIGN_OR_RETURN(c.n_kv_head, ReadDim(g, p + "attention.head_count_kv", 1024));
  }
  PC_ASSIGN_OR_RETURN(c.n_ff, ReadDim(g, p + "feed_forward_length", 1 << 20));
  PC_ASSIGN_OR_RETURN(c.n_ctx, ReadDim(g, p + "context_length", 1 << 24));
  if (c.n_head % c.n_kv_head != 0) {
    return Errorf("head_count {} is not a multiple of head_count_kv {}", c.n_head, c.n_kv_head);
  }
  c.head_dim = c.n_embd / c.n_head;
  if (g.Find(p + "attention.key_length") != nullptr) {
    PC_ASSIGN_OR_RETURN(c.head_dim, ReadDim(g, p + "attention.key_length", 4096));
  }
  if (g.Find(p + "attention.value_length") != nullptr) {
    PC_ASSIGN_OR_RETURN(int v, ReadDim(g, p + "attention.value_length", 4096));
    if (v != c.head_dim) {
      return Errorf("metadata '{}attention.value_length' = {} differs from the key length {}: not supported", p, v,
                    c.head_dim);
    }
  }
  if (c.head_dim % 2 != 0) return Errorf("head dimension {} is odd", c.head_dim);
  c.rope_dim = c.head_dim;
  if (g.Find(p + "rope.dimension_count") != nullptr) {
    PC_ASSIGN_OR_RETURN(c.rope_dim, ReadDim(g, p + "rope.dimension_count", c.head_dim));
    if (c.rope_dim % 2 != 0) return Errorf("rope.dimension_count {} is odd", c.rope_dim);
  }
  if (g.Find(p + "rope.freq_base") != nullptr) {
    PC_ASSIGN_OR_RETURN(double base, g.GetFloat(p + "rope.freq_base"));
    if (!(base > 1.0 && base < 1e12)) return Errorf("rope.freq_base {} is out of range", base);
    c.rope_base = static_cast<float>(base);
  }
  PC_RETURN_IF_ERROR(ReadRopeScaling(g, p, &c));
  if (g.Find(p + "attention.sliding_window") != nullptr) {
    PC_ASSIGN_OR_RETURN(int64_t window, g.GetInt(p + "attention.sliding_window"));
    // A window at least as long as the context never masks anything.
    if (window > 0 && window < c.n_ctx) {
      return Errorf("metadata '{}attention.sliding_window' = {} (shorter than the context of {}): sliding-window "
                    "attention is not supported",
                    p, window, c.n_ctx);
    }
  }
  if (g.Find(p + "attention.layer_norm_rms_epsilon") != nullptr) {
    PC_ASSIGN_OR_RETURN(double eps, g.GetFloat(p + "attention.layer_norm_rms_epsilon"));
    if (!(eps > 0.0 && eps < 1.0)) return Errorf("layer_norm_rms_epsilon {} is out of range", eps);
    c.rms_eps = static_cast<float>(eps);
  }
  const GgufTensorInfo* embd = g.FindTensor("token_embd.weight");
  if (embd == nullptr) return Status::Error("tensor 'token_embd.weight' is missing");
  if (embd->dims.size() != 2) return Status::Error("tensor 'token_embd.weight' is not 2-D");
  if (embd->dims[1] > (1u << 24)) return Status::Error("token_embd.weight: vocabulary is absurdly large");
  c.n_vocab = static_cast<int>(embd->dims[1]);
  // Token ids past the embedding's rows would index outside it.
  if (const GgufValue* tokens = g.Find("tokenizer.ggml.tokens");
      tokens != nullptr && tokens->array.size() > static_cast<size_t>(c.n_vocab)) {
    return Errorf("the vocabulary has {} tokens but token_embd.weight only {} rows", tokens->array.size(), c.n_vocab);
  }
  return c;
}

}  // namespace pc
