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
};

// Built-in shapes: bench-135m, bench-1b, tiny.
Result<ModelShape> BuiltinShape(const std::string& name);
std::vector<std::string> BuiltinShapeNames();

struct MakeModelOptions {
  ModelShape shape;
  TensorType type = TensorType::kQ8_0;
  std::string vocab_path;  // a GGUF whose tokenizer.* metadata is copied; empty: built-in
  int vocab_size = 32000;  // built-in vocabulary only
  std::string words_path = "/usr/share/dict/words";
  uint64_t seed = 1;
  float weight_std = 0.02f;
};

Status MakeModel(const MakeModelOptions& opt, const std::string& out_path);

}  // namespace pc
