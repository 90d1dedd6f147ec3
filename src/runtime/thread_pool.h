// Persistent worker pool. Workers sleep on a condition variable between jobs
// (no idle spinning that would steal a core from HTTP threads).
// Thread-safety: ParallelFor may be called from one thread at a time per pool
// (the engine's step loop); it blocks until every chunk has run.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
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
  void ParallelFor(size_t n, size_t grain,
                   const std::function<void(size_t, size_t, int)>& fn);

 private:
  void WorkerLoop(int index);

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  const std::function<void(size_t, size_t, int)>* job_ = nullptr;
  size_t job_n_ = 0, job_chunk_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

// Number of physical cores (distinct core ids), at least 1.
int PhysicalCoreCount();

}  // namespace pc
