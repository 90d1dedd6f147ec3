#include "model/config.h"

#include <algorithm>
#include <cmath>

namespace pc {
namespace {

Result<int> ReadDim(const GgufFile& g, const std::string& key, int64_t max) {
  PC_ASSIGN_OR_RETURN(int64_t v, g.GetInt(key));
  if (v <= 0 || v > max) return Errorf("metadata '{}' = {} is out of range (1..{})", key, v, max);
  return static_cast<int>(v);
}

// The switches of one architecture's recipe. swa_pattern: of every
// swa_pattern layers all but the last are windowed (the reference engine's
// default for the family; 0: the family has no windowed layers).
struct ArchInfo {
  const char* name;
  bool neox, fused;
  bool experts;     // may carry a mixture of experts
  bool gemma;       // GeGLU, post norms, scaled embeddings
  int swa_pattern;
  bool softcaps;    // reads attention and final logit soft-capping
  bool oai;         // gpt-oss: clamped SwiGLU, FFN norm named post_attention_norm
};
constexpr ArchInfo kArchs[] = {
    {"llama", false, false, true, false, 0, false, false},   {"mistral", false, false, false, false, 0, false, false},
    {"qwen2", true, false, false, false, 0, false, false},   {"qwen3", true, false, false, false, 0, false, false},
    {"qwen3moe", true, false, true, false, 0, false, false}, {"phi3", true, true, false, false, 0, false, false},
    {"gemma2", true, false, false, true, 2, true, false},    {"gemma3", true, false, false, true, 6, false, false},
    {"gpt-oss", true, false, true, false, 2, false, true},
};

// <arch>.* keys read below, and those that carry no arithmetic here
// (vocab_size restates the embedding; the original context of a linear
// scaling and its "finetuned" flag describe training).
const char* const kKnownKeys[] = {
    "context_length", "embedding_length", "block_count", "feed_forward_length", "attention.head_count",
    "attention.head_count_kv", "attention.key_length", "attention.value_length", "rope.dimension_count",
    "rope.freq_base", "attention.layer_norm_rms_epsilon", "rope.scaling.type", "rope.scaling.factor",
    "rope.scale_linear", "vocab_size", "rope.scaling.original_context_length", "rope.scaling.finetuned",
    "expert_count", "expert_used_count", "attention.sliding_window", "expert_feed_forward_length",
    "attn_logit_softcapping", "final_logit_softcapping", "rope.freq_base_swa", "attention.sliding_window_pattern",
    "rope.scaling.yarn_beta_fast", "rope.scaling.yarn_beta_slow", "rope.scaling.yarn_ext_factor",
    "rope.scaling.yarn_attn_factor", "expert_gating_func", "expert_weights_norm", "expert_weights_scale",
    "expert_shared_count",
};

// Keys some converters write for routed experts, accepted where they state
// what every mixture recipe here computes and refused by value otherwise:
// softmax gating (the converters' ExpertGatingFuncType 1), the chosen
// experts' weights renormalised, not rescaled, no shared experts.
struct ExpertStatement {
  const char* key;
  double value;
  const char* meaning;
};
constexpr ExpertStatement kExpertStatements[] = {
    {"expert_gating_func", 1, "softmax gating (1)"},
    {"expert_weights_norm", 1, "the chosen experts' weights renormalised (true)"},
    {"expert_weights_scale", 1, "unscaled expert weights (1)"},
    {"expert_shared_count", 0, "no shared experts (0)"},
};

// Keys only some recipes implement: meaningful there, refused elsewhere.
bool KeyImplemented(const ArchInfo& a, const std::string& k) {
  for (const ExpertStatement& e : kExpertStatements) {
    if (k == e.key) return a.experts;
  }
  if (k == "attn_logit_softcapping" || k == "final_logit_softcapping") return a.softcaps;
  if (k == "rope.freq_base_swa" || k == "attention.sliding_window_pattern") return a.swa_pattern > 0;
  if (k == "expert_feed_forward_length") return a.experts;
  return true;
}

// Every <arch>.* key must be one we implement or know to be inert.
Status CheckArchKeys(const GgufFile& g, const ArchInfo& arch) {
  const std::string p = std::string(arch.name) + ".";
  for (const auto& [key, value] : g.metadata()) {
    if (key.rfind(p, 0) != 0) continue;
    const std::string k = key.substr(p.size());
    if (std::find(std::begin(kKnownKeys), std::end(kKnownKeys), k) == std::end(kKnownKeys) ||
        !KeyImplemented(arch, k)) {
      return Errorf("metadata '{}' is not supported: it changes the computation in a way promptcache does not implement",
                    key);
    }
  }
  return OkStatus();
}

// An optional float key; *out keeps its default when absent.
Status MaybeFloat(const GgufFile& g, const std::string& key, float lo, float hi, float* out) {
  if (g.Find(key) == nullptr) return OkStatus();
  PC_ASSIGN_OR_RETURN(double v, g.GetFloat(key));
  if (!(v >= lo && v <= hi)) return Errorf("metadata '{}' = {} is out of range ({}..{})", key, v, lo, hi);
  *out = static_cast<float>(v);
  return OkStatus();
}

Status ReadExperts(const GgufFile& g, const std::string& p, const ArchInfo& arch, ModelConfig* c) {
  int64_t n = 0, used = 0;
  if (g.Find(p + "expert_count") != nullptr) {
    PC_ASSIGN_OR_RETURN(n, g.GetInt(p + "expert_count"));
  }
  if (g.Find(p + "expert_used_count") != nullptr) {
    PC_ASSIGN_OR_RETURN(used, g.GetInt(p + "expert_used_count"));
  }
  if (n == 0 && used == 0) {
    if (g.Find(p + "expert_feed_forward_length") != nullptr) {
      return Errorf("metadata '{}expert_feed_forward_length' without '{}expert_count'", p, p);
    }
    return OkStatus();
  }
  if (!arch.experts) return Errorf("'{}expert_count' = {}: the {} recipe has no mixture of experts", p, n, arch.name);
  if (n < 1 || n > 1024) return Errorf("metadata '{}expert_count' = {} is out of range (1..1024)", p, n);
  if (used < 1 || used > n) return Errorf("metadata '{}expert_used_count' = {} is out of range (1..{})", p, used, n);
  for (const ExpertStatement& e : kExpertStatements) {
    const std::string key = p + e.key;
    const GgufValue* v = g.Find(key);
    if (v == nullptr) continue;
    double x = 0;
    if (const bool* b = std::get_if<bool>(&v->scalar)) {
      x = *b ? 1.0 : 0.0;
    } else {
      PC_ASSIGN_OR_RETURN(x, g.GetFloat(key));
    }
    if (x != e.value) {
      return Errorf("metadata '{}' = {} is not supported: the {} recipe implements {}", key, x, arch.name, e.meaning);
    }
  }
  c->n_expert = static_cast<int>(n);
  c->n_expert_used = static_cast<int>(used);
  c->n_ff_expert = c->n_ff;
  if (g.Find(p + "expert_feed_forward_length") != nullptr) {
    PC_ASSIGN_OR_RETURN(c->n_ff_expert, ReadDim(g, p + "expert_feed_forward_length", 1 << 20));
  }
  return OkStatus();
}

// Which layers are windowed: the file's pattern key (an integer N: of
// every N layers all but the last; or one flag per layer), else the family's.
Status ReadWindowLayers(const GgufFile& g, const std::string& p, const ArchInfo& arch, ModelConfig* c) {
  c->swa_layers.assign(static_cast<size_t>(c->n_layer), 0);
  const std::string key = p + "attention.sliding_window_pattern";
  const GgufValue* v = g.Find(key);
  int pattern = arch.swa_pattern;
  if (v != nullptr && v->type == GgufType::kArray) {
    if (v->array.size() != static_cast<size_t>(c->n_layer)) {
      return Errorf("metadata '{}' has {} entries for {} layers", key, v->array.size(), c->n_layer);
    }
    for (size_t l = 0; l < v->array.size(); ++l) {
      int64_t flag = 0;
      if (const bool* b = std::get_if<bool>(&v->array[l])) flag = *b;
      else if (!ScalarAsInt(v->array[l], &flag)) return Errorf("metadata '{}' holds a non-integer", key);
      c->swa_layers[l] = flag != 0;
    }
    return OkStatus();
  }
  if (v != nullptr) {
    PC_ASSIGN_OR_RETURN(int64_t n, g.GetInt(key));
    if (n < 0 || n > c->n_layer) return Errorf("metadata '{}' = {} is out of range (0..{})", key, n, c->n_layer);
    pattern = static_cast<int>(n);
  }
  for (int l = 0; l < c->n_layer; ++l) c->swa_layers[static_cast<size_t>(l)] = pattern == 0 || l % pattern < pattern - 1;
  return OkStatus();
}

Status ReadSlidingWindow(const GgufFile& g, const std::string& p, const ArchInfo& arch, ModelConfig* c) {
  if (g.Find(p + "attention.sliding_window") == nullptr) {
    if (arch.swa_pattern > 0) return Errorf("metadata '{}attention.sliding_window' is missing", p);
    return OkStatus();
  }
  PC_ASSIGN_OR_RETURN(int64_t window, g.GetInt(p + "attention.sliding_window"));
  if (arch.swa_pattern == 0) {
    // A window at least as long as the context never masks anything.
    if (window > 0 && window < c->n_ctx) {
      return Errorf("metadata '{}attention.sliding_window' = {} (shorter than the context of {}): the {} recipe "
                    "has no sliding-window attention",
                    p, window, c->n_ctx, arch.name);
    }
    return OkStatus();
  }
  if (window < 1 || window > (1 << 24)) return Errorf("metadata '{}attention.sliding_window' = {} is out of range", p, window);
  c->sliding_window = static_cast<int>(window);
  PC_RETURN_IF_ERROR(ReadWindowLayers(g, p, arch, c));
  // Windowed layers rotate as the others do, except in gemma3: base 10,000
  // (the reference engine's default when the file names none) and no
  // position scaling (a linear factor applies to the global layers only).
  c->swa_rope_base = c->rope_base;
  c->swa_rope_freq_scale = c->rope_freq_scale;
  if (c->arch == "gemma3") c->swa_rope_base = 10000.0f, c->swa_rope_freq_scale = 1.0f;
  return MaybeFloat(g, p + "rope.freq_base_swa", 1.0f, 1e12f, &c->swa_rope_base);
}

// Gemma: the family's fixed switches and its soft-caps. The query scale is
// 1/sqrt(n_embd / n_head) for the 27B models (query_pre_attn_scalar there),
// 1/sqrt(head_dim) otherwise, as the reference engine picks it by depth.
Status ReadGemma(const GgufFile& g, const std::string& p, const ArchInfo& arch, ModelConfig* c) {
  if (!arch.gemma) return OkStatus();
  c->embed_scale = c->post_norms = true;
  c->ffn_act = ModelConfig::Act::kGeluTanh;
  const bool is_27b = (c->arch == "gemma2" && c->n_layer == 46) || (c->arch == "gemma3" && c->n_layer == 62);
  c->attn_scale = 1.0f / std::sqrt(static_cast<float>(is_27b ? c->n_embd / c->n_head : c->head_dim));
  if (!arch.softcaps) return OkStatus();
  // Gemma 2 always caps: files converted before the keys existed carry
  // none, and the family's values (50 for attention logits, 30 for the
  // final ones) apply, as the reference engine assumes too.
  c->attn_softcap = 50.0f;
  c->final_softcap = 30.0f;
  PC_RETURN_IF_ERROR(MaybeFloat(g, p + "attn_logit_softcapping", 0.0f, 1e6f, &c->attn_softcap));
  return MaybeFloat(g, p + "final_logit_softcapping", 0.0f, 1e6f, &c->final_softcap);
}

Status ReadRopeScaling(const GgufFile& g, const std::string& p, ModelConfig* c) {
  std::string type = "linear";
  if (g.Find(p + "rope.scaling.type") != nullptr) {
    PC_ASSIGN_OR_RETURN(type, g.GetString(p + "rope.scaling.type"));
  }
  if (type == "none") return OkStatus();
  if (type != "linear" && type != "yarn") {
    return Errorf("metadata '{}rope.scaling.type' = '{}' is not supported (supported: none, linear, yarn)", p, type);
  }
  if (type == "yarn") {
    c->rope_yarn = true;
    c->rope_orig_ctx = c->n_ctx;
    if (g.Find(p + "rope.scaling.original_context_length") != nullptr) {
      PC_ASSIGN_OR_RETURN(c->rope_orig_ctx, ReadDim(g, p + "rope.scaling.original_context_length", 1 << 24));
    }
    PC_RETURN_IF_ERROR(MaybeFloat(g, p + "rope.scaling.yarn_beta_fast", 0.0f, 1e4f, &c->yarn_beta_fast));
    PC_RETURN_IF_ERROR(MaybeFloat(g, p + "rope.scaling.yarn_beta_slow", 0.0f, 1e4f, &c->yarn_beta_slow));
    PC_RETURN_IF_ERROR(MaybeFloat(g, p + "rope.scaling.yarn_ext_factor", 0.0f, 1.0f, &c->yarn_ext_factor));
    PC_RETURN_IF_ERROR(MaybeFloat(g, p + "rope.scaling.yarn_attn_factor", 0.0f, 100.0f, &c->yarn_attn_factor));
  }
  if (type == "yarn" && g.Find(p + "rope.scaling.factor") == nullptr) {
    return Errorf("metadata '{}rope.scaling.factor' is missing (rope.scaling.type yarn)", p);
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
  PC_RETURN_IF_ERROR(CheckArchKeys(g, *arch));
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
  PC_RETURN_IF_ERROR(ReadSlidingWindow(g, p, *arch, &c));
  PC_RETURN_IF_ERROR(ReadExperts(g, p, *arch, &c));
  PC_RETURN_IF_ERROR(ReadGemma(g, p, *arch, &c));
  if (arch->oai) {
    c.ffn_act = ModelConfig::Act::kSwigluOai;
    c.ffn_norm_tensor = "post_attention_norm";
    if (c.n_expert == 0) return Errorf("'{}expert_count' is missing: the {} recipe is a mixture of experts", p, c.arch);
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
