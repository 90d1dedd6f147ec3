#include "runtime/thread_pool.h"

#include <sched.h>

#include <cstdint>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#include "base/check.h"
#include "base/clock.h"

namespace pc {

int PhysicalCoreCount() {
  std::set<std::pair<std::string, std::string>> cores;
  for (unsigned cpu = 0; cpu < 4096; ++cpu) {
    const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream pkg(base + "physical_package_id"), core(base + "core_id");
    if (!pkg || !core) {
      if (cpu > 0) break;
      continue;
    }
    std::string p, c;
    pkg >> p;
    core >> c;
    cores.emplace(p, c);
  }
  if (cores.empty()) {
    const unsigned hw = std::thread::hardware_concurrency();
    return hw == 0 ? 1 : static_cast<int>(hw);
  }
  return static_cast<int>(cores.size());
}

namespace {

// How long an idle worker spins before sleeping (~100 us on current CPUs).
constexpr int kSpinLimit = 20000;

// The yield between chunks (thread_pool.h): one clock read a chunk, and
// one more yield whenever YieldCores bumped the epoch since this thread's last.
thread_local int64_t t_last_yield_ns = 0;
thread_local uint64_t t_yield_epoch = 0;
void YieldIfAsked(const std::atomic<uint64_t>& epoch) {
  if (!YieldAsked(epoch.load(std::memory_order_relaxed), &t_yield_epoch)) return;
  t_last_yield_ns = NowNs();
  sched_yield();
}
void YieldBetweenChunks(const std::atomic<uint64_t>& epoch, const std::atomic<int64_t>& fast_until_ns) {
  YieldIfAsked(epoch);
  const int64_t now = NowNs();
  if (YieldDue(now, &t_last_yield_ns, YieldPaceNs(now, fast_until_ns.load(std::memory_order_relaxed)))) sched_yield();
}

}  // namespace

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(num_threads > 0 ? num_threads : PhysicalCoreCount()),
      claimed_(new std::atomic<uint64_t>[static_cast<size_t>(num_threads_)]) {
  for (int i = 0; i < num_threads_; ++i) claimed_[static_cast<size_t>(i)].store(0);
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    MutexLock lock(mu_);
    stop_ = true;
    // The wake-up below is a generation without a job: no chunk of it can
    // be claimed, whatever a late worker read before stop_.
    for (int i = 0; i < num_threads_; ++i) claimed_[static_cast<size_t>(i)].store(UINT64_MAX);
    ++generation_;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::ParallelFor(size_t n, size_t grain,
                             const std::function<void(size_t, size_t, int)>& fn) {
  if (n == 0) return;
  if (grain == 0) grain = 1;
  const size_t num_grains = (n + grain - 1) / grain;
  const size_t parts = std::min<size_t>(num_grains, static_cast<size_t>(num_threads_));
  if (parts <= 1) {
    fn(0, n, 0);
    return;
  }
  const size_t chunk = ((num_grains + parts - 1) / parts) * grain;
  const uint64_t gen = generation_.load() + 1;
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = chunk;
  done_.store(0);
  const size_t threads = static_cast<size_t>(num_threads_);
  for (size_t c = parts; c < threads; ++c) claimed_[c].store(gen);  // no such chunk
  generation_.store(gen);  // publishes the job (seq_cst)
  if (sleeping_.load() > 0) {
    MutexLock lock(mu_);
    work_cv_.notify_all();
  }
  RunClaimable(gen, 0);
  // Every chunk is claimed now; wait for those running on other threads.
  for (int spins = 0; done_.load() != parts; ++spins) {
    if (spins < kSpinLimit) CpuPause();
    else std::this_thread::yield();
  }
  job_ = nullptr;
}

bool ThreadPool::TryClaim(size_t c, uint64_t gen) {
  uint64_t seen = claimed_[c].load();
  while (seen < gen) {
    if (claimed_[c].compare_exchange_weak(seen, gen)) return true;
  }
  return false;
}

void ThreadPool::RunClaimable(uint64_t gen, int thread) {
  const size_t threads = static_cast<size_t>(num_threads_);
  for (size_t k = 0; k < threads; ++k) {
    const size_t c = (static_cast<size_t>(thread) + k) % threads;
    if (!TryClaim(c, gen)) continue;
    const size_t begin = job_chunk_ * c;  // read only while a claimed chunk keeps the job alive
    if (begin < job_n_) (*job_)(begin, std::min(begin + job_chunk_, job_n_), thread);
    done_.fetch_add(1);
    YieldBetweenChunks(yield_epoch_, fast_yield_until_ns_);  // after the count: no thread waits on this chunk meanwhile
  }
}

void ThreadPool::YieldCores() {
  fast_yield_until_ns_.store(NowNs() + kFastYieldWindowNs, std::memory_order_relaxed);
  yield_epoch_.fetch_add(1, std::memory_order_relaxed);
  YieldIfAsked(yield_epoch_);
}

void ThreadPool::ParallelForEach(size_t n, const std::function<void(size_t, int)>& fn) {
  std::atomic<size_t> next{0};
  const size_t parts = std::min<size_t>(n, static_cast<size_t>(num_threads_));
  ParallelFor(parts, 1, [&](size_t, size_t, int thread) {
    for (size_t i = next.fetch_add(1, std::memory_order_relaxed); i < n;
         i = next.fetch_add(1, std::memory_order_relaxed)) {
      fn(i, thread);
    }
  });
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    int spins = 0;
    int64_t last_yield_ns = 0;
    while (generation_.load() == seen) {
      if ((spins & 63) == 0) YieldIfAsked(yield_epoch_);
      CpuPause();
      // Past kSpinLimit, on only while KeepAwakeUntil asks (its deadline
      // looked at every 1,024 spins, a few microseconds).
      if (++spins >= kSpinLimit && (spins & 1023) == 0) {
        const int64_t now = NowNs();
        if (now >= awake_until_ns_.load(std::memory_order_relaxed)) break;
        if (YieldDue(now, &last_yield_ns, kAwakeYieldNs)) sched_yield();
      }
    }
    if (generation_.load() == seen) {
      MutexLock lock(mu_);
      sleeping_.fetch_add(1);
      while (generation_.load() == seen) lock.Wait(work_cv_);
      sleeping_.fetch_sub(1);
    }
    // The generation first, then stop_: the destructor sets stop_ before it
    // bumps the generation, so a worker that reads the destructor's
    // generation also sees stop_ (read the other way round, a worker checked
    // stop_, was descheduled, then read that generation and ran a chunk of
    // a job that was gone: a segfault during join under CPU contention).
    seen = generation_.load();
    if (stop_.load()) return;
    RunClaimable(seen, index);
  }
}

}  // namespace pc
