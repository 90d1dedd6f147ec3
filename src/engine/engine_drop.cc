// A cache hit ahead of the step in progress and of other prompts' chunks
// (engine.h, StepInFlight). Without this, a hit arriving while the server
// prefills misses waits for the rest of the step in progress, then rides a
// whole step of their chunks: on a 2-core Zen 5 replaying mooncake at its
// native level, the hits' first tokens took 31% of the misses' (37 ms
// against 112 ms at p50) though their own prefill is a few milliseconds.
#include <algorithm>
#include <utility>

#include "base/clock.h"
#include "engine/engine.h"
#include "engine/engine_active.h"

namespace pc {

// First come, first served admission keeps arrival order in steps too.
bool Engine::Expediting() const { return opt_.drop_steps_for_hits && opt_.admission == Admission::kCacheAware; }

// Requires mu_.
bool Engine::Expedites(const WorkItem& w) const {
  if (w.decode || !w.last_prompt_chunk) return false;
  const Active& a = *active_.at(w.id);
  // A first chunk (nothing computed past what the cache gave) of a fresh
  // prompt, no longer than the cached part.
  return a.num_preemptions == 0 && a.seq && a.seq->num_computed() == a.num_cached && a.num_cached >= w.num_tokens;
}

// Requires mu_. A step holding an expediting chunk holds the decodes and
// such chunks only: the hit's first token does not wait for other prompts'
// chunks, which go on in the next step.
void Engine::KeepExpedited(std::vector<WorkItem>& work) const {
  if (!Expediting()) return;
  // Loops, not predicates: the thread-safety analysis does not see mu_ held
  // inside a lambda.
  std::vector<WorkItem> kept;
  bool any = false;
  for (const WorkItem& w : work) {
    const bool expedites = Expedites(w);
    any = any || expedites;
    if (w.decode || expedites) kept.push_back(w);
  }
  if (any) work = std::move(kept);
}

Engine::StepInFlight Engine::Watch(const std::vector<WorkItem>& work, const StepShape& shape) const {
  StepInFlight f;
  f.t0_ns = NowNs();
  f.arrivals = arrivals_admitted_;
  f.droppable = Expediting() && opt_.max_step_ms > 0 && undroppable_steps_ == 0 &&
                model_.numerics() == Numerics::kPrecise && step_budget_.knows_prefill_cost();
  if (f.droppable) f.predicted_ms = step_budget_.StepMs(shape);
  for (const WorkItem& w : work) f.ids.push_back(w.id);
  return f;
}

// On the loop thread between two layers of the step's forward pass; false
// drops the step. Only requests that arrived since the last look cost more
// than an atomic load.
bool Engine::KeepStep(StepInFlight& f) {
  const uint64_t seen = arrivals_.load(std::memory_order_acquire);
  if (seen == f.arrivals) return true;
  f.arrivals = seen;
  std::vector<uint64_t> memo;
  bool drop = false;
  {
    MutexLock lock(mu_);
    // What the next step would admit, now: the pool's blocks of the step in
    // progress are reserved, and its sequences have not advanced.
    StartAdmitted(NowNs());
    memo = std::exchange(memo_ready_, {});
    drop = f.droppable && DropPays(f);
  }
  EmitFromMemo(std::move(memo));  // no forward pass needed for these
  return !drop;
}

// Requires mu_. Whether the next step would hold expediting chunks of
// requests outside the step in progress, and that step (priced as it would
// run: the decodes and every expediting chunk, those of the step in
// progress included) pays.
bool Engine::DropPays(const StepInFlight& f) {
  std::vector<WorkItem> plan = scheduler_.PlanStep(step_budget_);
  KeepExpedited(plan);
  std::vector<Active*> acts;
  bool any = false;
  for (const WorkItem& w : plan) {
    acts.push_back(active_.at(w.id).get());
    any = any || (Expedites(w) && std::find(f.ids.begin(), f.ids.end(), w.id) == f.ids.end());
  }
  if (!any) return false;
  const double elapsed_ms = NsToMs(NowNs() - f.t0_ns);
  return DropStepPays(elapsed_ms, f.predicted_ms, step_budget_.StepMs(ShapeOf(plan, acts)), opt_.max_step_ms);
}

}  // namespace pc
