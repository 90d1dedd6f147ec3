// Cache-aware admission and the step's time: which waiting request goes
// first, and how far a step's prefill may run past the target.
#include <gtest/gtest.h>

#include <map>

#include "sched/cheap_first.h"
#include "sched/scheduler.h"
#include "sched/scheduler_test_util.h"

namespace pc {
namespace {

using sched_test::Chain;
using sched_test::Opts;
using sched_test::Req;

// Cache-aware admission (the default): cheapest predicted prefill first,
// within what the requests passed allow (a tenth of their wait plus
// their own prefill). The pool
// below holds 60 of request 9's 64 blocks.
PoolView HoldsMostOf(uint64_t hit_id) {
  PoolView v;
  v.cached_leading_blocks = [hit_id](const SchedRequest& r) { return r.id == hit_id ? size_t{60} : size_t{0}; };
  return v;
}

SchedRequest At(uint64_t id, size_t prompt, int64_t arrival_ms, uint64_t tenant = 0) {
  SchedRequest r = Req(id, prompt, 4);
  r.arrival_ns = arrival_ms * 1'000'000;
  r.tenant = tenant;
  return r;
}

constexpr int64_t kMs = 1'000'000;

TEST(Scheduler, AMostlyCachedPromptIsNotQueuedBehindMissesThatHaveWaited) {
  for (Admission mode : {Admission::kCacheAware, Admission::kFifo}) {
    SchedulerOptions o = Opts(256, 10000, 1, 64);
    o.admission = mode;
    Scheduler s(o);
    s.Submit(At(1, 1024, 0));
    ASSERT_EQ(s.Admit(0, HoldsMostOf(9)), std::vector<uint64_t>{1});  // the one running slot
    s.Submit(At(2, 1024, 1000));
    s.Submit(At(3, 1024, 2000));
    s.Submit(At(9, 1024, 3000));  // arrives last, 94% cached: 64 tokens to prefill
    s.Finish(1);
    // The misses have waited 37 and 38 s: a tenth of that is far more than
    // the hit's prefill. (Token counts stand for ms without a StepBudget.)
    const std::vector<uint64_t> next = s.Admit(40'000 * kMs, HoldsMostOf(9));
    ASSERT_EQ(next.size(), 1u);
    EXPECT_EQ(next[0], mode == Admission::kFifo ? 2u : 9u);
  }
  // A miss that has just arrived leaves a tenth of its own prefill: a
  // 1,024-token one lets the hit's 64 tokens go first, a 256-token one not.
  for (size_t miss_tokens : {1024, 256}) {
    Scheduler fresh(Opts(256, 10000, 1, 64));
    fresh.Submit(At(1, 1024, 0));
    fresh.Admit(0, HoldsMostOf(9));
    fresh.Submit(At(2, miss_tokens, 10));
    fresh.Submit(At(9, 1024, 20));
    fresh.Finish(1);
    EXPECT_EQ(fresh.Admit(30 * kMs, HoldsMostOf(9)), std::vector<uint64_t>{miss_tokens == 1024 ? 9u : 2u});
  }
}

// Tenants keep their turns: the k-th waiting request of a tenant ranks k
// plus its running ones, whatever the cost; cheap-first orders within a rank.
TEST(Scheduler, CacheAwareOrderKeepsTenantTurns) {
  Scheduler s(Opts(256, 10000, 8, 64));
  s.Submit(At(1, 1024, 0, /*tenant=*/1));
  s.Submit(At(2, 1024, 1000, 1));
  s.Submit(At(3, 1024, 2000, 2));
  s.Submit(At(9, 1024, 3000, 1));  // tenant 1's hit
  s.Submit(At(4, 1024, 4000, 2));
  // Rank 0: tenant 1's cheapest (9), tenant 2's first (3); rank 1: 1 and 4
  // (by arrival); rank 2: 2.
  EXPECT_EQ(s.Admit(100'000 * kMs, HoldsMostOf(9)), (std::vector<uint64_t>{9, 3, 1, 4, 2}));
}

// Prefill turns follow the same rule: a hit admitted while a miss that has
// waited is computing gets the step's chunk first.
TEST(Scheduler, AHitsRemainingPrefillGoesFirstInTheStep) {
  Scheduler s(Opts(256, 10000, 8, 64));
  s.Submit(At(1, 2048, 0));
  s.Admit(0, HoldsMostOf(9));
  s.Started(1, 0);
  s.Advanced(1, 64);
  s.Submit(At(9, 1024, 30'000));
  ASSERT_EQ(s.Admit(31'000 * kMs, HoldsMostOf(9)), std::vector<uint64_t>{9});
  s.Started(9, 960);
  const std::vector<WorkItem> w = s.Plan(size_t{100});
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].id, 9u);  // its 64 tokens left, then the miss gets the rest
  EXPECT_EQ(w[0].num_tokens, 64u);
  EXPECT_EQ(w[1].id, 1u);
  EXPECT_EQ(w[1].num_tokens, 36u);
}

// A step without decodes runs past the target for prefill speed (until its
// fixed part is a tenth of it), but once a prompt completes in it, its
// prefill grows no further than the target allows: that prompt's first token
// waits for the step's end.
TEST(Scheduler, AStepThatGivesAFirstTokenEndsAtTheTarget) {
  StepBudget b(StepBudgetOptions{25, 4096, 16});
  b.SetPrefillProfile({{0.0, 1.0}, {4096.0, 1.0}});  // 1 ms a prompt token at any depth
  for (size_t n : {1, 2, 3}) b.Observe(StepShape{n, 0, 0, 0}, 3.5 + 0.5 * static_cast<double>(n));
  const PrefillBudget pb = b.Prefill(0);
  ASSERT_NEAR(b.StepFixedMs(), 4.0, 0.01);
  ASSERT_NEAR(pb.shared_ms, 36.0, 0.5);  // 40 ms steps less their 4 ms fixed part
  Scheduler s(Opts(4096, 10000, 8, 64));
  s.Submit(At(1, 2048, 0));
  s.Admit(0, HoldsMostOf(9));
  s.Started(1, 0);
  std::vector<WorkItem> w = s.Plan(pb);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NEAR(static_cast<double>(w[0].num_tokens), 36.0, 1.0);  // alone, the miss takes the stretched step
  s.Submit(At(9, 1024, 30'000));
  ASSERT_EQ(s.Admit(31'000 * kMs, HoldsMostOf(9)), std::vector<uint64_t>{9});
  s.Started(9, 1014);
  w = s.Plan(pb);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].id, 9u);  // the hit's last 10 tokens: its first token at the step's end
  EXPECT_EQ(w[0].num_tokens, 10u);
  EXPECT_TRUE(w[0].last_prompt_chunk);
  EXPECT_EQ(w[1].id, 1u);
  EXPECT_NEAR(static_cast<double>(w[1].num_tokens), 11.0, 1.0);  // to the target's 21 ms, not 36
}

// A step without decodes is as long as its fixed part (the weights, and the
// K/V pass at its chunk's depth) allows, at the depth of the prompt whose
// turn comes first, not of a shallower one in prefill beside it: that one
// gets what the first leaves. Both orders, both admission policies.
TEST(Scheduler, AStepWithoutDecodesIsSizedAtTheDepthOfTheFirstTurn) {
  StepBudget b(StepBudgetOptions{25, 4096, 16});
  constexpr double kPassMs = 0.002;  // per cached position, once a chunk
  b.SetKvPass(kPassMs, 32);
  // 1 ms a token anywhere, plus a 32-token chunk's share of its pass.
  b.SetPrefillProfile({{0.0, 1.0}, {4096.0, 1.0 + kPassMs * 4096 / 32}});
  for (size_t n : {1, 2, 3}) b.Observe(StepShape{n, 0, 0, 0}, 3.5 + 0.5 * static_cast<double>(n));
  ASSERT_NEAR(b.StepFixedMs(), 4.0, 0.01);
  ASSERT_NEAR(b.PrefillOnlyStepMs(0), 40.0, 0.5);     // fixed part a tenth
  ASSERT_NEAR(b.PrefillOnlyStepMs(2048), 50.0, 0.01);  // 8.1 ms fixed: capped at twice the target
  for (Admission mode : {Admission::kCacheAware, Admission::kFifo}) {
    for (bool deep_first : {true, false}) {
      SchedulerOptions o = Opts(4096, 10000, 8, 64);
      o.admission = mode;
      Scheduler s(o);
      // The deep prompt has 100 tokens left, the shallow one 1,000: first
      // by cost (cache-aware) and, when it arrived first, by arrival.
      const uint64_t deep = deep_first ? 1 : 2, shallow = deep_first ? 2 : 1;
      ASSERT_EQ(s.Submit(At(1, deep_first ? 2148 : 1000, 0)), SubmitResult::kQueued);
      ASSERT_EQ(s.Submit(At(2, deep_first ? 1000 : 2148, 1)), SubmitResult::kQueued);
      s.Admit(2 * kMs);
      s.Started(deep, 2048);
      s.Started(shallow, 0);
      const bool expect_deep = deep_first || mode == Admission::kCacheAware;
      EXPECT_EQ(s.PrefillDepth(), expect_deep ? 2048u : 0u);
      const std::vector<WorkItem> w = s.PlanStep(b);
      ASSERT_FALSE(w.empty());
      EXPECT_EQ(w[0].id, expect_deep ? deep : shallow);
      // 46 ms of prefill at 2,048 (41 tokens and the 4.1 ms pass), not the
      // 36 ms a step at the shallow prompt's depth would give (31 there).
      const size_t depth = expect_deep ? 2048 : 0;
      const size_t expect = b.PrefillTokensWithin(b.PrefillOnlyStepMs(static_cast<double>(depth)) - 4.0, depth);
      EXPECT_EQ(w[0].num_tokens, expect) << (mode == Admission::kFifo ? "fifo" : "cache-aware");
      if (expect_deep) {
        EXPECT_GT(w[0].num_tokens, b.PrefillTokensWithin(b.PrefillOnlyStepMs(0) - 4.0, 2048) + 8);
      }
    }
  }
}

// While others decode, a short prompt whose whole prefill fits in a step of
// twice the target completes in one step (its first token is not put off by
// whole steps for its last tokens); a longer one is chunked to the target.
TEST(Scheduler, AShortPromptFinishesInOneStepOfAtMostTwiceTheTarget) {
  StepBudget b(StepBudgetOptions{25, 4096, 16});
  b.SetPrefillProfile({{0.0, 1.5}, {4096.0, 1.5}});  // 1.5 ms a prompt token at any depth
  for (size_t n : {1, 2, 3}) b.Observe(StepShape{n, 0, 0, 0}, 3.0 + 1.0 * static_cast<double>(n));
  const PrefillBudget pb = b.Prefill(2);
  ASSERT_NEAR(pb.shared_ms, 20.0, 0.01);  // 25 ms less two decodes' 5 ms
  ASSERT_NEAR(pb.finish_ms, 45.0, 0.01);  // 50 ms less the same
  for (const auto& [prompt, expect] : std::vector<std::pair<size_t, size_t>>{{13, 13}, {25, 25}, {30, 30}, {31, 13}, {200, 13}}) {
    Scheduler s(Opts(4096, 10000, 8, 64));
    for (uint64_t id : {1, 2}) ASSERT_EQ(s.Submit(Req(id, 4, 50)), SubmitResult::kQueued);
    s.Admit(0);
    s.Started(1, 0);
    s.Started(2, 0);
    for (const WorkItem& w : s.Plan()) s.Advanced(w.id, w.num_tokens);
    ASSERT_EQ(s.NumDecoding(), 2u);
    ASSERT_EQ(s.Submit(Req(3, prompt, 5)), SubmitResult::kQueued);
    s.Admit(0);
    s.Started(3, 0);
    const std::vector<WorkItem> w = s.Plan(pb);
    ASSERT_EQ(w.size(), 3u);
    EXPECT_TRUE(w[0].decode && w[1].decode);
    EXPECT_EQ(w[2].num_tokens, expect) << prompt << "-token prompt";  // 30 tokens: 45 ms; 31: over
    EXPECT_EQ(w[2].last_prompt_chunk, expect == prompt);
  }
  // Without decodes, once a prompt completes in the step no other stretches it.
  const PrefillBudget alone = b.Prefill(0);
  Scheduler s(Opts(4096, 10000, 8, 64));
  s.Submit(At(1, 10, 0));
  s.Submit(At(2, 30, 1));
  s.Admit(0);
  s.Started(1, 0);
  s.Started(2, 0);
  const std::vector<WorkItem> w = s.Plan(alone);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].num_tokens, 10u);
  EXPECT_LT(w[1].num_tokens, 30u);
}

// Prompts in prefill hold at most three quarters of the running slots; the
// last quarter admits only a prompt that costs no more than what each of
// them has left (cheap-first prefill would run it first): a hit is not kept
// queued while long prompts, which cheaper ones keep passing, hold every
// slot; another long prompt waits, though a slot is free.
TEST(Scheduler, TheLastQuarterOfSlotsIsForPromptsThatWouldPrefillFirst) {
  for (Admission mode : {Admission::kCacheAware, Admission::kFifo}) {
    SchedulerOptions o = Opts(64, 100000, 8, 32);
    o.admission = mode;
    Scheduler s(o);
    for (uint64_t id = 1; id <= 7; ++id) s.Submit(At(id, 1000 + id, 0));
    EXPECT_EQ(s.Admit(0, HoldsMostOf(9)).size(), 6u);
    s.Submit(At(9, 1000, 10));  // 960 of its tokens cached: 40 left
    EXPECT_EQ(s.Admit(20 * kMs, HoldsMostOf(9)), std::vector<uint64_t>{9});
    s.Submit(At(10, 30, 30));
    EXPECT_EQ(s.Admit(40 * kMs, HoldsMostOf(9)), std::vector<uint64_t>{10}) << "30 tokens: cheaper than any in prefill";
    EXPECT_EQ(s.num_running(), 8u);
    EXPECT_EQ(s.num_waiting(), 1u);  // the seventh long prompt
    // Prompts done with their prefill free their prefill slots: with a
    // running slot free, the long one goes.
    s.Started(1, 0);
    s.Advanced(1, 1001);
    EXPECT_TRUE(s.Admit(45 * kMs, HoldsMostOf(9)).empty());  // no running slot yet
    s.Started(9, 960);
    s.Advanced(9, 40);
    EXPECT_TRUE(s.Finish(10));
    EXPECT_EQ(s.Admit(50 * kMs, HoldsMostOf(9)), std::vector<uint64_t>{7});
  }
}

// With a step target, the reserved quarter also takes a prompt whose whole
// prefill fits in one step, though a prompt in prefill has even less left
// (here a 1-token prompt): a hit is not held a step for it. A long prompt
// still waits for a slot of its own.
TEST(Scheduler, TheReservedSlotsTakeAPromptThatFitsInOneStep) {
  StepBudget b(StepBudgetOptions{25, 4096, 16});
  b.SetPrefillProfile({{0.0, 1.0}, {4096.0, 1.0}});  // 1 ms a prompt token at any depth
  PoolView pool = HoldsMostOf(9);
  pool.cost = &b;
  Scheduler s(Opts(64, 100000, 8, 32));
  for (uint64_t id = 1; id <= 6; ++id) s.Submit(At(id, 1000 + id, 0));
  ASSERT_EQ(s.Admit(0, pool).size(), 6u);  // the open slots
  s.Submit(At(7, 1, 10));
  ASSERT_EQ(s.Admit(10 * kMs, pool), std::vector<uint64_t>{7});  // 1 ms: cheaper than any in prefill
  s.Submit(At(8, 1000, 20));
  s.Submit(At(9, 970, 21));  // 960 tokens cached: 10 ms left, more than the 1-token prompt's
  EXPECT_EQ(s.Admit(22 * kMs, pool), std::vector<uint64_t>{9});
  EXPECT_EQ(s.num_waiting(), 1u);  // the long one
  // Without a target the quarter keeps the stricter rule.
  StepBudget untimed(StepBudgetOptions{0, 4096, 16});
  untimed.SetPrefillProfile({{0.0, 1.0}, {4096.0, 1.0}});
  pool.cost = &untimed;
  Scheduler t(Opts(64, 100000, 8, 32));
  for (uint64_t id = 1; id <= 6; ++id) t.Submit(At(id, 1000 + id, 0));
  t.Admit(0, pool);
  t.Submit(At(7, 1, 10));
  t.Admit(10 * kMs, pool);
  t.Submit(At(9, 970, 21));
  EXPECT_TRUE(t.Admit(22 * kMs, pool).empty());
}

// A prompt held back by the reserved slots goes as soon as one in prefill
// is done with it, though nothing else changed (no arrival, no finish, no
// prefix or pool change: prompts that bypass the cache).
TEST(Scheduler, APromptHeldForTheReservedSlotsGoesWhenAPrefillEnds) {
  Scheduler s(Opts(64, 100000, 4, 8));
  for (uint64_t id = 1; id <= 4; ++id) {
    SchedRequest r = At(id, 1000 + id, 0);
    r.block_hashes.clear();
    s.Submit(std::move(r));
  }
  EXPECT_EQ(s.Admit(0).size(), 3u);
  s.Started(1, 0);
  s.Advanced(1, 1000);
  EXPECT_TRUE(s.Admit(1 * kMs).empty());
  s.Advanced(1, 1);
  EXPECT_EQ(s.Admit(2 * kMs), std::vector<uint64_t>{4});
}

// One running slot; a cheap hit (40 ms of prefill) arrives every
// `hit_every_ms`, and at 1 s a miss (5,000 tokens as 5,000 ms). Returns
// when the miss is admitted, or -1 if it never is within a minute.
int64_t MissAdmittedMs(Admission mode, int64_t hit_every_ms) {
  SchedulerOptions o = Opts(256, 100000, 1, 4096);
  o.admission = mode;
  Scheduler s(o);
  std::map<uint64_t, size_t> cached;  // id -> leading blocks held
  PoolView pool;
  pool.cached_leading_blocks = [&cached](const SchedRequest& r) { return cached.count(r.id) ? cached.at(r.id) : size_t{0}; };
  int64_t now_ms = 0, next_hit_ms = 0;
  bool miss_sent = false;
  uint64_t id = 100;
  while (now_ms < 60000) {
    for (; next_hit_ms <= now_ms; next_hit_ms += hit_every_ms) {
      if (!miss_sent && next_hit_ms >= 1000) {
        s.Submit(At(1, 5000, 1000));
        miss_sent = true;
      }
      cached[id] = 60;
      if (s.Submit(At(id++, 1000, next_hit_ms)) != SubmitResult::kQueued) return -2;
    }
    const std::vector<uint64_t> admitted = s.Admit(now_ms * kMs, pool);
    if (admitted.size() != 1) return -3;
    if (admitted[0] == 1) return now_ms;
    now_ms += 40;  // it runs, then frees the slot
    s.Finish(admitted[0]);
  }
  return -1;
}

// Hits alone overload the slot (one every 30 ms, 40 ms each): cheapest
// first would never admit the miss; first come, first served admits it
// after the 34 hits that arrived before it; cheap-first within the
// allowance (a tenth of its wait plus its own 5,000 ms) admits it so that
// its wait plus prefill is at most 1 / 0.9 of first come, first served's.
TEST(Scheduler, AMissIsNeverStarvedByAStreamOfHits) {
  const int64_t fifo = MissAdmittedMs(Admission::kFifo, 30);
  const int64_t aware = MissAdmittedMs(Admission::kCacheAware, 30);
  ASSERT_GT(fifo, 1000);
  ASSERT_GT(aware, 0) << "starved";
  EXPECT_GT(aware, fifo);  // hits went ahead of it
  EXPECT_LE(static_cast<double>(aware - 1000 + 5000), static_cast<double>(fifo - 1000 + 5000) / 0.9 + 40);
}

// A running prompt whose prefix two waiting requests wait for serves three
// requests with its prefill: it goes before an older miss of the same
// length (which has waited long enough to allow it).
TEST(Scheduler, APrefixOthersWaitForIsComputedFirst) {
  Scheduler s(Opts(256, 10000, 2, 64));
  s.Submit(At(1, 1024, 0));
  SchedRequest shared = At(2, 1024, 1000);
  shared.block_hashes = Chain(7, 64);
  s.Submit(shared);
  ASSERT_EQ(s.Admit(1000 * kMs), (std::vector<uint64_t>{1, 2}));
  s.Started(1, 0);
  s.Started(2, 0);
  EXPECT_EQ(s.Plan(size_t{100})[0].id, 1u);  // nobody waits on 2: first come, first served
  for (uint64_t id : {3, 4}) {
    SchedRequest r = At(id, 1100, 1000 + static_cast<int64_t>(id) * 1000);
    r.block_hashes = Chain(7, 68);  // starts with 2's prompt
    s.Submit(r);
  }
  EXPECT_TRUE(s.Admit(40'000 * kMs).empty());  // the running cap
  EXPECT_TRUE(s.IsWaitingForPrefix(3));
  const std::vector<WorkItem> w = s.Plan(size_t{100});
  ASSERT_FALSE(w.empty());
  EXPECT_EQ(w[0].id, 2u);
}

// Everyone shares a system prompt that is computed; only the blocks a prompt
// has yet to compute make others wait. The conversation two waiting turns
// continue goes first, not the older prompt that shares only the system
// prompt with them (counting waiters by first block made them equal).
TEST(Scheduler, OnlyBlocksStillToComputeMakeAPrefixWorthMore) {
  Scheduler s(Opts(256, 10000, 2, 64));
  const Hash128 system{99, 7};
  auto with_system = [&](uint64_t tag, size_t n) {
    std::vector<Hash128> h{system};
    for (const Hash128& b : Chain(tag, n - 1)) h.push_back(b);
    return h;
  };
  SchedRequest other = At(1, 1024, 0), conversation = At(2, 1024, 1000);
  other.block_hashes = with_system(8, 64);
  conversation.block_hashes = with_system(7, 64);
  s.Submit(other);
  ASSERT_EQ(s.Admit(0), (std::vector<uint64_t>{1}));
  s.Started(1, 16);  // the system prompt was cached
  s.Submit(conversation);
  ASSERT_EQ(s.Admit(1000 * kMs), (std::vector<uint64_t>{2}));
  s.Started(2, 16);
  for (uint64_t id : {3, 4}) {
    SchedRequest r = At(id, 1100, 1000 + static_cast<int64_t>(id) * 1000);
    r.block_hashes = with_system(7, 68);  // the conversation's next turns
    s.Submit(r);
  }
  EXPECT_TRUE(s.Admit(40'000 * kMs).empty());  // the running cap
  EXPECT_TRUE(s.IsWaitingForPrefix(3));
  std::vector<WorkItem> w = s.Plan(size_t{100});
  ASSERT_FALSE(w.empty());
  EXPECT_EQ(w[0].id, 2u);
  // Waiters for 1's own blocks turn the order back.
  for (uint64_t id : {5, 6, 7}) {
    SchedRequest r = At(id, 1100, 1000 + static_cast<int64_t>(id) * 1000);
    r.block_hashes = with_system(8, 68);
    s.Submit(r);
  }
  w = s.Plan(size_t{100});
  ASSERT_FALSE(w.empty());
  EXPECT_EQ(w[0].id, 1u);
}

TEST(CheapFirst, OrderWithinTheAllowance) {
  // Arrival order: a miss that has waited 10 s, one that has waited 1 s,
  // then a hit (50 ms) and a partial hit (1,500 ms) that just arrived.
  const int64_t now = 10'000 * kMs;
  const std::vector<QueueEntry> q = {{0, 3000, 0}, {9'000 * kMs, 3000, 0}, {now, 50, 0}, {now, 1500, 0}};
  // Each may be passed for a tenth of its wait plus its own prefill: 1,300
  // and 400 ms. The hit passes both; the partial hit would exceed the
  // second miss's 400 ms (less the 50 taken): it waits.
  EXPECT_EQ(CheapFirstOrder(q, now, 0.1), (std::vector<size_t>{2, 0, 1, 3}));
  // No allowance: arrival order.
  EXPECT_EQ(CheapFirstOrder(q, now, 0.0), (std::vector<size_t>{0, 1, 2, 3}));
  // A long prompt that has just arrived leaves room for a hit at once
  // (a tenth of its 3,000 ms), not for another long one.
  const std::vector<QueueEntry> fresh = {{now, 3000, 0}, {now, 50, 0}, {now, 2000, 0}};
  EXPECT_EQ(CheapFirstOrder(fresh, now, 0.1), (std::vector<size_t>{1, 0, 2}));
  // A prefix that others wait for counts their requests: 3,000 ms for
  // three is 1,000 ms a request, cheaper than the partial hit. Later, when
  // the first two have waited 100 and 91 s (room for all): by cost alone
  // 2, 3, 0, 1; with the second's waiters 2, 1, 3, 0.
  std::vector<QueueEntry> shared = q;
  shared[1].beneficiaries = 3;
  const int64_t later = 100'000 * kMs;
  EXPECT_EQ(CheapFirstOrder(q, later, 0.1), (std::vector<size_t>{2, 3, 0, 1}));
  EXPECT_EQ(CheapFirstOrder(shared, later, 0.1), (std::vector<size_t>{2, 1, 3, 0}));
  // What a request was already passed for counts against it.
  std::vector<QueueEntry> used = q;
  used[0].passed_ms = 1290;
  EXPECT_EQ(CheapFirstOrder(used, now, 0.1), (std::vector<size_t>{0, 1, 2, 3}));
}

}  // namespace
}  // namespace pc
