// Single-sequence generation: prefill the prompt in one batch, then decode one
// token at a time. Used by `promptcache run` and the parity tests; the server
// engine batches many sequences instead.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "model/forward.h"
#include "model/sampler.h"
#include "tokenizer/tokenizer.h"

namespace pc {

struct GenerateOptions {
  int max_tokens = 64;
  SamplingParams sampling;
  bool ignore_eos = false;
  int logprobs = 0;  // top-k log-probabilities to report per token (0: none)
  KvDtype kv_dtype = KvDtype::kF16;
};

struct TokenEvent {
  int32_t id = 0;
  std::string text;  // complete UTF-8 released by this token (may be empty)
  std::vector<std::pair<int32_t, float>> top;
};

struct GenerateStats {
  size_t num_prompt_tokens = 0;
  size_t num_generated_tokens = 0;
  double prefill_ms = 0;  // prompt in, first logits out
  double decode_ms = 0;   // all later decode steps
};

// A sequence with its own contiguous run of KV blocks.
class Session {
 public:
  Session(Model& model, size_t max_tokens, KvDtype dtype, size_t block_size = 16);
  // Appends tokens (one batch); returns the logits after the last one.
  std::span<const float> Prefill(std::span<const int32_t> tokens);
  std::span<const float> Decode(int32_t token);
  size_t n_past() const { return n_past_; }
  size_t capacity() const { return table_.size() * kv_.block_size(); }

 private:
  Model& model_;
  KvStore kv_;
  std::vector<int32_t> table_;
  size_t n_past_ = 0;
  std::vector<float> logits_;
};

// Streams generated tokens to on_token (return false to stop early).
Result<GenerateStats> Generate(Model& model, const Tokenizer& tok, std::span<const int32_t> prompt,
                               const GenerateOptions& opt,
                               const std::function<bool(const TokenEvent&)>& on_token);

}  // namespace pc
