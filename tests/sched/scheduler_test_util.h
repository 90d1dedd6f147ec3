// Requests and options for the scheduler's tests (scheduler_test.cc,
// scheduler_admission_test.cc): the scheduler is pure bookkeeping, and these
// tests drive it by hand.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "sched/scheduler.h"

namespace pc::sched_test {

inline SchedRequest Req(uint64_t id, size_t prompt, size_t max_new, std::vector<Hash128> hashes = {}) {
  SchedRequest r;
  r.id = id, r.num_prompt_tokens = prompt, r.max_new_tokens = max_new, r.block_hashes = std::move(hashes);
  return r;
}

inline std::vector<Hash128> Chain(uint64_t tag, size_t n) {
  std::vector<Hash128> h;
  for (size_t i = 0; i < n; ++i) h.push_back(Hash128{tag * 1000 + i, 7});
  return h;
}

inline SchedulerOptions Opts(size_t budget = 64, size_t blocks = 100, size_t running = 8, size_t waiting = 8) {
  SchedulerOptions o;
  o.max_batch_tokens = budget;
  o.num_blocks = blocks;
  o.max_running = running;
  o.max_waiting = waiting;
  o.block_size = 16;
  return o;
}

}  // namespace pc::sched_test
