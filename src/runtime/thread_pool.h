// Persistent worker pool. Between the jobs of one forward pass (microseconds
// apart) workers spin briefly on an atomic generation counter; after
// kSpinLimit they sleep on a condition variable, so an idle pool never keeps a
// core busy (the HTTP threads need it), unless KeepAwakeUntil asks for a while.
// A job is split into one chunk per thread; each thread claims its own chunk
// first, then any chunk nobody has started. So a worker that the OS has not
// scheduled (another process on the cores, a sleeping worker waking late)
// costs the job nothing: the caller runs that chunk itself instead of waiting
// a scheduler quantum for it. Which thread runs a chunk never changes what
// the chunk computes (the partition is fixed by n, grain and num_threads()).
// A thread that finished a chunk gives its core away (sched_yield) if it
// has not done so for kYieldEveryNs: the pool keeps every core busy through
// a long step, and a thread the OS woke meanwhile (the HTTP thread reading a
// request, or writing a first token) otherwise waited for the scheduler to
// preempt a pool thread: 3-5 ms on a 2-core Zen 5 guest (Linux 6.18), the
// largest part of a cache hit's wait while a miss was prefilled; about 1 ms
// with the yield (docs/BENCHMARKS.md). With nothing else runnable the call
// returns at once (1.3 us there), so it costs at most ~0.1% of a core.
// YieldCores asks for one more yield on every thread at once (the caller's
// now, a spinning worker's at its next look, a working one's after its
// chunk): called when a step has handed out tokens, so the threads woken to
// write them run within ~0.1 ms rather than at the next paced yield
// (docs/BENCHMARKS.md). For kFastYieldWindowNs after it the pace is
// kFastYieldEveryNs: the writes wake the clients' readers a little later,
// and those waited for the next paced yield (up to 1 ms; 0.9 ms at the
// 90th percentile of a Mooncake replay on the 2-core Zen 5 guest, 0.3 ms
// with the faster pace).
// Thread-safety: ParallelFor may be called from one thread at a time per pool
// (the engine's step loop); it blocks until every chunk has run.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "base/mutex.h"
#include <thread>
#include <vector>

namespace pc {

class ThreadPool {
 public:
  // num_threads counts the calling thread; 0 means physical cores.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Splits [0, n) into at most num_threads() contiguous ranges of multiples of
  // `grain` (except the last) and runs fn(begin, end, thread_index) on each.
  // thread_index names the thread running the call (0 = the caller; for
  // per-thread scratch); one thread may run several ranges, one at a time.
  void ParallelFor(size_t n, size_t grain,
                   const std::function<void(size_t, size_t, int)>& fn);

  // Runs fn(i, thread_index) for every i in [0, n); threads claim the next
  // index as they finish one (for items of uneven cost, such as attention
  // over contexts of different lengths).
  void ParallelForEach(size_t n, const std::function<void(size_t, int)>& fn);

  // Every thread of the pool gives its core away once, soon (see above).
  // From the thread that calls ParallelFor, between jobs.
  void YieldCores();

  // Idle workers go on spinning until deadline_ns (NowNs's clock) before
  // they sleep, giving their core away (sched_yield) every kAwakeYieldNs
  // meanwhile: the next job then finds them, and their cores, awake
  // (Engine's idle spin, docs/SERVER.md). Any thread; a later call replaces
  // the deadline.
  void KeepAwakeUntil(int64_t deadline_ns) { awake_until_ns_.store(deadline_ns, std::memory_order_relaxed); }
  // Workers asleep on the condition variable now (tests, reports).
  int num_sleeping() const { return sleeping_.load(); }

 private:
  void WorkerLoop(int index);
  // Claims chunk c for job generation gen; false if it is taken (or gen is
  // over: every chunk of a finished job is claimed).
  bool TryClaim(size_t c, uint64_t gen);
  // Runs every chunk of job gen this thread can claim, its own first.
  void RunClaimable(uint64_t gen, int thread);

  int num_threads_;
  std::vector<std::thread> workers_;
  Mutex mu_;  // guards nothing: it pairs work_cv_ with the sleepers' check
  std::condition_variable work_cv_;
  // The job: written before generation_ is bumped, read after it is seen.
  const std::function<void(size_t, size_t, int)>* job_ = nullptr;
  size_t job_n_ = 0, job_chunk_ = 0;
  std::atomic<uint64_t> generation_{0};
  // Per chunk: the generation of the job that claimed it (chunks past a job's
  // count are marked claimed when it is published).
  std::unique_ptr<std::atomic<uint64_t>[]> claimed_;
  std::atomic<size_t> done_{0};  // chunks of the current job finished
  std::atomic<int> sleeping_{0};
  std::atomic<uint64_t> yield_epoch_{0};  // bumped by YieldCores
  std::atomic<int64_t> fast_yield_until_ns_{0};  // set by YieldCores (NowNs's clock)
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> awake_until_ns_{0};  // KeepAwakeUntil
};

// A spin-wait hint to the core (x86 `pause`); nothing elsewhere.
inline void CpuPause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Number of physical cores (distinct core ids), at least 1.
int PhysicalCoreCount();

// How often at most a pool thread yields its core between chunks, ns.
constexpr int64_t kYieldEveryNs = 1'000'000;
// The pace for a while after YieldCores (a step's tokens handed out), ns.
constexpr int64_t kFastYieldEveryNs = 200'000;
constexpr int64_t kFastYieldWindowNs = 1'000'000;
// How often a thread spinning while idle on purpose (KeepAwakeUntil,
// Engine's idle spin) gives its core away: a thread woken meanwhile (an
// HTTP thread with a request) waits at most about this long for it, ns.
constexpr int64_t kAwakeYieldNs = 50'000;
// Whether a thread that last yielded at *last_ns (0: never) should yield at
// now_ns; if so, *last_ns becomes now_ns. Pure (the clock is passed in).
inline bool YieldDue(int64_t now_ns, int64_t* last_ns, int64_t every_ns = kYieldEveryNs) {
  if (*last_ns != 0 && now_ns - *last_ns < every_ns) return false;
  *last_ns = now_ns;
  return true;
}

// The yield pace at now_ns: kFastYieldEveryNs before fast_until_ns (set by
// YieldCores), else kYieldEveryNs. Pure.
inline int64_t YieldPaceNs(int64_t now_ns, int64_t fast_until_ns) {
  return now_ns < fast_until_ns ? kFastYieldEveryNs : kYieldEveryNs;
}

// Whether a thread that last saw the yield epoch *seen_epoch should yield
// for `epoch` (YieldCores bumped it since); if so, *seen_epoch becomes epoch.
inline bool YieldAsked(uint64_t epoch, uint64_t* seen_epoch) {
  if (epoch == *seen_epoch) return false;
  *seen_epoch = epoch;
  return true;
}

}  // namespace pc
