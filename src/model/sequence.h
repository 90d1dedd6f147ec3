// One sequence's K/V and its forward passes: a Session that owns its blocks (bench-model and
// the tests' reference decode loop), and RunBatch, which runs a sequence's
// next tokens in prefill-sized chunks. The decode loop itself is the
// engine's (engine/engine.h), for `run`, `bench-prefix` and `serve` alike.
#pragma once
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "kvcache/kv_sequence.h"
#include "model/forward.h"

namespace pc {

// A sequence with its own KV store: a contiguous run of private blocks.
class Session : public KvSequence {
 public:
  Session(Model& model, size_t max_tokens, KvDtype dtype, size_t block_size = 16);
  // Appends tokens (one batch); returns the logits after the last one.
  std::span<const float> Prefill(std::span<const int32_t> tokens);
  std::span<const float> Decode(int32_t token);
  size_t capacity() const { return table_.size() * kv_.block_size(); }
  // Forgets every token and keeps the blocks, so the next Prefill starts at
  // position 0 over memory already mapped (a benchmark's next repetition, as
  // llama-bench clears its context's KV rather than making a new one).
  void Clear() { n_past_ = 0; }
  // Forgets the tokens from position n on and keeps those before it (a
  // benchmark's cached prefix, reused by every repetition of its suffix).
  void Truncate(size_t n) { n_past_ = std::min(n_past_, n); }

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

}  // namespace pc
