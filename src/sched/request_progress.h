// One request's progress: the single record the scheduler, the prefix
// cache's sequence and the engine share (as vLLM's Request carries its
// num_computed_tokens), so what has K/V is counted once.
//
//   tokens        the prompt, then every sampled token (a preempted request
//                 keeps them: resumed, it prefills them as its prompt)
//   num_computed  tokens [0, num_computed) have K/V in the sequence's blocks
//
// Who writes: the prefix cache when a sequence starts (what it adopted from
// the pool), the scheduler as steps complete (Scheduler::Advanced), the
// engine when it samples a token (appends to tokens). The sequence indexes
// its blocks as num_computed passes them; the scheduler's prefill and decode
// state follow from num_computed against the prompt it queued. The
// advisor's simulation keeps the count and no tokens.
// Thread-safety: none; the engine's loop thread owns it (the scheduler's
// writes happen under the engine's lock, on that thread).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace pc {

struct RequestProgress {
  std::vector<int32_t> tokens;
  size_t num_computed = 0;
};

}  // namespace pc
