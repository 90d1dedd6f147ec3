// The tests' reference decode loop: one sequence, the prompt prefilled in
// one batch, then one token at a time, written apart from the engine so that
// the engine's batched, chunked, preempted and cached runs can be checked
// against a plain single-request run. Not product code: `run`, `bench-prefix`
// and `serve` all decode through the engine.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "model/sampler.h"
#include "model/sequence.h"
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
  size_t num_cached_tokens = 0;   // prompt tokens whose K/V were reused
  size_t num_prefill_tokens = 0;  // prompt tokens computed
  size_t num_generated_tokens = 0;
  double prefill_ms = 0;  // prompt in, first logits out
  double ttft_ms = 0;     // start of Generate to the first token sampled
  double decode_ms = 0;   // all later decode steps
  std::vector<double> itl_ms;  // gap before each token after the first
  double mean_itl_ms() const;
};

// Streams generated tokens to on_token (return false to stop early).
// Prefills the part of the prompt not already in seq, then decodes.
Result<GenerateStats> Generate(Model& model, const Tokenizer& tok, KvSequence& seq,
                               std::span<const int32_t> prompt, const GenerateOptions& opt,
                               const std::function<bool(const TokenEvent&)>& on_token);
// Same with a private Session sized for the request.
Result<GenerateStats> Generate(Model& model, const Tokenizer& tok, std::span<const int32_t> prompt,
                               const GenerateOptions& opt,
                               const std::function<bool(const TokenEvent&)>& on_token);

}  // namespace pc
