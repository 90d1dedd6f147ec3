// Continuous-batching scheduler: pure bookkeeping (no I/O, no threads, no
// clock of its own; times are passed in). The engine loop drives it:
//
//   Submit(req)                 a request joins the waiting queue
//   Admit(now_ns, pool) -> ids  requests to start now (the engine looks up
//                               their cached prefix and calls Started)
//   Started(id)                 an admitted request starts with the K/V its
//                               progress record says it has (the cache's hit)
//   Plan(prefill) -> work       one step: 1 decode token for every running
//                               sequence past its prompt, then prefill
//                               chunks (tenants in turn, within a tenant
//                               cheap first: see below), up to `prefill` (tokens and
//                               ms at the chunk's depth, by the standing of
//                               the tenant whose turn it is: StepBudget)
//                               and the step's token budget
//   Advanced(id, n)             n tokens of that work item were computed: the
//                               progress record counts them (its one writer
//                               once started)
//   Preempt(id, resumed)        the pool ran short: the sequence goes back to
//                               the head of the queue as `resumed` (its prompt
//                               now includes what it generated)
//   Finish(id) / Cancel(id)     the sequence ends
//
// Admission is bounded by a running-sequence cap and by KV blocks, counted
// as a paged server should: a request needs the blocks of its prompt that
// the pool does not already hold (a prefix cached or shared with a running
// request costs nothing), plus one; blocks for generated tokens are taken
// as sequences grow, so a request without max_tokens costs what it uses.
// Blocks promised to admitted prompts not yet computed are counted until
// they are, and a watermark stays free for running sequences to grow. When
// the pool still runs short in a step the engine preempts the most recently
// admitted sequence (NewestStarted); its computed blocks stay in the prefix
// cache, so resuming it is a prefix hit.
// Fairness between tenants: admission ranks a tenant's waiting requests
// after its running ones (FairOrder) and, while several tenants are active,
// keeps a running slot free for each other tenant; prefill goes to the tenant that
// has had the fewest prefill tokens in the last seconds (Plan), so one
// tenant's burst does not hold another's request behind all of it; with one
// tenant both are FIFO. Among the tenants with requests in flight, one that
// has had more than 1.25x its equal share of recent prefill tokens prefills
// only in what the step target leaves after the decodes (its own flood then
// queues instead of growing everyone's steps), and one below its share with
// nothing waiting for admission (it sends less than its share of the
// machine) prefills in the whole step, so its prompt is not cut into slices
// between the others' decode batches; the rest get the shared budget.
// Cache-aware ordering: admission and prefill turns within a tenant go
// cheapest predicted prefill first (cached leading blocks cost nothing), as
// far as CheapFirstOrder allows: a request is passed by later, cheaper ones
// only while the time they take ahead of it stays within a tenth of its
// wait so far plus its own prefill (kPassAllowance), so a mostly cached
// prompt is not queued behind misses, and a miss waits at most about 1.11x
// what first come, first served would give it; Admission::kFifo orders by
// arrival alone. A request computing (or first in line to compute) a first
// block that other waiting requests start with counts them as served by
// its prefill, so a shared prefix is computed early and its requests hit
// it. The time a request was passed for is accounted as it happens
// (admissions ahead of it, prefill chunks while it got none).
// A waiting request whose prompt shares a block that a
// running request is still computing waits for it (and is then admitted with
// a cache hit) instead of computing the same prefix twice; requests behind it
// that do not share that prefix go ahead.
// Thread-safety: none; owned by the engine loop.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/hash128.h"
#include "sched/request_progress.h"
#include "sched/step_budget.h"

namespace pc {

// The order in which waiting requests are admitted and running prompts
// prefilled (within a tenant): first come, first served, or cache-aware
// (cheap first within what the others allow: see above and cheap_first.h).
enum class Admission { kFifo, kCacheAware };

struct SchedulerOptions {
  size_t max_batch_tokens = 256;  // tokens per forward pass (decode + prefill chunks)
  size_t max_running = 32;        // sequences in flight
  size_t max_waiting = 256;       // queue bound; Submit refuses past it
  size_t num_blocks = 0;          // KV pool size
  size_t block_size = 16;         // tokens per block
  size_t watermark_blocks = 1;    // kept free at admission for running sequences to grow
  Admission admission = Admission::kCacheAware;
  // A prompt's last this-many tokens are prefilled as a chunk of their own,
  // never joined to earlier ones (0: no such rule; Model::prompt_tail_tokens
  // says why a model may ask for it). The tail itself is split only when a
  // step's budget is smaller than it.
  size_t prompt_tail_tokens = 0;
};


struct SchedRequest {
  uint64_t id = 0;
  size_t num_prompt_tokens = 0;
  size_t max_new_tokens = 0;
  // Chained hashes of the prompt's full blocks (empty when the request
  // bypasses the cache: it neither waits for nor is waited on).
  std::vector<Hash128> block_hashes;
  int64_t arrival_ns = 0;
  uint64_t tenant = 0;  // API-key tenant (hashed); 0 without keys
  // Its progress (request_progress.h), shared with the engine and the
  // cache; Submit makes one when it is null (tests, one-off callers).
  std::shared_ptr<RequestProgress> progress;
};

// The pool as admission sees it. The defaults admit on the running cap alone.
struct PoolView {
  size_t free_blocks = SIZE_MAX;  // empty plus cached-unreferenced blocks
  // Leading blocks of the request's prompt that the pool holds now.
  std::function<size_t(const SchedRequest&)> cached_leading_blocks;
  // Prices a prompt's remaining prefill for cache-aware admission; null: a
  // token counts as a millisecond.
  const StepBudget* cost = nullptr;
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
  std::vector<uint64_t> Admit(int64_t now_ns, const PoolView& pool = {});
  // The request starts with the K/V its progress record counts (the prefix
  // cache wrote it); the second form writes that count first (the
  // simulation, tests: no cache).
  void Started(uint64_t id);
  void Started(uint64_t id, size_t num_cached_tokens);
  std::vector<WorkItem> Plan(size_t max_prefill_tokens = SIZE_MAX) const;
  std::vector<WorkItem> Plan(const PrefillBudget& budget) const;
  // The step the server runs: Plan under the budget's allowance for what is
  // running now (decodes, their context, the prefill depth, a lone prompt).
  // The engine and the advisor's simulation both plan with this.
  std::vector<WorkItem> PlanStep(const StepBudget& budget) const {
    return Plan(budget.Prefill(NumDecoding(), DecodeContext(), PrefillDepth(), LonePrefill()));
  }
  // A tenant's share of recent prefill tokens among those in flight.
  enum class Standing { kFair, kPastShare, kBelowShare };
  Standing StandingOf(uint64_t tenant) const;
  // Running sequences past their prompt: the decode items of the next Plan.
  size_t NumDecoding() const;
  // Their cached positions summed (what their attention reads).
  double DecodeContext() const;
  // The cached positions of the prompt in prefill whose turn comes first
  // (PrefillTurns; 0: none): where a step without decodes spends its chunk.
  size_t PrefillDepth() const;
  // One prompt in prefill and nothing else running or waiting: no one waits
  // on its steps.
  bool LonePrefill() const;
  void Advanced(uint64_t id, size_t num_tokens);
  // Removes the request wherever it is; false if unknown.
  bool Finish(uint64_t id);
  bool Cancel(uint64_t id) { return Finish(id); }
  // The most recently admitted running sequence that has started, if any.
  std::optional<uint64_t> NewestStarted() const;
  size_t NumStarted() const;
  // Removes a running sequence and puts `resumed` (same id and progress
  // record, its count back to 0 until it starts again) at the head of the
  // queue, past the queue bound: it was admitted once already.
  void Preempt(uint64_t id, SchedRequest resumed);

  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  // Blocks admitted prompts will still take from the pool (see above).
  size_t num_promised_blocks() const;
  // Blocks a request holds at most (prompt + max new tokens, plus one for a
  // full-hit copy): more than the pool has is refused at Submit.
  size_t BlocksNeeded(const SchedRequest& r) const;
  // Blocks admission counts for a request's prompt, given how many of its
  // leading blocks the pool holds.
  size_t PromptBlocks(const SchedRequest& r, size_t cached_leading) const;
  // Whether the waiting request waits for another's prefix (for tests).
  bool IsWaitingForPrefix(uint64_t id) const;

 private:
  struct Running {
    SchedRequest req;  // req.progress: what it has computed
    size_t cached_blocks_at_admit = 0;  // leading prompt blocks the pool held then
    bool started = false;
    size_t num_computed() const { return req.progress->num_computed; }
    bool in_prefill() const { return num_computed() < req.num_prompt_tokens; }
  };
  // Running prompts still in prefill, against the slots they may hold: all
  // but a quarter of max_running. The reserved quarter admits only a prompt
  // that costs no more than what each of them has left, or whose whole
  // prefill fits in one step (one_step_ms, the step target), so cheap-first
  // prefill would run it first anyway (a hit, a short prompt): long prompts that
  // cheaper ones keep passing cannot hold every slot while the cheap ones
  // queue for one (measured: hits waited 5-60 s in mooncake's overload
  // replay with 32 slots held by prompts in prefill for a minute each).
  // The one-step rule: one prompt near its end (a 1-token prompt, another
  // hit's last chunk) made the least left ~1 ms, and a whole-prompt hit
  // with 8 tokens to compute waited 32 ms for it (mooncake at the AVX2
  // level); that prompt frees its slot within the step anyway.
  struct PrefillSlots {
    size_t open = 0, held = 0;
    double least_left_ms = std::numeric_limits<double>::infinity();
    double one_step_ms = 0;
    bool Admits(double cost_ms) const { return held < open || cost_ms <= least_left_ms || cost_ms <= one_step_ms; }
    void Add(double cost_ms) {
      ++held;
      least_left_ms = std::min(least_left_ms, cost_ms);
    }
  };
  PrefillSlots PrefillSlotsNow() const;
  bool SharesPendingBlock(const SchedRequest& r) const;
  void MarkPending(const Running& r, size_t from_block);
  void ReleasePending(Running& r, size_t old_computed);
  void DropPending(const Running& r);
  std::vector<size_t> FairOrder(const PoolView& pool) const;
  double CostMs(size_t first_token, size_t num_tokens) const;
  // Waiting requests by tenant and by the hash of their first block (kept
  // as they come and go: the simulator's queues hold thousands).
  void CountWaiting(const SchedRequest& r, int delta);
  size_t WaitingWithFirstBlock(const Hash128& h) const;
  std::vector<size_t> WaitersOf(std::span<const std::pair<uint64_t, const Running*>> in_prefill) const;
  // The sequences in prefill in the order their turns come (Plan): ids,
  // the tenant with the fewest recent prefill tokens first.
  std::vector<uint64_t> PrefillTurns() const;
  double PassedMs(uint64_t id) const;
  void SettlePassing();
  // A request may be passed for this share of its wait plus its own
  // prefill (cheap_first.h): a miss's time to first token stays within
  // 1 / (1 - 0.1) = 1.11x first come, first served.
  static constexpr double kPassAllowance = 0.1;
  void DecayServed(int64_t now_ns);
  size_t Promised(const Running& r) const;

  SchedulerOptions opt_;
  std::deque<SchedRequest> waiting_;
  std::vector<uint64_t> order_;  // running ids, admission order
  std::unordered_map<uint64_t, Running> running_;
  // Block hash -> number of running requests that will compute it.
  std::unordered_map<Hash128, int, Hash128Hasher> pending_;
  // Recent prefill tokens per tenant (decayed, 10 s half-life).
  std::unordered_map<uint64_t, double> served_;
  int64_t last_decay_ns_ = 0;
  // Cache-aware order: the clock and prices of the last Admit, the time
  // each request has been passed for, and the last step's prefill chunks
  // (id, ms) and the requests they advanced, settled at the next Admit.
  int64_t now_ns_ = 0;
  const StepBudget* cost_ = nullptr;
  std::unordered_map<uint64_t, double> passed_ms_;
  std::vector<std::pair<uint64_t, double>> last_chunks_;
  std::unordered_set<uint64_t> advanced_;
  std::unordered_map<Hash128, size_t, Hash128Hasher> waiting_first_;
  std::unordered_map<uint64_t, size_t> waiting_tenants_;  // tenant -> waiting requests
  // What decided the last Admit that admitted nothing (see Admit).
  uint64_t waiting_version_ = 0, pending_version_ = 0;
  std::array<uint64_t, 6> last_empty_admit_ = {};
};

}  // namespace pc
