// The scheduler is pure bookkeeping: these tests drive it by hand.
#include <gtest/gtest.h>

#include "sched/scheduler.h"
#include "sched/scheduler_test_util.h"

namespace pc {
namespace {

using sched_test::Chain;
using sched_test::Opts;
using sched_test::Req;

// The scheduler keeps no count of its own: it starts from what the shared
// record says was adopted, counts each step's tokens there (prompt and
// decode alike), and a preempted request's record is back at 0 until the
// cache says what it found again.
TEST(Scheduler, CountsProgressInTheSharedRecord) {
  Scheduler s(Opts(64));
  SchedRequest r = Req(1, 40, 5);
  auto rec = std::make_shared<RequestProgress>();
  r.progress = rec;
  ASSERT_EQ(s.Submit(r), SubmitResult::kQueued);
  ASSERT_EQ(s.Admit(0), std::vector<uint64_t>{1});
  rec->num_computed = 16;  // the cache adopted a block
  s.Started(1);
  std::vector<WorkItem> w = s.Plan();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].num_tokens, 24u);
  EXPECT_EQ(s.PrefillDepth(), 16u);
  s.Advanced(1, 24);
  EXPECT_EQ(rec->num_computed, 40u);
  w = s.Plan();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_TRUE(w[0].decode);
  s.Advanced(1, 1);
  EXPECT_EQ(rec->num_computed, 41u);
  EXPECT_EQ(s.DecodeContext(), 41.0);
  SchedRequest resumed = Req(1, 41, 4);
  resumed.progress = rec;
  s.Preempt(1, resumed);
  EXPECT_EQ(rec->num_computed, 0u);
  ASSERT_EQ(s.Admit(0), std::vector<uint64_t>{1});
  s.Started(1, 32);  // the second form writes the record (no cache here)
  EXPECT_EQ(rec->num_computed, 32u);
  w = s.Plan();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].num_tokens, 9u);
}

// A prompt tail (SchedulerOptions::prompt_tail_tokens) is a chunk of its
// own: the rest of the prompt never takes it along, however large the
// budget; a prompt no longer than the tail is one chunk; a budget smaller
// than the tail splits it.
TEST(Scheduler, APromptTailIsAChunkOfItsOwn) {
  SchedulerOptions o = Opts(64);
  o.prompt_tail_tokens = 4;
  Scheduler s(o);
  ASSERT_EQ(s.Submit(Req(1, 10, 2)), SubmitResult::kQueued);
  ASSERT_EQ(s.Submit(Req(2, 3, 2)), SubmitResult::kQueued);
  ASSERT_EQ(s.Admit(0), (std::vector<uint64_t>{1, 2}));
  s.Started(1, 0);
  s.Started(2, 0);
  std::vector<WorkItem> w = s.Plan();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].id, 1u);
  EXPECT_EQ(w[0].num_tokens, 6u);
  EXPECT_FALSE(w[0].last_prompt_chunk);
  EXPECT_EQ(w[1].id, 2u);
  EXPECT_EQ(w[1].num_tokens, 3u);
  EXPECT_TRUE(w[1].last_prompt_chunk);
  s.Advanced(1, 6);
  s.Advanced(2, 3);
  w = s.Plan();
  ASSERT_EQ(w.size(), 2u);
  const WorkItem& tail = w[0].id == 1 ? w[0] : w[1];
  EXPECT_FALSE(tail.decode);
  EXPECT_EQ(tail.num_tokens, 4u);
  EXPECT_TRUE(tail.last_prompt_chunk);

  SchedulerOptions small = Opts(2);
  small.prompt_tail_tokens = 4;
  Scheduler t(small);
  ASSERT_EQ(t.Submit(Req(3, 7, 1)), SubmitResult::kQueued);
  ASSERT_EQ(t.Admit(0), std::vector<uint64_t>{3});
  t.Started(3, 0);
  std::vector<size_t> chunks;
  for (int step = 0; step < 8; ++step) {
    w = t.Plan();
    if (w.empty() || w[0].decode) break;
    chunks.push_back(w[0].num_tokens);
    t.Advanced(3, w[0].num_tokens);
  }
  EXPECT_EQ(chunks, (std::vector<size_t>{2, 1, 2, 2}));
}

TEST(Scheduler, DecodesFirstThenFillsBudgetWithPrefillChunks) {
  Scheduler s(Opts(64));
  ASSERT_EQ(s.Submit(Req(1, 10, 5)), SubmitResult::kQueued);
  ASSERT_EQ(s.Admit(0), std::vector<uint64_t>{1});
  s.Started(1, 0);
  std::vector<WorkItem> w = s.Plan();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_FALSE(w[0].decode);
  EXPECT_EQ(w[0].num_tokens, 10u);
  EXPECT_TRUE(w[0].last_prompt_chunk);
  s.Advanced(1, 10);
  // A long prompt arrives while 1 decodes: 1 gets its token, 2 the rest.
  ASSERT_EQ(s.Submit(Req(2, 200, 5)), SubmitResult::kQueued);
  ASSERT_EQ(s.Admit(0), std::vector<uint64_t>{2});
  s.Started(2, 0);
  w = s.Plan();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].id, 1u);
  EXPECT_TRUE(w[0].decode);
  EXPECT_EQ(w[1].id, 2u);
  EXPECT_EQ(w[1].num_tokens, 63u);
  EXPECT_FALSE(w[1].last_prompt_chunk);
  s.Advanced(1, 1);
  s.Advanced(2, 63);
  // Chunks continue until the prompt is done; the last one is marked.
  size_t done = 63;
  while (done < 200) {
    w = s.Plan();
    ASSERT_EQ(w.size(), 2u);
    done += w[1].num_tokens;
    EXPECT_EQ(w[1].last_prompt_chunk, done == 200);
    s.Advanced(1, 1);
    s.Advanced(2, w[1].num_tokens);
  }
  w = s.Plan();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(w[0].decode && w[1].decode);
}

TEST(Scheduler, APrefillBudgetBoundsTheChunksButNeverTheDecodes) {
  Scheduler s(Opts(64));
  for (uint64_t id : {1, 2}) ASSERT_EQ(s.Submit(Req(id, 4, 50)), SubmitResult::kQueued);
  s.Admit(0);
  s.Started(1, 0);
  s.Started(2, 0);
  EXPECT_EQ(s.NumDecoding(), 0u);
  for (const WorkItem& w : s.Plan()) s.Advanced(w.id, w.num_tokens);
  EXPECT_EQ(s.NumDecoding(), 2u);
  ASSERT_EQ(s.Submit(Req(3, 300, 5)), SubmitResult::kQueued);
  s.Admit(0);
  s.Started(3, 0);
  std::vector<WorkItem> w = s.Plan(10);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_TRUE(w[0].decode && w[1].decode);
  EXPECT_EQ(w[2].num_tokens, 10u);
  w = s.Plan(0);  // no prefill this step: the streams still decode
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(w[0].decode && w[1].decode);
  EXPECT_EQ(s.Plan()[2].num_tokens, 62u);  // no bound: the rest of the step's tokens
}

TEST(Scheduler, CachedTokensAreNotPrefilled) {
  Scheduler s(Opts());
  s.Submit(Req(1, 40, 4));
  s.Admit(0);
  s.Started(1, 32);
  std::vector<WorkItem> w = s.Plan();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].num_tokens, 8u);
}

// A prompt in prefill with nothing else running or waiting is lone (its
// steps bound no one); another request waiting, or a second one running,
// ends that. PrefillDepth is the cached positions of the prompt whose turn
// comes first (request 1: the earlier arrival, and 8 tokens left against 32).
TEST(Scheduler, ALonePromptAndTheDepthOfPrefill) {
  Scheduler s(Opts());
  EXPECT_FALSE(s.LonePrefill());
  s.Submit(Req(1, 40, 4));
  s.Admit(0);
  EXPECT_FALSE(s.LonePrefill());  // not started
  s.Started(1, 32);
  EXPECT_TRUE(s.LonePrefill());
  EXPECT_EQ(s.PrefillDepth(), 32u);
  s.Submit(Req(2, 40, 4));
  EXPECT_FALSE(s.LonePrefill());  // someone waits
  s.Admit(0);
  s.Started(2, 8);
  EXPECT_FALSE(s.LonePrefill());
  EXPECT_EQ(s.PrefillDepth(), 32u);
  s.Advanced(1, 8);  // request 1 decodes now
  EXPECT_EQ(s.PrefillDepth(), 8u);
  EXPECT_FALSE(s.LonePrefill());
}

TEST(Scheduler, NothingPlannedBeforeStarted) {
  Scheduler s(Opts());
  s.Submit(Req(1, 40, 4));
  s.Admit(0);
  EXPECT_TRUE(s.Plan().empty());
}

PoolView Free(size_t blocks, size_t cached_leading = 0) {
  PoolView v;
  v.free_blocks = blocks;
  v.cached_leading_blocks = [cached_leading](const SchedRequest&) { return cached_leading; };
  return v;
}

TEST(Scheduler, AdmissionCountsPromptBlocksNotTheWorstCase) {
  // 100 prompt tokens: 7 blocks + 1 for the first decode = 8, whatever
  // max_new_tokens says (the worst case would be 11).
  Scheduler s(Opts(64, 25));
  EXPECT_EQ(s.BlocksNeeded(Req(0, 100, 60)), 11u);
  EXPECT_EQ(s.PromptBlocks(Req(0, 100, 60), 0), 8u);
  for (uint64_t id = 1; id <= 4; ++id) s.Submit(Req(id, 100, 60));
  // 25 free less the 1-block watermark: three fit, the fourth waits.
  EXPECT_EQ(s.Admit(0, Free(25)), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(s.num_promised_blocks(), 24u);
  // Promised blocks shrink as prompts are computed; the pool's free count
  // shrinks with them, so admission does not count them twice.
  s.Started(1, 0);
  s.Advanced(1, 100);
  EXPECT_EQ(s.num_promised_blocks(), 16u);
  EXPECT_TRUE(s.Admit(0, Free(25 - 7)).empty());
  EXPECT_TRUE(s.Finish(2));
  EXPECT_EQ(s.Admit(0, Free(25 - 7)), std::vector<uint64_t>{4});
}

TEST(Scheduler, ACachedPrefixCostsNothingAtAdmission) {
  Scheduler s(Opts(64, 1000, 32, 32));
  // 1,000-token prompts whose first 62 blocks the pool holds: 2 blocks each.
  EXPECT_EQ(s.PromptBlocks(Req(0, 1000, 5000), 62), 2u);
  for (uint64_t id = 1; id <= 32; ++id) ASSERT_EQ(s.Submit(Req(id, 1000, 5000)), SubmitResult::kQueued);
  EXPECT_EQ(s.Admit(0, Free(70, 62)).size(), 32u);
  // Uncached, the same pool holds one of them at a time.
  Scheduler cold(Opts(64, 1000, 32, 32));
  for (uint64_t id = 1; id <= 32; ++id) cold.Submit(Req(id, 1000, 5000));
  EXPECT_EQ(cold.Admit(0, Free(70, 0)).size(), 1u);
}

SchedulerOptions Fifo(SchedulerOptions o) {
  o.admission = Admission::kFifo;
  return o;
}

TEST(Scheduler, APreemptedRequestResumesFirstWithItsGeneratedTokens) {
  Scheduler s(Fifo(Opts(64, 100, 8, 1)));
  s.Submit(Req(1, 20, 10));
  s.Admit(0);
  s.Submit(Req(2, 20, 10));
  EXPECT_EQ(s.Admit(0), std::vector<uint64_t>{2});
  s.Started(1, 0);
  EXPECT_EQ(s.NewestStarted(), std::optional<uint64_t>{1});  // 2 has not started
  s.Started(2, 0);
  s.Advanced(2, 20);
  s.Advanced(2, 1);
  EXPECT_EQ(s.NewestStarted(), std::optional<uint64_t>{2});
  s.Submit(Req(3, 20, 10));  // fills the one-request queue
  // 2 goes back with its prompt and 3 generated tokens, ahead of 3 and past
  // the queue bound.
  s.Preempt(2, Req(2, 23, 7));
  EXPECT_EQ(s.num_running(), 1u);
  EXPECT_EQ(s.num_waiting(), 2u);
  EXPECT_EQ(s.NumStarted(), 1u);
  EXPECT_EQ(s.Admit(0, Free(100)), (std::vector<uint64_t>{2, 3}));
  s.Started(2, 16);
  const std::vector<WorkItem> w = s.Plan();
  ASSERT_EQ(w.size(), 2u);  // 1 prefills its 20 tokens, 2 the 7 past its cached block
  EXPECT_EQ(w[1].id, 2u);
  EXPECT_EQ(w[1].num_tokens, 7u);
  EXPECT_TRUE(w[1].last_prompt_chunk);
}

SchedRequest TenantReq(uint64_t id, uint64_t tenant, size_t prompt) {
  SchedRequest r = Req(id, prompt, 4);
  r.tenant = tenant;
  return r;
}

TEST(Scheduler, AQuietTenantIsNotQueuedBehindAnotherTenantsBurst) {
  Scheduler s(Opts(64, 1000, 3, 32));
  for (uint64_t id = 1; id <= 10; ++id) s.Submit(TenantReq(id, 1, 40));
  s.Submit(TenantReq(11, 2, 40));
  // Tenant 1's waiting requests rank 0, 1, 2, ...; tenant 2's only one 0.
  EXPECT_EQ(s.Admit(0), (std::vector<uint64_t>{1, 11, 2}));
  // Running requests count: tenant 1 has two running, 2 none once 11 ends,
  // so 2's new request goes before 1's eight older ones.
  EXPECT_TRUE(s.Finish(11));
  s.Submit(TenantReq(12, 2, 40));
  EXPECT_EQ(s.Admit(0), std::vector<uint64_t>{12});
  // One tenant alone is first come, first served.
  Scheduler one(Opts(64, 1000, 3, 32));
  for (uint64_t id = 1; id <= 5; ++id) one.Submit(TenantReq(id, 7, 40));
  EXPECT_EQ(one.Admit(0), (std::vector<uint64_t>{1, 2, 3}));
}

TEST(Scheduler, AFloodingTenantLeavesARunningSlotForAnother) {
  Scheduler s(Opts(64, 1000, 4, 32));
  s.Submit(TenantReq(100, 2, 16));  // tenant 2 was active a moment ago
  ASSERT_EQ(s.Admit(0).size(), 1u);
  s.Started(100, 0);
  s.Advanced(100, 16);
  ASSERT_TRUE(s.Finish(100));
  for (uint64_t id = 1; id <= 10; ++id) s.Submit(TenantReq(id, 1, 40));
  EXPECT_EQ(s.Admit(0).size(), 3u);  // one of the 4 slots stays free for tenant 2
  s.Submit(TenantReq(11, 2, 40));
  EXPECT_EQ(s.Admit(0), std::vector<uint64_t>{11});
  // A tenant alone takes every slot.
  Scheduler one(Opts(64, 1000, 4, 32));
  for (uint64_t id = 1; id <= 10; ++id) one.Submit(TenantReq(id, 1, 40));
  EXPECT_EQ(one.Admit(0).size(), 4u);
}

TEST(Scheduler, TenantsTakeTurnsAtPrefill) {
  Scheduler s(Opts(16, 1000, 8, 32));  // 16 prefill tokens per step
  for (uint64_t id = 1; id <= 3; ++id) s.Submit(TenantReq(id, 1, 64));
  s.Submit(TenantReq(4, 2, 64));
  ASSERT_EQ(s.Admit(0).size(), 4u);
  for (uint64_t id = 1; id <= 4; ++id) s.Started(id, 0);
  std::vector<uint64_t> served;
  for (int step = 0; step < 6; ++step) {
    const std::vector<WorkItem> w = s.Plan();
    ASSERT_EQ(w.size(), 1u);
    served.push_back(w[0].id);
    s.Advanced(w[0].id, w[0].num_tokens);
  }
  // Tenant 2's one prompt gets every other step, not the fourth turn.
  EXPECT_EQ(served, (std::vector<uint64_t>{1, 4, 1, 4, 1, 4}));
}

TEST(Scheduler, ATenantThatSentLittleLatelyPrefillsFirst) {
  Scheduler s(Opts(16, 1000, 8, 32));
  const int64_t sec = 1'000'000'000;
  s.Submit(TenantReq(1, 1, 64));
  s.Submit(TenantReq(2, 1, 64));
  s.Admit(1 * sec);
  s.Started(1, 0);
  s.Started(2, 0);
  s.Advanced(1, 64);  // tenant 1 has had 64 prefill tokens
  s.Submit(TenantReq(3, 2, 64));
  EXPECT_EQ(s.Admit(1 * sec), std::vector<uint64_t>{3});
  s.Started(3, 0);
  // Tenant 2 (nothing yet) goes before tenant 1's older prompt.
  std::vector<WorkItem> w = s.Plan();
  ASSERT_EQ(w.size(), 2u);  // [0] is request 1's decode
  EXPECT_EQ(w[1].id, 3u);
  // 40 s later tenant 1's 64 tokens count 4 (10 s half-life): after 16
  // more for tenant 2, tenant 1's prompt goes first.
  s.Admit(41 * sec);
  s.Advanced(3, 16);
  w = s.Plan();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[1].id, 2u);
}

// The step's prefill budget follows the standing of the tenant whose turn
// it is: below its share with nothing waiting, the whole step; past it, only
// what the target leaves; one tenant alone, the shared budget.
TEST(Scheduler, ATenantsPrefillBudgetFollowsItsShareOfRecentPrefill) {
  Scheduler s(Opts(256, 1000, 8, 32));
  const PrefillBudget budget{40, 10, 200};
  for (uint64_t id = 1; id <= 3; ++id) s.Submit(TenantReq(id, 1, 300));
  ASSERT_EQ(s.Admit(0).size(), 3u);
  for (uint64_t id = 1; id <= 3; ++id) s.Started(id, 0);
  std::vector<WorkItem> w = s.Plan(budget);
  ASSERT_EQ(w.size(), 1u);  // alone: shared
  EXPECT_EQ(w[0].num_tokens, 40u);
  EXPECT_EQ(s.StandingOf(1), Scheduler::Standing::kFair);
  s.Advanced(1, 40);
  // Tenant 2 arrives: it has had nothing, tenant 1 all of it.
  s.Submit(TenantReq(4, 2, 300));
  ASSERT_EQ(s.Admit(0), std::vector<uint64_t>{4});
  s.Started(4, 0);
  EXPECT_EQ(s.StandingOf(2), Scheduler::Standing::kBelowShare);
  EXPECT_EQ(s.StandingOf(1), Scheduler::Standing::kPastShare);
  w = s.Plan(budget);
  ASSERT_EQ(w.size(), 1u);  // tenant 2 takes the whole step; tenant 1 nothing past it
  EXPECT_EQ(w[0].id, 4u);
  EXPECT_EQ(w[0].num_tokens, 200u);
  s.Advanced(4, 200);
  // Now tenant 2 has had 200 against 40: it is past its share, and tenant 1
  // (far below) goes first with the whole step.
  EXPECT_EQ(s.StandingOf(2), Scheduler::Standing::kPastShare);
  w = s.Plan(budget);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].id, 1u);
  EXPECT_EQ(w[0].num_tokens, 200u);
  s.Advanced(1, 200);
  // 240 against 200: tenant 2 is below its share with nothing waiting: the
  // rest of its prompt in this step.
  w = s.Plan(budget);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].id, 4u);
  EXPECT_EQ(w[0].num_tokens, 100u);
  s.Advanced(4, 100);
  // 240 against 300: tenant 1 is below its share; but a tenant with a
  // request waiting for admission asks for more than it runs: the shared
  // budget, not the whole step.
  EXPECT_EQ(s.StandingOf(1), Scheduler::Standing::kBelowShare);
  s.Submit(TenantReq(5, 1, 300));
  EXPECT_EQ(s.StandingOf(1), Scheduler::Standing::kFair);
  w = s.Plan(budget);
  ASSERT_EQ(w.size(), 2u);  // request 4 decodes, tenant 1 prefills
  EXPECT_TRUE(w[0].decode);
  EXPECT_EQ(w[1].num_tokens, 40u);
}

TEST(Scheduler, RefusesWhatCanNeverFitAndBoundsTheQueue) {
  Scheduler s(Opts(64, 10, 8, 2));
  EXPECT_EQ(s.Submit(Req(1, 200, 10)), SubmitResult::kTooLarge);
  EXPECT_EQ(s.Submit(Req(2, 10, 10)), SubmitResult::kQueued);
  EXPECT_EQ(s.Submit(Req(3, 10, 10)), SubmitResult::kQueued);
  EXPECT_EQ(s.Submit(Req(4, 10, 10)), SubmitResult::kQueueFull);
}

TEST(Scheduler, RunningCapHoldsTheRestInTheQueue) {
  Scheduler s(Opts(64, 1000, 2));
  for (uint64_t id = 1; id <= 4; ++id) s.Submit(Req(id, 10, 10));
  EXPECT_EQ(s.Admit(0).size(), 2u);
  EXPECT_EQ(s.num_waiting(), 2u);
}

TEST(Scheduler, RequestWaitsForAPrefixAnotherIsComputing) {
  Scheduler s(Fifo(Opts(32)));
  const std::vector<Hash128> shared = Chain(1, 4);  // 64-token shared prefix
  std::vector<Hash128> b = shared;
  b.push_back(Hash128{999, 1});  // its own fifth block
  s.Submit(Req(1, 70, 4, shared));
  s.Submit(Req(2, 80, 4, b));
  s.Submit(Req(3, 50, 4, Chain(3, 3)));  // unrelated
  EXPECT_EQ(s.Admit(0), (std::vector<uint64_t>{1, 3}));
  EXPECT_TRUE(s.IsWaitingForPrefix(2));
  s.Started(1, 0);
  s.Started(3, 0);
  // Request 1 computes its prefix in chunks; 2 waits until all 4 blocks exist.
  s.Advanced(1, 32);
  EXPECT_TRUE(s.Admit(0).empty());
  s.Advanced(1, 31);  // 63 tokens: block 3 not complete yet
  EXPECT_TRUE(s.Admit(0).empty());
  s.Advanced(1, 1);
  EXPECT_EQ(s.Admit(0), std::vector<uint64_t>{2});
}

TEST(Scheduler, CancelledComputerReleasesWaiters) {
  Scheduler s(Opts());
  s.Submit(Req(1, 64, 4, Chain(1, 4)));
  s.Submit(Req(2, 64, 4, Chain(1, 4)));
  EXPECT_EQ(s.Admit(0), std::vector<uint64_t>{1});
  s.Started(1, 0);
  EXPECT_TRUE(s.Cancel(1));
  EXPECT_EQ(s.Admit(0), std::vector<uint64_t>{2});
  EXPECT_EQ(s.num_running(), 1u);
}

TEST(Scheduler, CacheHitBlocksAreNotPending) {
  Scheduler s(Opts());
  s.Submit(Req(1, 64, 4, Chain(1, 4)));
  s.Admit(0);
  s.Started(1, 48);  // three blocks were in the cache
  s.Submit(Req(2, 40, 4, {Chain(1, 2)}));
  EXPECT_EQ(s.Admit(0), std::vector<uint64_t>{2});
}

TEST(Scheduler, BypassRequestsNeverWait) {
  Scheduler s(Opts());
  s.Submit(Req(1, 64, 4, Chain(1, 4)));
  s.Submit(Req(2, 64, 4, {}));
  EXPECT_EQ(s.Admit(0), (std::vector<uint64_t>{1, 2}));
}

TEST(Scheduler, FinishUnknownAndWaiting) {
  Scheduler s(Opts());
  EXPECT_FALSE(s.Finish(42));
  s.Submit(Req(1, 10, 1));
  EXPECT_TRUE(s.Cancel(1));
  EXPECT_EQ(s.num_waiting(), 0u);
  EXPECT_TRUE(s.Admit(0).empty());
}

}  // namespace
}  // namespace pc
