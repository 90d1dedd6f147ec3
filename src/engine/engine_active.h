// The engine's record of one request (engine.cc and the files that hold the
// rest of the Engine's members: engine_report.cc, engine_drafts.cc).
// Internal to src/engine. Thread-safety: touched only by the loop thread once
// inserted (Submit inserts under Engine::mu_).
#pragma once
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/stop_matcher.h"
#include "tokenizer/detokenizer.h"

namespace pc {

// A request from submission to its done event. Touched only by the loop
// thread once inserted (Submit inserts under mu_).
struct Engine::Active {
  Active(uint64_t id_, EngineRequest r, std::shared_ptr<RequestProgress> p, const Tokenizer& tok)
      : id(id_), req(std::move(r)), progress(std::move(p)), sampler(req.sampling), decoder(tok), stop(req.stop),
        draft(static_cast<size_t>(std::max(req.draft_tokens, 0))) {
    if (req.grammar && req.grammar_trigger.empty()) grammar = std::make_unique<structured::SeqMatcher>(req.grammar.get());
  }
  uint64_t id;
  EngineRequest req;
  // Its tokens (the prompt, then every generated token: what a preempted
  // sequence prefills again when it resumes) and how many have K/V: the
  // record the scheduler and its cache sequence share (request_progress.h).
  std::shared_ptr<RequestProgress> progress;
  std::vector<int32_t>& tokens() { return progress->tokens; }
  const std::vector<int32_t>& tokens() const { return progress->tokens; }
  size_t num_generated() const { return progress->tokens.size() - req.prompt.size(); }
  // Chained block hashes of `tokens` under the salt as last queued: the
  // prompt's, computed once at Submit, until a preemption appends the
  // generated tokens (their first entries are still the prompt's, which the
  // request log prints). The scheduler, the tier lookup and the prefix cache
  // use them, so a prompt is hashed once on its way in.
  std::vector<Hash128> keys;
  size_t num_preemptions = 0;
  std::shared_ptr<RequestStream> stream = std::make_shared<RequestStream>();
  std::unique_ptr<CachedSequence> seq;
  Sampler sampler;
  StreamDecoder decoder;
  StopMatcher stop;
  int64_t arrival_ns = 0, admit_ns = 0, last_token_ns = 0;
  int32_t last_token = -1;
  size_t num_cached = 0;
  RequestTimings timings;
  bool loading = false;  // waiting for its prefix from the spill tiers
  std::vector<float> memo_logits;  // its first token's logits, from LogitsMemo (EmitFromMemo)
  std::unique_ptr<structured::SeqMatcher> grammar;  // the sentence so far (req.grammar, once triggered)
  std::string trigger_tail;  // a waiting grammar: the output's last bytes, searched for the trigger
  std::map<std::string, size_t> cached_by_tier;
  std::map<std::string, double> tier_load_ms;
  DraftController draft;
  size_t num_drafted = 0, num_accepted = 0;
};

}  // namespace pc
