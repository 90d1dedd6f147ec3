// Prompt-lookup drafts inside a step (lookup_draft.h has the search and the
// controller): which decodes carry drafts, and how a verified chunk's rows
// turn into tokens.
#include <algorithm>

#include "engine/engine_active.h"

namespace pc {

std::vector<size_t> Engine::AddDrafts(const std::vector<WorkItem>& work, const std::vector<Active*>& acts,
                                      std::vector<std::vector<int32_t>>& chunks, StepShape& shape) {
  std::vector<size_t> drafted(work.size(), 0);
  size_t step_tokens = shape.n_decode + shape.n_prefill;
  if (shape.n_decode == 0 || step_tokens >= opt_.max_batch_tokens) return drafted;
  // One more verified token against this step's time per sequence (see
  // DraftController); an unpriced CPU starts from a typical ratio.
  const bool priced = step_budget_.knows_prefill_cost();
  const double decode_ms = step_budget_.DecodeMs(shape.n_decode, shape.decode_context);
  const double cost_ratio = priced && decode_ms > 0
                                ? step_budget_.prefill_ms_per_token() * static_cast<double>(shape.n_decode) / decode_ms
                                : 0.3;
  // Drafts never take a step past the target that the step's own work keeps.
  const double limit_ms = std::max(opt_.max_step_ms, priced ? step_budget_.StepMs(shape) : 0.0);
  for (size_t i = 0; i < work.size(); ++i) {
    Active& a = *acts[i];
    if (!work[i].decode || a.req.draft_tokens <= 0) continue;
    const size_t left = static_cast<size_t>(a.req.max_tokens) - a.num_generated();  // >= 1: it decodes now
    size_t k = std::min({a.draft.Want(cost_ratio), left - 1, opt_.max_batch_tokens - step_tokens});
    if (k == 0) continue;
    const DraftOptions lookup{static_cast<size_t>(a.req.draft_tokens)};
    std::vector<int32_t> d = FindLookupDraft(a.tokens(), lookup, k);
    const size_t pos = a.seq->num_computed();
    while (!d.empty() && opt_.max_step_ms > 0 && priced) {
      StepShape with = shape;
      with.AddChunk(pos + 1, d.size());
      if (step_budget_.StepMs(with) <= limit_ms) break;
      d.pop_back();
    }
    if (d.empty() || !a.seq->Reserve(pos + 1 + d.size()).ok()) continue;
    shape.AddChunk(pos + 1, d.size());
    step_tokens += d.size();
    drafted[i] = d.size();
    chunks[i].insert(chunks[i].end(), d.begin(), d.end());
  }
  return drafted;
}

// A drafted token counts as accepted when the model's own choice before it
// was that token, so its row's logits give the next one.
void Engine::VerifyDecode(Active& a, std::span<const int32_t> chunk, std::span<const float> logits, int64_t now_ns) {
  const size_t n_vocab = static_cast<size_t>(model_.config().n_vocab), drafted = chunk.size() - 1;
  size_t accepted = 0;
  bool alive = true;
  a.num_drafted += drafted;
  for (size_t j = 0; j < chunk.size(); ++j) {
    if (j > 0) ++accepted, ++a.num_accepted;
    {
      MutexLock lock(mu_);
      scheduler_.Advanced(a.id, 1);  // chunk[j] is the record's next token
    }
    a.seq->IndexComputed();
    const int32_t t = SampleAndEmit(a, logits.subspan(j * n_vocab, n_vocab), now_ns);
    if (t < 0) {
      alive = false;  // the request ended (and `a` with it)
      break;
    }
    if (j + 1 == chunk.size() || t != chunk[j + 1]) break;
  }
  metrics_.Add("promptcache_draft_tokens_total", "result=\"drafted\"", static_cast<double>(drafted));
  metrics_.Add("promptcache_draft_tokens_total", "result=\"accepted\"", static_cast<double>(accepted));
  if (alive) a.draft.Observe(drafted, accepted);
}
}  // namespace pc
