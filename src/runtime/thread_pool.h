// Persistent worker pool. Between the jobs of one forward pass (microseconds
// apart) workers spin briefly on an atomic generation counter; after
// kSpinLimit they sleep on a condition variable, so an idle pool never keeps a
// core busy (the HTTP threads need it).
// Thread-safety: ParallelFor may be called from one thread at a time per pool
// (the engine's step loop); it blocks until every chunk has run.
#pragma once
#include <atomic>
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

  // Runs fn(i, thread_index) for every i in [0, n); threads claim the next
  // index as they finish one (for items of uneven cost, such as attention
  // over contexts of different lengths).
  void ParallelForEach(size_t n, const std::function<void(size_t, int)>& fn);

 private:
  void WorkerLoop(int index);

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  // The job: written before generation_ is bumped, read after it is seen.
  const std::function<void(size_t, size_t, int)>* job_ = nullptr;
  size_t job_n_ = 0, job_chunk_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> sleeping_{0};
  std::atomic<bool> stop_{false};
};

// Number of physical cores (distinct core ids), at least 1.
int PhysicalCoreCount();

}  // namespace pc
