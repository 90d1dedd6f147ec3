// The step-time budget against a simulated machine whose step costs are
// known: it learns them from its own steps and keeps steps near the target.
#include <gtest/gtest.h>

#include "sched/step_budget.h"

namespace pc {
namespace {

// A machine: 1 ms fixed, 0.5 ms per decode sequence, 0.2 ms per prefill token.
double StepMs(size_t n_decode, size_t n_prefill) { return 1.0 + 0.5 * n_decode + 0.2 * n_prefill; }

TEST(StepBudget, NoTargetOrNoDecodeTakesTheWholeStep) {
  StepBudget off(StepBudgetOptions{0, 256, 16});
  EXPECT_EQ(off.PrefillTokens(4), 252u);
  StepBudget on(StepBudgetOptions{30, 256, 16});
  EXPECT_EQ(on.PrefillTokens(0), 256u);  // nobody is waiting on this step
}

TEST(StepBudget, LearnsTheCostsAndHoldsStepsNearTheTarget) {
  StepBudget b(StepBudgetOptions{30, 256, 16});
  const size_t n_decode = 8;
  EXPECT_EQ(b.PrefillTokens(n_decode), 16u);  // nothing measured yet: the minimum
  b.Observe(n_decode, 0, StepMs(n_decode, 0));  // a decode-only step
  double last_ms = 0;
  for (int step = 0; step < 40; ++step) {
    const size_t p = b.PrefillTokens(n_decode);
    last_ms = StepMs(n_decode, p);
    b.Observe(n_decode, p, last_ms);
    if (step % 5 == 0) b.Observe(n_decode, 0, StepMs(n_decode, 0));
  }
  EXPECT_NEAR(last_ms, 30.0, 3.0);
  EXPECT_GT(b.PrefillTokens(n_decode), 100u);
  // More decoding sequences leave less room for prefill...
  EXPECT_LT(b.PrefillTokens(30), b.PrefillTokens(8));
  // ...until the decodes alone fill the target: then prefill gets as long as
  // they take (100 x 0.6 ms: about 300 tokens, here the 156 the step has left).
  EXPECT_EQ(b.PrefillTokens(100), 156u);
  EXPECT_EQ(b.PrefillTokens(250), 6u);  // the step's token budget still bounds it
  // The three budgets between tenants: past its share a tenant gets only
  // what the target leaves (with 100 decodes nothing: the scheduler's floor
  // of one token), far below it the step's whole token budget.
  const PrefillBudget many = b.Prefill(100);
  EXPECT_NEAR(static_cast<double>(b.PrefillTokensWithin(many.shared_ms, 0)), 300.0, 15.0);  // as long as the decodes: 60 ms / 0.2
  EXPECT_EQ(b.PrefillTokensWithin(many.within_target_ms, 0), 0u);
  EXPECT_EQ(many.room, 156u);
  EXPECT_EQ(many.shared, 156u);  // token caps: the step's tokens
  const PrefillBudget few = b.Prefill(8);
  EXPECT_EQ(b.PrefillTokensWithin(few.shared_ms, 0), b.PrefillTokens(8));
  EXPECT_EQ(few.within_target_ms, few.shared_ms);  // the target is not filled: no floor involved
  EXPECT_EQ(few.room, 248u);
}

// A decode step's time is mostly fixed (the weights are read once for the
// whole batch): 12 ms plus 2.5 ms a sequence, as a 1-thread replica of the
// 135M bench model measured. Learned from small batches (1 to 4 sequences),
// the budget must not take 13 sequences for 13 times one: a step with 13
// decodes then prefills for as long as they take (the floor), and the step
// stays near twice the decodes' 44.5 ms instead of several times that.
TEST(StepBudget, ADecodeStepsFixedCostIsNotChargedPerSequence) {
  auto step_ms = [](size_t n_decode, size_t n_prefill) { return 12.0 + 2.5 * n_decode + 0.8 * n_prefill; };
  StepBudget b(StepBudgetOptions{25, 256, 16});
  for (int i = 0; i < 20; ++i) {
    const size_t n = 1 + i % 4;
    b.Observe(n, 0, step_ms(n, 0));
    const size_t p = b.PrefillTokens(n);
    b.Observe(n, p, step_ms(n, p));
  }
  for (size_t n : {1, 4, 13, 40}) EXPECT_NEAR(b.DecodeMs(n), step_ms(n, 0), 0.5) << n;
  EXPECT_EQ(b.DecodeMs(0), 0.0);
  const size_t p = b.PrefillTokens(13);
  EXPECT_NEAR(step_ms(13, p), 2 * step_ms(13, 0), 5.0);  // was 13 x 14.5 ms of prefill: 233 ms
  EXPECT_NEAR(b.prefill_ms_per_token(), 0.8, 0.05);

  // Steps of one batch size only fix the mean: the first slope (everything
  // per sequence) stands, errs long, and never goes below zero cost.
  StepBudget one(StepBudgetOptions{25, 256, 16});
  for (int i = 0; i < 5; ++i) one.Observe(4, 0, step_ms(4, 0));
  EXPECT_NEAR(one.DecodeMs(4), step_ms(4, 0), 1e-9);
  EXPECT_NEAR(one.DecodeMs(8), 2 * step_ms(4, 0), 1e-9);
  EXPECT_EQ(one.DecodeMs(0), 0.0);
}

TEST(StepBudget, ASlowerMachineGetsSmallerChunks) {
  StepBudget fast(StepBudgetOptions{30, 512, 16}), slow(StepBudgetOptions{30, 512, 16});
  for (int i = 0; i < 30; ++i) {
    fast.Observe(4, 0, 2.0);
    fast.Observe(4, 100, 2.0 + 100 * 0.1);
    slow.Observe(4, 0, 8.0);
    slow.Observe(4, 100, 8.0 + 100 * 0.8);
  }
  EXPECT_NEAR(static_cast<double>(fast.PrefillTokens(4)), 280.0, 15.0);  // (30 - 2) / 0.1
  EXPECT_NEAR(static_cast<double>(slow.PrefillTokens(4)), 27.0, 3.0);    // (30 - 8) / 0.8
}

// A machine whose prompt tokens cost more deep in a prompt (attention reads
// every cached position): per token base_ms + attn_ms * position, a decode
// step fixed_ms + per_seq_ms a sequence + attn_ms per cached position.
struct Machine {
  double fixed_ms, per_seq_ms, base_ms, attn_ms;
  double StepMs(const StepShape& s) const {
    const double fixed = fixed_ms + (s.n_decode ? per_seq_ms * static_cast<double>(s.n_decode) : 0);
    return fixed + attn_ms * s.decode_context + base_ms * static_cast<double>(s.n_prefill) + attn_ms * s.prefill_positions;
  }
  // What CalibratePrefill measures: a 32-token chunk alone at each position,
  // per token (the fixed part spread over the chunk).
  std::vector<std::pair<double, double>> Profile() const {
    std::vector<std::pair<double, double>> out;
    for (double p : {0.0, 1024.0, 2048.0, 4096.0}) {
      const StepShape s{0, 0, 32, 32 * p + 16 * 31};
      out.emplace_back(p + 16, StepMs(s) / 32);
    }
    return out;
  }
};

// The AVX2 Zen 3 profile (2.2 ms a prompt token at position 128,
// 8.6 ms at 4,224; a one-block chunk alone about 48 ms) and a fast one.
constexpr Machine kSlow{10, 2, 2.0, 0.0016};
constexpr Machine kFast{2, 0.3, 0.15, 0.00004};

// One stream decodes at context 600 while a 4,500-token prompt is prefilled
// from 0 to the end; returns the steps' (prompt position, ms).
std::vector<std::pair<size_t, double>> Simulate(const Machine& m, bool calibrated, double target_ms) {
  StepBudget b(StepBudgetOptions{target_ms, 256, 16});
  if (calibrated) b.SetPrefillProfile(m.Profile());
  std::vector<std::pair<size_t, double>> steps;
  size_t pos = 0;
  double ctx = 600;
  b.Observe(StepShape{1, ctx, 0, 0}, m.StepMs(StepShape{1, ctx, 0, 0}));
  while (pos < 4500) {
    const PrefillBudget pb = b.Prefill(1, ctx);
    size_t n = pb.cost ? std::max<size_t>(1, b.PrefillTokensWithin(pb.shared_ms, pos)) : pb.shared;
    n = std::min({n, pb.shared, 4500 - pos});
    StepShape s{1, ctx, 0, 0};
    s.AddChunk(pos, n);
    const double ms = m.StepMs(s);
    b.Observe(s, ms);
    steps.emplace_back(pos, ms);
    pos += n;
    ctx += 1;
  }
  return steps;
}

TEST(StepBudget, ChunksArePricedByTheirDepthOnSlowAndFastMachines) {
  for (const Machine* m : {&kSlow, &kFast}) {
    for (bool calibrated : {true, false}) {
      const std::vector<std::pair<size_t, double>> steps = Simulate(*m, calibrated, 25);
      // Past the first few steps (learning), near the target at depth 0
      // and at 4,000 alike; one token at most over it where a single token
      // is coarse (the slow machine deep in the prompt: 8.4 ms a token).
      const double token_at_4000 = m->base_ms + m->attn_ms * 4000;
      double worst_shallow = 0, worst_deep = 0, best_deep = 1e9;
      for (size_t i = 5; i + 1 < steps.size(); ++i) {  // the last chunk is the prompt's remainder
        const auto [pos, ms] = steps[i];
        if (pos < 500) worst_shallow = std::max(worst_shallow, ms);
        if (pos >= 4000) worst_deep = std::max(worst_deep, ms), best_deep = std::min(best_deep, ms);
      }
      const std::string what = (m == &kSlow ? "slow" : "fast") + std::string(calibrated ? ", calibrated" : "");
      EXPECT_LE(worst_shallow, 25 * 1.15) << what;
      EXPECT_LE(worst_deep, std::max(25 * 1.1, 25 + token_at_4000 * 0.5)) << what;
      EXPECT_GE(best_deep, 25 - token_at_4000 - 2) << what;  // not starved either
    }
  }
  // The old floor, a block a step, would have cost the slow machine's
  // stream 16 x 8.4 + 12 ms = 147 ms a token deep in the prompt.
  EXPECT_GT(kSlow.StepMs(StepShape{1, 600, 16, 16 * 4000}), 140.0);
}

// Nothing decodes: the step is still what an arriving hit waits behind, so
// it keeps near the target, stretched (to 2x at most) only where the fixed
// part would take more than a tenth of it.
TEST(StepBudget, APrefillOnlyStepKeepsTheTarget) {
  for (const Machine* m : {&kSlow, &kFast}) {
    StepBudget b(StepBudgetOptions{25, 256, 16});
    b.SetPrefillProfile(m->Profile());
    for (size_t n : {1, 2, 3}) b.Observe(StepShape{n, 0, 0, 0}, m->StepMs(StepShape{n, 0, 0, 0}));
    size_t pos = 0;
    double worst = 0;
    for (int i = 0; i < 40; ++i) {
      const PrefillBudget pb = b.Prefill(0);
      const size_t n = std::max<size_t>(1, b.PrefillTokensWithin(pb.shared_ms, pos));
      StepShape s;
      s.AddChunk(pos, n);
      const double ms = m->StepMs(s);
      b.Observe(s, ms);
      if (i >= 3) worst = std::max(worst, ms);
      pos += n;
    }
    // Stretched until the one-token step is a tenth of it, at most 2x target.
    const double bound = std::max(25.0, std::min(10 * (m->fixed_ms + m->per_seq_ms), 50.0)) * 1.2;
    EXPECT_LE(worst, bound) << (m == &kSlow ? "slow" : "fast");
    EXPECT_GT(pos, 40u);  // more than a token a step
  }
}

// A machine whose chunks also pay a pass over the cached positions before
// them (the K/V read and widened once per chunk, however long): bench-135m
// on a 2-core Zen 5 measured about 2.3 ms per 1,000 positions, against
// 2 ms a token deep in a long chunk.
struct PassMachine {
  Machine m;
  double pass_ms;
  double StepMs(const StepShape& s) const { return m.StepMs(s) + pass_ms * s.chunk_depth; }
  std::vector<std::pair<double, double>> Profile() const {  // 32-token chunks, as CalibratePrefill
    std::vector<std::pair<double, double>> out;
    for (double p : {0.0, 1024.0, 2048.0, 4096.0}) {
      StepShape s;
      s.AddChunk(static_cast<size_t>(p), 32);
      out.emplace_back(p + 16, StepMs(s) / 32);
    }
    return out;
  }
};

// A prompt deep in a conversation (425 new tokens after 4,736 cached) while
// another request waits: with the pass priced, its steps grow with its depth
// until the pass and the fixed part are a tenth of each, but to at most 2x
// the target (what the waiting request may wait behind), and it takes less
// than at the target, where the passes double the time. Alone (nothing
// else running or waiting) it takes whole steps: at most ~15% more than one
// unbounded chunk. With a stream decoding, the steps keep the target.
TEST(StepBudget, AChunksKvPassIsPricedAtItsDepth) {
  const PassMachine pm{Machine{3.3, 0.2, 0.9, 0.0002}, 0.0023};
  auto run = [&](bool priced, size_t n_decode, double* worst_ms, bool lone = false) {
    StepBudget b(StepBudgetOptions{25, 256, 16});
    if (priced) b.SetKvPass(pm.pass_ms, 32);
    b.SetPrefillProfile(pm.Profile());
    for (size_t n : {1, 2, 3}) b.Observe(StepShape{n, 0, 0, 0}, pm.StepMs(StepShape{n, 0, 0, 0}));
    size_t pos = 4736;
    double total = 0;
    *worst_ms = 0;
    while (pos < 4736 + 425) {
      const double ctx = n_decode ? 600.0 : 0.0;
      const PrefillBudget pb = b.Prefill(n_decode, ctx, pos, lone);
      size_t n = pb.cost ? std::max<size_t>(1, b.PrefillTokensWithin(pb.shared_ms, pos)) : pb.shared;
      n = std::min({n, pb.room, 4736 + 425 - pos});
      StepShape s{n_decode, ctx, 0, 0};
      s.AddChunk(pos, n);
      const double ms = pm.StepMs(s);
      b.Observe(s, ms);
      *worst_ms = std::max(*worst_ms, ms);
      total += ms;
      pos += n;
    }
    return total;
  };
  StepShape whole;
  whole.AddChunk(4736, 425);
  const double unbounded = pm.StepMs(whole);
  double worst = 0;
  const double priced = run(true, 0, &worst);
  EXPECT_LE(worst, 2 * 25 * 1.05);  // an arriving request waits at most 2x the target
  const double unpriced = run(false, 0, &worst);
  EXPECT_GT(unpriced, 1.5 * unbounded);
  EXPECT_LT(priced, 0.9 * unpriced);
  EXPECT_LE(run(true, 0, &worst, true), 1.15 * unbounded);  // alone: whole steps
  // With a stream decoding the chunks keep the step near the target.
  run(true, 1, &worst);
  EXPECT_LE(worst, 25 * 1.15);
  // A lone prompt (nothing else running or waiting) takes the step's tokens.
  StepBudget b(StepBudgetOptions{25, 256, 16});
  b.SetKvPass(pm.pass_ms, 32);
  b.SetPrefillProfile(pm.Profile());
  b.Observe(StepShape{1, 0, 0, 0}, pm.StepMs(StepShape{1, 0, 0, 0}));
  const PrefillBudget lone = b.Prefill(0, 0, 4736, true);
  EXPECT_EQ(lone.shared, 256u);
  EXPECT_EQ(lone.cost, nullptr);
  EXPECT_NE(b.Prefill(0, 0, 4736, false).cost, nullptr);
  EXPECT_NE(b.Prefill(1, 600, 4736, true).cost, nullptr);  // a decode in the step: bounded
}

// Dropping a step for an arriving cache hit: only when the hit's own step
// (which carries the step's decodes) ends before the step in progress
// would; no target, never.
TEST(StepBudget, AStepIsDroppedForAHitOnlyWhenItPays) {
  // elapsed, predicted, the hit's step, target
  EXPECT_TRUE(DropStepPays(5, 25, 6, 25));     // 20 ms left against 6: the decodes' tokens at 11 ms, not 25
  EXPECT_FALSE(DropStepPays(20, 25, 6, 25));   // 5 ms left: the hit waits less than its own step
  EXPECT_TRUE(DropStepPays(15, 40, 12, 25));   // a step past the target: tokens at 27 ms, not 40
  EXPECT_FALSE(DropStepPays(30, 40, 12, 25));  // 10 ms left against 12
  EXPECT_TRUE(DropStepPays(90, 140, 10, 25));  // a lone prompt's long step: 50 ms left
  EXPECT_FALSE(DropStepPays(135, 140, 10, 25));
  EXPECT_FALSE(DropStepPays(5, 140, 10, 0));  // no target: no trade
  EXPECT_FALSE(DropStepPays(0, 6, 6, 25));    // equal: nothing gained
}

// Pausing (the hits' step runs inside the step in progress, nothing lost)
// when what the hits gain exceeds what the step's decodes and ending prompts
// lose; else dropping (a step with decodes, when that pays) or waiting.
// Steps here run past twice the target with the pause (the budget below).
TEST(StepBudget, AStepPausesForAHitWhenItsDecodesAndEndingPromptsLoseLess) {
  using H = HitArrival;
  // elapsed, predicted, paused so far, decodes, prompts ending, pause step, drop step, droppable, target
  EXPECT_EQ(ForHitArrival(124, 130, 0, 0, 0, 9, 9, true, 25), H::kPause);   // a lone prompt's chunk: 6 ms gained, none lose
  EXPECT_EQ(ForHitArrival(129.9, 130, 0, 0, 0, 9, 9, true, 25), H::kPause);
  EXPECT_EQ(ForHitArrival(131, 130, 0, 0, 0, 9, 9, true, 25), H::kWait);   // past its prediction: nothing to gain
  // An ending prompt's first token has waited at least the step (130 ms):
  // 9 ms more is 7% of it, while the hit would wait 6 ms on its own 9
  // (67%): paused; so with four such prompts (28% against 333%). The hit
  // gaining 0.5 ms (6%) is not worth one prompt's 7%; 3 ms (33%) is worth
  // four prompts' 28%, 2.4 ms (27%) is not.
  EXPECT_EQ(ForHitArrival(124, 130, 0, 0, 1, 9, 9, true, 25), H::kPause);
  EXPECT_EQ(ForHitArrival(100, 130, 0, 0, 1, 9, 9, true, 25), H::kPause);
  EXPECT_EQ(ForHitArrival(100, 130, 0, 0, 4, 9, 9, true, 25), H::kPause);
  EXPECT_EQ(ForHitArrival(129.5, 130, 0, 0, 1, 9, 9, true, 25), H::kWait);
  EXPECT_EQ(ForHitArrival(127, 130, 0, 0, 4, 9, 9, true, 25), H::kPause);  // 3 * 130 = 390 > 4 * 81 = 324
  EXPECT_EQ(ForHitArrival(127.6, 130, 0, 0, 4, 9, 9, true, 25), H::kWait); // 2.4 * 130 = 312 < 324
  EXPECT_EQ(ForHitArrival(62.4, 68.9, 0, 0, 1, 6.9, 6.9, true, 25), H::kPause);  // the replay's 6-token hit (step_budget.h)
  EXPECT_EQ(ForHitArrival(100, 130, 0, 0, 0, 9, 9, false, 25), H::kPause); // pausing loses nothing: not a drop
  // With decodes: each one's next token waits for the hits' step too.
  EXPECT_EQ(ForHitArrival(5, 48, 0, 2, 0, 4, 6, true, 25), H::kPause);     // 43 gained against 2 x 4
  EXPECT_EQ(ForHitArrival(5, 48, 0, 2, 0, 4, 6, false, 25), H::kPause);    // not droppable (just after a drop): still pauses
  EXPECT_EQ(ForHitArrival(41, 48, 0, 2, 0, 4, 6, true, 25), H::kDrop);     // 7 gained against 8 paused; dropped, 1
  EXPECT_EQ(ForHitArrival(43, 48, 0, 2, 0, 4, 6, true, 25), H::kWait);     // 5: neither pays
  EXPECT_EQ(ForHitArrival(28, 48, 0, 4, 1, 6, 8, true, 25), H::kDrop);     // 20 against 30 paused; dropped, the hit waits 8 not 20
  EXPECT_EQ(ForHitArrival(28, 48, 0, 4, 1, 6, 8, false, 25), H::kWait);
  EXPECT_EQ(ForHitArrival(26, 49, 0, 1, 0, 8.5, 9, true, 25), H::kPause);  // the replay's 8-token hit (step_budget.h)
  EXPECT_EQ(ForHitArrival(5, 140, 0, 0, 0, 9, 9, true, 0), H::kWait);      // no target: no trade
}

// What remains of a step is read off its progress once a tenth of its
// layers are done: a step slower than predicted still has its layers left.
TEST(StepBudget, AStepsTimeFollowsItsProgress) {
  EXPECT_DOUBLE_EQ(StepMsByProgress(142.8, 5, 0.0), 142.8);   // nothing done: the prediction
  EXPECT_DOUBLE_EQ(StepMsByProgress(142.8, 10, 0.05), 142.8); // too little done to rate
  EXPECT_DOUBLE_EQ(StepMsByProgress(142.8, 156.8, 0.8), 196.0);
  EXPECT_DOUBLE_EQ(StepMsByProgress(100, 30, 0.5), 60.0);     // faster than predicted: ends sooner
  EXPECT_DOUBLE_EQ(StepMsByProgress(100, 30, 1.5), 100.0);    // no such share: the prediction
  // 2026-12-07: a hit 156.8 ms into a step predicted at 142.8 ms, 80% of its
  // layers done, one prompt ending in it; the hit's own step 10.9 ms. By the
  // prediction the step was over (the hit waited 12.8 ms for its end); by
  // its progress 39 ms remain, worth a pause.
  using H = HitArrival;
  EXPECT_EQ(ForHitArrival(156.8, 142.8, 0, 0, 1, 10.9, 10.9, true, 25), H::kWait);
  EXPECT_EQ(ForHitArrival(156.8, StepMsByProgress(142.8, 156.8, 0.8), 0, 0, 1, 10.9, 10.9, true, 25), H::kPause);
}

// A pause that brings the step's decodes their next token within twice the
// target (kPauseBudgetTargets), the pauses so far counted, is taken whatever
// the decodes lose: that wait is inside what a step may cost them, and the
// hit would wait the rest of the step.
TEST(StepBudget, AStepPausesForAHitWhileItsDecodesStayWithinTheBudget) {
  using H = HitArrival;
  // elapsed, predicted, paused so far, decodes, prompts ending, pause step, drop step, droppable, target
  EXPECT_EQ(ForHitArrival(18.6, 25, 0, 1, 0, 10.5, 13, true, 25), H::kPause);  // 2026-12-07: the hit waited 6.4 ms
  EXPECT_EQ(ForHitArrival(18, 25, 0, 2, 0, 4, 6, true, 25), H::kPause);       // tokens at 29 ms, not 25: nothing lost
  EXPECT_EQ(ForHitArrival(20, 25, 0, 2, 0, 4, 6, true, 25), H::kPause);       // 5 gained
  EXPECT_EQ(ForHitArrival(5, 25, 0, 4, 1, 6, 8, true, 25), H::kPause);        // 31 ms, not a drop of 5 ms of work
  EXPECT_EQ(ForHitArrival(18, 25, 0, 2, 0, 25, 27, true, 25), H::kPause);     // exactly twice the target
  EXPECT_EQ(ForHitArrival(18, 25, 0, 2, 0, 25.5, 27, true, 25), H::kWait);    // past it: 7 gained against 51
  EXPECT_EQ(ForHitArrival(18, 25, 20, 1, 0, 10, 12, true, 25), H::kWait);     // two pauses so far: 55 ms; 7 against 10
  EXPECT_EQ(ForHitArrival(10, 25, 20, 1, 0, 10, 12, true, 25), H::kPause);    // 15 gained against 10
  EXPECT_EQ(ForHitArrival(26, 25, 0, 1, 0, 4, 6, true, 25), H::kWait);        // past its prediction
  EXPECT_EQ(ForHitArrival(5, 25, 0, 1, 0, 4, 6, true, 0), H::kWait);          // no target
}

}  // namespace
}  // namespace pc
