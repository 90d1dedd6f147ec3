#include "model/generate.h"

#include "base/check.h"
#include "base/clock.h"
#include "tokenizer/detokenizer.h"

namespace pc {

Session::Session(Model& model, size_t max_tokens, KvDtype dtype, size_t block_size)
    : model_(model),
      kv_(model.config().n_layer, model.config().kv_dim(), block_size,
          (max_tokens + block_size - 1) / block_size, dtype) {
  for (size_t b = 0; b < kv_.num_blocks(); ++b) table_.push_back(static_cast<int32_t>(b));
}

std::span<const float> Session::Prefill(std::span<const int32_t> tokens) {
  PC_CHECK(!tokens.empty() && n_past_ + tokens.size() <= capacity());
  std::vector<BatchToken> batch(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    batch[i] = {tokens[i], static_cast<int32_t>(n_past_ + i), table_, i + 1 == tokens.size()};
  }
  model_.Forward(batch, kv_, &logits_);
  n_past_ += tokens.size();
  return logits_;
}

std::span<const float> Session::Decode(int32_t token) { return Prefill({&token, 1}); }

Result<GenerateStats> Generate(Model& model, const Tokenizer& tok, std::span<const int32_t> prompt,
                               const GenerateOptions& opt,
                               const std::function<bool(const TokenEvent&)>& on_token) {
  const ModelConfig& c = model.config();
  if (prompt.empty()) return Status::Error("the prompt is empty");
  for (int32_t id : prompt) {
    if (id < 0 || id >= c.n_vocab) return Errorf("prompt token {} is outside the vocabulary (0..{})", id, c.n_vocab - 1);
  }
  const size_t total = prompt.size() + static_cast<size_t>(std::max(opt.max_tokens, 0));
  if (total > static_cast<size_t>(c.n_ctx)) {
    return Errorf("prompt ({} tokens) plus {} new tokens exceeds the context length {}", prompt.size(),
                  opt.max_tokens, c.n_ctx);
  }
  GenerateStats stats;
  stats.num_prompt_tokens = prompt.size();
  Session session(model, total, opt.kv_dtype);
  Sampler sampler(opt.sampling);
  StreamDecoder decoder(tok);
  int64_t t0 = NowNs();
  std::span<const float> logits = session.Prefill(prompt);
  stats.prefill_ms = NsToMs(NowNs() - t0);
  t0 = NowNs();
  for (int i = 0; i < opt.max_tokens; ++i) {
    TokenEvent ev;
    if (opt.logprobs > 0) ev.top = TopLogprobs(logits, opt.logprobs);
    ev.id = sampler.Sample(logits);
    const bool eos = tok.IsEndOfGeneration(ev.id) && !opt.ignore_eos;
    ev.text = eos ? decoder.Flush() : decoder.Push(ev.id);
    if (i + 1 == opt.max_tokens) ev.text += decoder.Flush();
    ++stats.num_generated_tokens;
    if (!on_token(ev) || eos) break;
    if (i + 1 < opt.max_tokens) logits = session.Decode(ev.id);
  }
  stats.decode_ms = NsToMs(NowNs() - t0);
  return stats;
}

}  // namespace pc
