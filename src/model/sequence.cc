#include "model/sequence.h"

#include "base/check.h"

namespace pc {

Session::Session(Model& model, size_t max_tokens, KvDtype dtype, size_t block_size)
    : model_(model),
      kv_(model.config().n_layer, model.config().kv_dim(), block_size,
          (max_tokens + block_size - 1) / block_size, dtype) {
  for (size_t b = 0; b < kv_.num_blocks(); ++b) table_.push_back(static_cast<int32_t>(b));
}

Status Session::Reserve(size_t num_tokens) {
  if (num_tokens > capacity()) return Errorf("session holds {} tokens, {} needed", capacity(), num_tokens);
  return OkStatus();
}

std::span<const float> Session::Prefill(std::span<const int32_t> tokens) {
  Result<std::span<const float>> r = RunBatch(model_, *this, tokens, &logits_);
  PC_CHECK(r.ok());
  return *r;
}

std::span<const float> Session::Decode(int32_t token) { return Prefill({&token, 1}); }

Result<std::span<const float>> RunBatch(Model& model, KvSequence& seq, std::span<const int32_t> tokens,
                                        std::vector<float>* logits) {
  PC_CHECK(!tokens.empty());
  const size_t start = seq.num_computed();
  PC_RETURN_IF_ERROR(seq.Reserve(start + tokens.size()));
  const std::span<const int32_t> table = seq.block_table(), local = seq.local_block_table();
  // Long prompts run in chunks of kPrefillChunkTokens (as llama.cpp's
  // micro-batches of 512): activation scratch stays bounded, and results do
  // not change since every kernel is batch-invariant (in the ggml numerics
  // but for one-token batches and the tiled attention's threshold, hence
  // the model's tail chunk).
  const size_t tail = model.prompt_tail_tokens();
  const size_t head = tail > 0 && tokens.size() > tail ? tokens.size() - tail : tokens.size();
  std::vector<BatchToken> batch;
  for (size_t c0 = 0; c0 < tokens.size();) {
    const size_t c1 = c0 < head ? std::min(head, c0 + kPrefillChunkTokens) : tokens.size();
    batch.clear();
    for (size_t i = c0; i < c1; ++i) {
      batch.push_back({tokens[i], static_cast<int32_t>(start + i), table, i + 1 == tokens.size(), local});
    }
    model.Forward(batch, seq.store(), logits);
    c0 = c1;
  }
  seq.Computed(tokens);
  return std::span<const float>(*logits);
}

}  // namespace pc
