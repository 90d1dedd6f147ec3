// Test helpers that need a model: random-weight models made on the fly.
// (test_support.h holds the helpers that need none; a test links this one,
// pc_test_model, only when it runs a model.)
#pragma once
#include <memory>

#include "kernels/ggml_compat.h"
#include "model/forward.h"
#include "model/make_model.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace pc::test {

// A random-weight model made by make-model into the temp dir and loaded on
// one thread, with its tokenizer: tests that need no shared data.
struct MadeModel {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
};
// copy: make-model --copy (layers 0-1 quote the prompt: induction_weights.h).
MadeModel MakeTestModel(const ModelShape& shape, TensorType type, int vocab_size, bool copy = false);

// The ggml numerics' target of a shared reference file (ReferenceGgmlTarget)
// for the scope, then the one before.
class ScopedGgmlTarget {
 public:
  explicit ScopedGgmlTarget(const std::string& model_name) : before_(ActiveGgmlTarget()) {
    SetGgmlTarget(*ParseGgmlTarget(ReferenceGgmlTarget(model_name)));
  }
  ~ScopedGgmlTarget() { SetGgmlTarget(before_); }
  ScopedGgmlTarget(const ScopedGgmlTarget&) = delete;
  ScopedGgmlTarget& operator=(const ScopedGgmlTarget&) = delete;

 private:
  GgmlTarget before_;
};

}  // namespace pc::test
