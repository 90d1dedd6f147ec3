#include "model/config.h"

namespace pc {
namespace {

Result<int> ReadDim(const GgufFile& g, const std::string& key, int64_t max) {
  PC_ASSIGN_OR_RETURN(int64_t v, g.GetInt(key));
  if (v <= 0 || v > max) return Errorf("metadata '{}' = {} is out of range (1..{})", key, v, max);
  return static_cast<int>(v);
}

}  // namespace

Result<ModelConfig> ReadModelConfig(const GgufFile& g) {
  ModelConfig c;
  PC_ASSIGN_OR_RETURN(c.arch, g.GetString("general.architecture"));
  // Architectures that share the llama layer recipe; those listed under
  // neox use NeoX-style rotary embedding.
  static const char* kNorm[] = {"llama", "mistral"};
  static const char* kNeox[] = {"qwen2"};
  bool known = false;
  for (const char* a : kNorm) known |= c.arch == a;
  for (const char* a : kNeox) {
    if (c.arch == a) known = c.rope_neox = true;
  }
  if (!known) return Errorf("unsupported architecture '{}' (supported: llama, mistral, qwen2)", c.arch);
  const std::string p = c.arch + ".";
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
  return c;
}

}  // namespace pc
