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
  size_t num_cached_tokens = 0;   // prompt tokens whose K/V were reused
  size_t num_prefill_tokens = 0;  // prompt tokens computed
  size_t num_generated_tokens = 0;
  double prefill_ms = 0;  // prompt in, first logits out
  double ttft_ms = 0;     // start of Generate to the first token sampled
  double decode_ms = 0;   // all later decode steps
  std::vector<double> itl_ms;  // gap before each token after the first
  double mean_itl_ms() const;
};

// Where one sequence's K/V live. Generate asks for capacity before each
// batch and reports which tokens it computed, so an implementation can
// share and register blocks (the prefix cache) or just own them (Session).
class KvSequence {
 public:
  virtual ~KvSequence() = default;
  virtual KvStore& store() = 0;
  virtual std::span<const int32_t> block_table() const = 0;
  // Tokens at positions [0, num_computed()) already have K/V.
  virtual size_t num_computed() const = 0;
  // Blocks for positions [0, num_tokens); error if the pool is exhausted.
  virtual Status Reserve(size_t num_tokens) = 0;
  // The K/V of `tokens` were written at positions num_computed()...
  virtual void Computed(std::span<const int32_t> tokens) = 0;
};

// A sequence with its own KV store: a contiguous run of private blocks.
class Session : public KvSequence {
 public:
  Session(Model& model, size_t max_tokens, KvDtype dtype, size_t block_size = 16);
  // Appends tokens (one batch); returns the logits after the last one.
  std::span<const float> Prefill(std::span<const int32_t> tokens);
  std::span<const float> Decode(int32_t token);
  size_t capacity() const { return table_.size() * kv_.block_size(); }

  KvStore& store() override { return kv_; }
  std::span<const int32_t> block_table() const override { return table_; }
  size_t num_computed() const override { return n_past_; }
  Status Reserve(size_t num_tokens) override;
  void Computed(std::span<const int32_t> tokens) override { n_past_ += tokens.size(); }

 private:
  Model& model_;
  KvStore kv_;
  std::vector<int32_t> table_;
  size_t n_past_ = 0;
  std::vector<float> logits_;
};

// Prompt tokens per forward pass in RunBatch.
constexpr size_t kPrefillChunkTokens = 512;

// Runs `tokens` at positions seq.num_computed()... in batches of up to
// kPrefillChunkTokens (after Reserve), reports them Computed, and returns the
// last token's logits.
Result<std::span<const float>> RunBatch(Model& model, KvSequence& seq, std::span<const int32_t> tokens,
                                        std::vector<float>* logits);

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
