// ThreadPool: every range runs once whoever runs it, the partition depends
// only on (n, grain, threads), and a thread index is never in use twice at
// once, also with more threads than cores (where the caller runs the chunks
// of workers the OS has not scheduled).
#include "runtime/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "base/clock.h"

namespace pc {
namespace {

TEST(ThreadPool, ParallelForEachRunsEveryIndexOnce) {
  ThreadPool pool(3);
  for (size_t n : {0u, 1u, 2u, 5u, 1000u}) {
    std::vector<std::atomic<int>> seen(n);
    std::atomic<int> bad_thread{0};
    pool.ParallelForEach(n, [&](size_t i, int thread) {
      seen[i].fetch_add(1);
      if (thread < 0 || thread >= pool.num_threads()) bad_thread.fetch_add(1);
    });
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(seen[i].load(), 1) << "n=" << n << " i=" << i;
    EXPECT_EQ(bad_thread.load(), 0);
  }
}

// The ranges one call runs: fixed by n, grain and the thread count.
std::set<std::pair<size_t, size_t>> Ranges(ThreadPool& pool, size_t n, size_t grain, int* overlaps) {
  std::mutex mu;
  std::set<std::pair<size_t, size_t>> out;
  std::vector<std::atomic<int>> busy(static_cast<size_t>(pool.num_threads()));
  pool.ParallelFor(n, grain, [&](size_t b, size_t e, int t) {
    if (busy[static_cast<size_t>(t)].fetch_add(1) != 0) ++*overlaps;  // two ranges on one index at once
    {
      std::lock_guard lock(mu);
      EXPECT_TRUE(out.emplace(b, e).second) << "range " << b << ".." << e << " ran twice";
    }
    volatile double x = 0;  // enough work for other threads to claim ranges meanwhile
    for (size_t i = 0; i < 2000 * (e - b); ++i) x = x + 1.0;
    busy[static_cast<size_t>(t)].fetch_sub(1);
  });
  return out;
}

// 2, 3 and 16 threads on this machine's cores (2 in CI: 16 oversubscribes, so
// callers run unclaimed chunks); 300 calls each.
TEST(ThreadPool, EveryRangeRunsOnceAndThePartitionIsFixed) {
  for (int threads : {2, 3, 16}) {
    ThreadPool pool(threads);
    for (int rep = 0; rep < 100; ++rep) {
      for (auto [n, grain] : {std::pair<size_t, size_t>{1000, 16}, {37, 4}, {5, 1}}) {
        int overlaps = 0;
        const auto got = Ranges(pool, n, grain, &overlaps);
        EXPECT_EQ(overlaps, 0) << threads << " threads";
        // The expected partition: ceil(grains / parts) grains per range.
        const size_t grains = (n + grain - 1) / grain;
        const size_t parts = std::min<size_t>(grains, static_cast<size_t>(threads));
        const size_t chunk = (grains + parts - 1) / parts * grain;
        std::set<std::pair<size_t, size_t>> want;
        for (size_t b = 0; b < n; b += chunk) want.emplace(b, std::min(b + chunk, n));
        ASSERT_EQ(got, want) << threads << " threads, n " << n << ", grain " << grain;
      }
    }
  }
}

// A pool destroyed right after a job: a worker that saw the job late (the
// OS had not scheduled it; 16 threads on 2 cores make that common) must not
// take the destructor's wake-up for a job and run a chunk of nothing (it
// did: a segfault in RunClaimable during join, once in ~70 runs of a parity
// test beside another test process). The window is a few instructions, so
// this exercises destruction with late workers but catches that race only
// rarely; the run-and-join path is what it checks every time.
TEST(ThreadPool, DestroyedRightAfterAJob) {
  std::atomic<size_t> covered{0};
  constexpr int kPools = 400;
  for (int rep = 0; rep < kPools; ++rep) {
    ThreadPool pool(16);
    // Past the spin limit: the job wakes 15 sleepers at once on few cores,
    // and the caller runs their chunks while they wake.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    pool.ParallelFor(64, 1, [&](size_t b, size_t e, int) { covered.fetch_add(e - b); });
  }
  EXPECT_EQ(covered.load(), size_t{64} * kPools);
}

// The yield between chunks is paced: the first chunk yields, then none
// until the interval has passed since the last yield (not since the last
// chunk), whatever the clock's origin.
TEST(ThreadPool, YieldsAtMostOncePerInterval) {
  int64_t last = 0;
  const int64_t every = 500'000;
  EXPECT_TRUE(YieldDue(7, &last, every));
  EXPECT_EQ(last, 7);
  EXPECT_FALSE(YieldDue(7 + 100'000, &last, every));
  EXPECT_FALSE(YieldDue(7 + 499'999, &last, every));
  EXPECT_EQ(last, 7);  // unchanged while not due
  EXPECT_TRUE(YieldDue(7 + 500'000, &last, every));
  EXPECT_EQ(last, 7 + 500'000);
  EXPECT_FALSE(YieldDue(7 + 900'000, &last, every));
  EXPECT_TRUE(YieldDue(7 + 1'000'000, &last, every));
  int64_t fresh = 0;
  EXPECT_TRUE(YieldDue(123, &fresh));  // the default interval, first time
  EXPECT_FALSE(YieldDue(123 + kYieldEveryNs - 1, &fresh));
}

// YieldCores: each thread yields once per bump of the epoch, whenever it
// looks (a bump it has seen asks nothing more).
TEST(ThreadPool, YieldsOncePerAskedEpoch) {
  uint64_t seen = 0;
  EXPECT_FALSE(YieldAsked(0, &seen));
  EXPECT_TRUE(YieldAsked(1, &seen));
  EXPECT_EQ(seen, 1u);
  EXPECT_FALSE(YieldAsked(1, &seen));
  EXPECT_TRUE(YieldAsked(3, &seen));  // two bumps between looks: one yield
  EXPECT_FALSE(YieldAsked(3, &seen));
}

// For a while after YieldCores (its window) the pace is the fast one, then
// the usual: a thread that yielded 0.3 ms ago yields again inside the
// window and not outside it.
TEST(ThreadPool, YieldsFasterRightAfterTokensAreHandedOut) {
  const int64_t t = 5'000'000, until = t + kFastYieldWindowNs;
  EXPECT_LT(kFastYieldEveryNs, kYieldEveryNs);
  EXPECT_EQ(YieldPaceNs(t, until), kFastYieldEveryNs);
  EXPECT_EQ(YieldPaceNs(until - 1, until), kFastYieldEveryNs);
  EXPECT_EQ(YieldPaceNs(until, until), kYieldEveryNs);
  EXPECT_EQ(YieldPaceNs(t, 0), kYieldEveryNs);  // never asked
  int64_t last = t;
  const int64_t later = t + 300'000;
  EXPECT_TRUE(YieldDue(later, &last, YieldPaceNs(later, until)));
  last = until + 1;
  EXPECT_FALSE(YieldDue(until + 1 + 300'000, &last, YieldPaceNs(until + 1 + 300'000, until)));
}

// Asked between jobs (workers spinning, asleep or finishing a chunk), the
// yields change nothing a job computes and hold nothing up.
TEST(ThreadPool, YieldCoresBetweenJobs) {
  ThreadPool pool(4);
  std::atomic<size_t> covered{0};
  for (int rep = 0; rep < 300; ++rep) {
    pool.ParallelFor(64, 1, [&](size_t b, size_t e, int) { covered.fetch_add(e - b); });
    pool.YieldCores();
    if (rep % 100 == 99) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // past the spin limit
  }
  EXPECT_EQ(covered.load(), size_t{64} * 300);
}

// Waits up to 10 s for the pool's sleeping workers to number `want`.
bool SleepingBecomes(const ThreadPool& pool, int want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (pool.num_sleeping() != want) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Idle workers sleep soon after a job unless KeepAwakeUntil asks them to
// spin on; past its deadline they sleep again, and a job finds them either way.
TEST(ThreadPool, KeepAwakeUntilHoldsIdleWorkersAwakeUntilItsDeadline) {
  ThreadPool pool(3);
  std::atomic<size_t> ran{0};
  auto job = [&] { pool.ParallelFor(90, 1, [&](size_t b, size_t e, int) { ran += e - b; }); };
  job();
  EXPECT_TRUE(SleepingBecomes(pool, 2));
  pool.KeepAwakeUntil(NowNs() + int64_t{60'000'000'000});  // a minute
  job();  // wakes them; now they spin
  EXPECT_TRUE(SleepingBecomes(pool, 0));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // hundreds of times the plain spin
  EXPECT_EQ(pool.num_sleeping(), 0);
  job();
  pool.KeepAwakeUntil(0);  // over: they sleep again
  EXPECT_TRUE(SleepingBecomes(pool, 2));
  job();
  EXPECT_EQ(ran.load(), 4u * 90u);
}

}  // namespace
}  // namespace pc
