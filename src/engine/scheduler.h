// Continuous-batching scheduler: pure bookkeeping (no I/O, no threads, no
// clock of its own; times are passed in). The engine loop drives it:
//
//   Submit(req)                 a request joins the waiting queue
//   Admit(now_ns) -> ids        requests to start now (the engine looks up
//                               their cached prefix and calls Started)
//   Started(id, num_cached)     prefix-cache hit length of an admitted request
//   Plan() -> work              one step: 1 decode token for every running
//                               sequence past its prompt, the rest of the
//                               token budget as prefill chunks, oldest first
//   Advanced(id, n)             n tokens of that work item were computed
//   Finish(id) / Cancel(id)     the sequence ends; its reservation is freed
//
// Admission is bounded by a running-sequence cap and by KV blocks: each
// running request reserves its worst case (prompt + max new tokens, plus one
// block for a full-hit copy), so a step never runs out of blocks midway.
// Cache-aware ordering: a waiting request whose prompt shares a block that a
// running request is still computing waits for it (and is then admitted with
// a cache hit) instead of computing the same prefix twice; requests behind it
// that do not share that prefix go ahead.
// Thread-safety: none; owned by the engine loop.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>
#include <vector>

#include "base/hash128.h"

namespace pc {

struct SchedulerOptions {
  size_t max_batch_tokens = 256;  // tokens per forward pass (decode + prefill chunks)
  size_t max_running = 32;        // sequences in flight
  size_t max_waiting = 256;       // queue bound; Submit refuses past it
  size_t num_blocks = 0;          // KV pool size
  size_t block_size = 16;         // tokens per block
};

struct SchedRequest {
  uint64_t id = 0;
  size_t num_prompt_tokens = 0;
  size_t max_new_tokens = 0;
  // Chained hashes of the prompt's full blocks (empty when the request
  // bypasses the cache: it neither waits for nor is waited on).
  std::vector<Hash128> block_hashes;
  int64_t arrival_ns = 0;
};

struct WorkItem {
  uint64_t id = 0;
  size_t num_tokens = 0;  // prompt tokens to prefill, or 1 for decode
  bool decode = false;
  bool last_prompt_chunk = false;  // this chunk ends the prompt: sample after it
};

enum class SubmitResult { kQueued, kQueueFull, kTooLarge };

class Scheduler {
 public:
  explicit Scheduler(const SchedulerOptions& opt);

  SubmitResult Submit(SchedRequest req);
  std::vector<uint64_t> Admit(int64_t now_ns);
  void Started(uint64_t id, size_t num_cached_tokens);
  std::vector<WorkItem> Plan() const;
  void Advanced(uint64_t id, size_t num_tokens);
  // Removes the request wherever it is; false if unknown.
  bool Finish(uint64_t id);
  bool Cancel(uint64_t id) { return Finish(id); }

  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  size_t num_reserved_blocks() const { return reserved_blocks_; }
  // Blocks a request needs in the worst case.
  size_t BlocksNeeded(const SchedRequest& r) const;
  // Whether the waiting request waits for another's prefix (for tests).
  bool IsWaitingForPrefix(uint64_t id) const;

 private:
  struct Running {
    SchedRequest req;
    size_t num_computed = 0;  // prompt tokens with K/V (cached or prefilled)
    size_t num_generated = 0;
    size_t reserved = 0;
    bool started = false;
    bool in_prefill() const { return num_computed < req.num_prompt_tokens; }
  };
  bool SharesPendingBlock(const SchedRequest& r) const;
  void MarkPending(const Running& r, size_t from_block);
  void ReleasePending(Running& r, size_t old_computed);

  SchedulerOptions opt_;
  std::deque<SchedRequest> waiting_;
  std::vector<uint64_t> order_;  // running ids, admission order
  std::unordered_map<uint64_t, Running> running_;
  // Block hash -> number of running requests that will compute it.
  std::unordered_map<Hash128, int, Hash128Hasher> pending_;
  size_t reserved_blocks_ = 0;
};

}  // namespace pc
