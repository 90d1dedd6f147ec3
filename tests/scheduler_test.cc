// The scheduler is pure bookkeeping: these tests drive it by hand.
#include <gtest/gtest.h>

#include "engine/scheduler.h"

namespace pc {
namespace {

SchedRequest Req(uint64_t id, size_t prompt, size_t max_new, std::vector<Hash128> hashes = {}) {
  return SchedRequest{id, prompt, max_new, std::move(hashes), 0};
}

std::vector<Hash128> Chain(uint64_t tag, size_t n) {
  std::vector<Hash128> h;
  for (size_t i = 0; i < n; ++i) h.push_back(Hash128{tag * 1000 + i, 7});
  return h;
}

SchedulerOptions Opts(size_t budget = 64, size_t blocks = 100, size_t running = 8, size_t waiting = 8) {
  SchedulerOptions o;
  o.max_batch_tokens = budget;
  o.num_blocks = blocks;
  o.max_running = running;
  o.max_waiting = waiting;
  o.block_size = 16;
  return o;
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

TEST(Scheduler, CachedTokensAreNotPrefilled) {
  Scheduler s(Opts());
  s.Submit(Req(1, 40, 4));
  s.Admit(0);
  s.Started(1, 32);
  std::vector<WorkItem> w = s.Plan();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].num_tokens, 8u);
}

TEST(Scheduler, NothingPlannedBeforeStarted) {
  Scheduler s(Opts());
  s.Submit(Req(1, 40, 4));
  s.Admit(0);
  EXPECT_TRUE(s.Plan().empty());
}

TEST(Scheduler, AdmissionReservesWorstCaseBlocks) {
  // Each request: (100 + 60) / 16 = 10 blocks + 1 for a full-hit copy = 11.
  Scheduler s(Opts(64, 25));
  EXPECT_EQ(s.BlocksNeeded(Req(0, 100, 60)), 11u);
  for (uint64_t id = 1; id <= 3; ++id) s.Submit(Req(id, 100, 60));
  EXPECT_EQ(s.Admit(0), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(s.num_reserved_blocks(), 22u);
  EXPECT_EQ(s.num_waiting(), 1u);
  s.Started(1, 0);
  s.Started(2, 0);
  EXPECT_TRUE(s.Finish(1));
  EXPECT_EQ(s.Admit(0), std::vector<uint64_t>{3});
  EXPECT_EQ(s.num_reserved_blocks(), 22u);
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
  Scheduler s(Opts(32));
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
