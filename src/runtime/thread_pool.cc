#include "runtime/thread_pool.h"

#include <fstream>
#include <set>
#include <string>
#include <utility>

#include "base/check.h"

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

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(num_threads > 0 ? num_threads : PhysicalCoreCount()) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
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
  {
    std::lock_guard lock(mu_);
    PC_CHECK(job_ == nullptr);
    job_ = &fn;
    job_n_ = n;
    job_chunk_ = chunk;
    pending_ = num_threads_ - 1;
    ++generation_;
  }
  work_cv_.notify_all();
  fn(0, std::min(chunk, n), 0);
  std::unique_lock lock(mu_);
  done_cv_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(size_t, size_t, int)>* job;
    size_t n, chunk;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
      chunk = job_chunk_;
    }
    const size_t begin = chunk * static_cast<size_t>(index);
    if (begin < n) (*job)(begin, std::min(begin + chunk, n), index);
    {
      std::lock_guard lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

}  // namespace pc
