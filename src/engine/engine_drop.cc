// A cache hit ahead of the step in progress and of other prompts' chunks
// (engine.h, StepInFlight). Without this, a hit arriving while the server
// prefills misses waits for the rest of the step in progress, then rides a
// whole step of their chunks: on a 2-core Zen 5 replaying mooncake at its
// native level, the hits' first tokens took 31% of the misses' (37 ms
// against 112 ms at p50) though their own prefill is a few milliseconds.
// Dropping a step loses its work so far, and was worth it only when the
// rest of the step was longer than the hit's own: a hit 124 ms into a lone
// prompt's 139 ms step waited the remaining 15 ms. A step is now paused
// instead (nothing lost) whenever what the hit gains exceeds what the
// step's decodes and ending prompts lose, or the pause keeps the decodes'
// next token within twice the step target (ForHitArrival).
#include <algorithm>
#include <utility>

#include "base/check.h"
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
  f.watched = Expediting() && opt_.max_step_ms > 0 && model_.numerics() == Numerics::kPrecise &&
              step_budget_.knows_prefill_cost();
  f.droppable = f.watched && undroppable_steps_ == 0;
  if (f.watched) f.predicted_ms = step_budget_.StepMs(shape);
  for (const WorkItem& w : work) {
    f.ids.push_back(w.id);
    if (w.decode) ++f.decodes;
    else if (w.last_prompt_chunk) ++f.prompts_ending;
  }
  return f;
}

// On the loop thread between two stages of a layer of the step's forward pass; false
// drops the step. Only requests that arrived since the last look cost more
// than an atomic load.
bool Engine::KeepStep(StepInFlight& f) {
  const uint64_t seen = arrivals_.load(std::memory_order_acquire);
  if (seen == f.arrivals) return true;
  f.arrivals = seen;
  std::vector<uint64_t> memo;
  HitArrival action = HitArrival::kWait;
  std::vector<WorkItem> inside;
  {
    MutexLock lock(mu_);
    // What the next step would admit, now: the pool's blocks of the step in
    // progress are reserved, and its sequences have not advanced.
    StartAdmitted(NowNs());
    memo = std::exchange(memo_ready_, {});
    if (f.watched) action = ArrivalAction(f, &inside);
  }
  EmitFromMemo(std::move(memo));  // no forward pass needed for these
  if (action == HitArrival::kPause) RunInside(f, inside);
  return action != HitArrival::kDrop;
}

// Requires mu_. Whether the next step would hold expediting chunks of
// requests outside the step in progress, and what pays for them
// (ForHitArrival), each way priced as it would run: dropped, the decodes
// and every expediting chunk, those of the step in progress included;
// paused, the new chunks alone, which must find their blocks without
// preempting anyone (else the arrivals wait).
HitArrival Engine::ArrivalAction(const StepInFlight& f, std::vector<WorkItem>* paused_work) {
  std::vector<WorkItem> plan = scheduler_.PlanStep(step_budget_);
  KeepExpedited(plan);
  std::vector<Active*> acts, new_acts;
  std::vector<WorkItem> fresh;
  for (const WorkItem& w : plan) {
    acts.push_back(active_.at(w.id).get());
    if (Expedites(w) && std::find(f.ids.begin(), f.ids.end(), w.id) == f.ids.end()) {
      fresh.push_back(w);
      new_acts.push_back(acts.back());
    }
  }
  if (fresh.empty()) return HitArrival::kWait;
  const double elapsed_ms = NsToMs(NowNs() - f.t0_ns) - f.paused_ms;
  const double step_ms = StepMsByProgress(f.predicted_ms, elapsed_ms, model_.PassProgress());
  const HitArrival action = ForHitArrival(elapsed_ms, step_ms, f.paused_ms, f.decodes, f.prompts_ending,
                                          step_budget_.StepMs(ShapeOf(fresh, new_acts)),
                                          step_budget_.StepMs(ShapeOf(plan, acts)), f.droppable, opt_.max_step_ms);
  if (action != HitArrival::kPause) return action;
  for (const WorkItem& w : fresh) {
    CachedSequence& seq = *active_.at(w.id)->seq;
    if (!seq.Reserve(seq.num_computed() + w.num_tokens).ok()) return HitArrival::kWait;
  }
  *paused_work = std::move(fresh);
  return action;
}

// The paused step's forward pass waits on its own buffers (Model::Forward);
// this step runs and ends as any other (its tokens emitted, its time
// measured and logged apart), and is not watched itself: arrivals meanwhile
// are looked at when the paused pass goes on.
void Engine::RunInside(StepInFlight& f, const std::vector<WorkItem>& work) {
  std::vector<Active*> acts;
  {
    MutexLock lock(mu_);
    for (const WorkItem& w : work) acts.push_back(active_.at(w.id).get());
  }
  const StepShape shape = ShapeOf(work, acts);
  const std::string items = StepItems(work, acts);
  const int64_t t0 = NowNs();
  const std::optional<StepShape> ran = RunStep(work, acts, shape, nullptr);
  PC_CHECK(ran.has_value());  // unwatched steps are never dropped
  const double ms = NsToMs(NowNs() - t0);
  f.paused_ms += ms;
  AfterStep(items, shape, *ran, t0, ms);
  metrics_.Add("promptcache_steps_paused_total", "", 1);
  MutexLock lock(mu_);
  RefreshPoolSnapshot();
}

}  // namespace pc
