// Random-weight llama models for benchmarks and tests (`make-model`).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/tensor_type.h"

namespace pc {

struct ModelShape {
  std::string name;
  int n_embd = 0, n_layer = 0, n_head = 0, n_kv_head = 0, n_ff = 0;
  bool tied_output = true;
  int n_ctx = 8192;
  float rope_base = 10000.0f;
  // Beyond llama: the architecture written (llama, qwen3moe, gemma3), the
  // head size (0: n_embd / n_head), experts (qwen3moe: n_expert of
  // n_ff_expert, n_expert_used per token; n_ff unused) and gemma3's window.
  std::string arch = "llama";
  int head_dim = 0;
  int n_expert = 0, n_expert_used = 0, n_ff_expert = 0;
  int sliding_window = 0;
  int head_size() const { return head_dim > 0 ? head_dim : n_embd / n_head; }
};

// Built-in shapes: bench-135m, bench-1b, tiny; bench-moe (Qwen3-30B-A3B's
// proportions at about 1e9 weights: 128 experts of 0.375 n_embd, 8 used,
// q twice n_embd in heads of 128, 8 queries per KV head, untied output) and
// bench-gemma3 (Gemma 3 1B's: 4 heads and 1 KV head, q 0.89 n_embd, FFN
// 6 n_embd, windows of 512 on five layers of six, 26 layers, tied output).
Result<ModelShape> BuiltinShape(const std::string& name);
std::vector<std::string> BuiltinShapeNames();

// What `make-model --type` writes: one weight type for every matrix, or a
// K-quant mix as the reference tools make them (_m: Q6_K for the output
// matrix and for attn_v and ffn_down in about half of the layers). Matrices
// whose rows are not a whole number of the type's blocks take the type the
// reference tools fall back to (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0,
// Q2_K, Q3_K and IQ4_XS -> IQ4_NL), as they would for the same shape.
struct ModelFileType {
  std::string name;     // "q4_k_m"
  TensorType type;      // the base weight type
  bool k_mix = false;   // the _M rule above
  uint32_t ftype = 0;   // general.file_type as the GGUF ecosystem numbers it (llama_ftype)
};
Result<ModelFileType> ParseModelFileType(const std::string& name);
ModelFileType ModelFileTypeFor(TensorType type, bool k_mix);
std::vector<std::string> ModelFileTypeNames();
// The type make-model writes for one matrix of a model of n_layer layers.
TensorType MatrixTypeFor(const ModelFileType& ft, const std::string& tensor, int layer, int n_layer, size_t cols);

struct MakeModelOptions {
  ModelShape shape;
  TensorType type = TensorType::kQ8_0;
  bool k_mix = false;  // ModelFileType::k_mix
  std::string vocab_path;  // a GGUF whose tokenizer.* metadata is copied; empty: built-in
  int vocab_size = 32000;  // built-in vocabulary only
  // Built-in vocabulary only: control tokens (a chat format's markers) placed
  // right after </s>, and a chat template stored as tokenizer.chat_template.
  std::vector<std::string> control_tokens;
  std::string chat_template;
  std::string words_path = "/usr/share/dict/words";
  uint64_t seed = 1;
  float weight_std = 0.02f;
  // The first two layers copy what followed the current token's earlier
  // occurrence (induction_weights.h); rope base 1e12. Everything else random.
  bool copy = false;
};

Status MakeModel(const MakeModelOptions& opt, const std::string& out_path);

}  // namespace pc
