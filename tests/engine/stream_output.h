// What an engine request streamed, read to its done event, and the
// requests that produce it: the tests of src/engine compare these across
// runs (cached, drafted, batched, ...).
#pragma once
#include <optional>
#include <utility>
#include <vector>

#include "base/check.h"
#include "engine/engine.h"

namespace pc::test {

struct Output {
  std::vector<int32_t> ids;
  std::vector<std::vector<std::pair<int32_t, float>>> tops;  // top logprobs per token
  FinishReason finish = FinishReason::kError;
  size_t num_cached = 0, drafted = 0, accepted = 0;
};

// Reads s to its done event (each wait at most a minute).
inline Output Drain(RequestStream& s) {
  Output o;
  for (;;) {
    std::optional<StreamEvent> ev = s.Next(60000);
    PC_CHECK(ev.has_value());
    if (ev->done) {
      o.finish = ev->finish;
      o.num_cached = ev->num_cached_tokens;
      o.drafted = ev->num_draft_tokens;
      o.accepted = ev->num_accepted_draft_tokens;
      return o;
    }
    o.ids.push_back(ev->token);
    o.tops.push_back(ev->top);
  }
}

// A deterministic prompt of n tokens (1, then ids 3..502 varying with i).
inline std::vector<int32_t> Prompt(int i, size_t n) {
  std::vector<int32_t> p = {1};
  for (size_t k = 1; k < n; ++k) p.push_back(static_cast<int32_t>(3 + (i * 131 + k * 17 + k * k) % 500));
  return p;
}

// n greedy tokens to the end (end of generation never sampled), with top
// logprobs to compare.
inline EngineRequest Greedy(std::vector<int32_t> prompt, int n, int top_logprobs = 2) {
  EngineRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = n;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  r.top_logprobs = top_logprobs;
  return r;
}

}  // namespace pc::test
