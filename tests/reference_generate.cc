#include "reference_generate.h"

#include "base/check.h"
#include "base/clock.h"
#include "tokenizer/detokenizer.h"

namespace pc {

double GenerateStats::mean_itl_ms() const {
  if (itl_ms.empty()) return 0;
  double s = 0;
  for (double v : itl_ms) s += v;
  return s / static_cast<double>(itl_ms.size());
}

Result<GenerateStats> Generate(Model& model, const Tokenizer& tok, std::span<const int32_t> prompt,
                               const GenerateOptions& opt,
                               const std::function<bool(const TokenEvent&)>& on_token) {
  const size_t total = prompt.size() + static_cast<size_t>(std::max(opt.max_tokens, 0));
  if (total > static_cast<size_t>(model.config().n_ctx)) {
    return Errorf("prompt ({} tokens) plus {} new tokens exceeds the context length {}", prompt.size(),
                  opt.max_tokens, model.config().n_ctx);
  }
  Session session(model, std::max<size_t>(total, 1), opt.kv_dtype);
  return Generate(model, tok, session, prompt, opt, on_token);
}

Result<GenerateStats> Generate(Model& model, const Tokenizer& tok, KvSequence& seq,
                               std::span<const int32_t> prompt, const GenerateOptions& opt,
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
  PC_CHECK(seq.num_computed() < prompt.size());  // at least one token computes the logits
  GenerateStats stats;
  stats.num_prompt_tokens = prompt.size();
  stats.num_cached_tokens = seq.num_computed();
  stats.num_prefill_tokens = prompt.size() - seq.num_computed();
  Sampler sampler(opt.sampling);
  StreamDecoder decoder(tok);
  std::vector<float> logits_buf;
  const int64_t t_start = NowNs();
  PC_ASSIGN_OR_RETURN(std::span<const float> logits, RunBatch(model, seq, prompt.subspan(seq.num_computed()), &logits_buf));
  stats.prefill_ms = NsToMs(NowNs() - t_start);
  int64_t t_prev = t_start;
  for (int i = 0; i < opt.max_tokens; ++i) {
    TokenEvent ev;
    if (opt.logprobs > 0) ev.top = TopLogprobs(logits, opt.logprobs);
    ev.id = sampler.Sample(logits);
    const int64_t now = NowNs();
    if (i == 0) stats.ttft_ms = NsToMs(now - t_start);
    else stats.itl_ms.push_back(NsToMs(now - t_prev));
    t_prev = now;
    const bool eos = tok.IsEndOfGeneration(ev.id) && !opt.ignore_eos;
    ev.text = eos ? decoder.Flush() : decoder.Push(ev.id);
    if (i + 1 == opt.max_tokens) ev.text += decoder.Flush();
    ++stats.num_generated_tokens;
    if (!on_token(ev) || eos) break;
    if (i + 1 < opt.max_tokens) {
      PC_ASSIGN_OR_RETURN(logits, RunBatch(model, seq, {&ev.id, 1}, &logits_buf));
    }
  }
  stats.decode_ms = NsToMs(t_prev - t_start) - stats.ttft_ms;
  return stats;
}

}  // namespace pc
