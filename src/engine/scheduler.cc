#include "engine/scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"

namespace pc {

Scheduler::Scheduler(const SchedulerOptions& opt) : opt_(opt) {
  PC_CHECK(opt_.block_size > 0 && opt_.max_batch_tokens > 0 && opt_.max_running > 0);
}

size_t Scheduler::BlocksNeeded(const SchedRequest& r) const {
  const size_t tokens = r.num_prompt_tokens + r.max_new_tokens;
  return (tokens + opt_.block_size - 1) / opt_.block_size + 1;  // +1: a full-hit copy
}

SubmitResult Scheduler::Submit(SchedRequest req) {
  if (BlocksNeeded(req) > opt_.num_blocks) return SubmitResult::kTooLarge;
  if (waiting_.size() >= opt_.max_waiting) return SubmitResult::kQueueFull;
  waiting_.push_back(std::move(req));
  return SubmitResult::kQueued;
}

bool Scheduler::SharesPendingBlock(const SchedRequest& r) const {
  for (const Hash128& h : r.block_hashes) {
    if (pending_.count(h) != 0) return true;
  }
  return false;
}

bool Scheduler::IsWaitingForPrefix(uint64_t id) const {
  for (const SchedRequest& r : waiting_) {
    if (r.id == id) return SharesPendingBlock(r);
  }
  return false;
}

size_t Scheduler::PromptBlocks(const SchedRequest& r, size_t cached_leading) const {
  const size_t blocks = (r.num_prompt_tokens + opt_.block_size - 1) / opt_.block_size + 1;  // +1: first decode or a full-hit copy
  return blocks - std::min(cached_leading, blocks);
}

// Blocks an admitted request will still allocate for its prompt: all of its
// uncached prompt blocks until it starts, then those not yet computed.
size_t Scheduler::Promised(const Running& r) const {
  if (r.started && !r.in_prefill()) return 0;
  const size_t done = std::max(r.cached_blocks_at_admit, r.num_computed / opt_.block_size);
  return PromptBlocks(r.req, done);
}

size_t Scheduler::num_promised_blocks() const {
  size_t n = 0;
  for (const auto& [id, r] : running_) n += Promised(r);
  return n;
}

std::vector<uint64_t> Scheduler::Admit(int64_t now_ns, const PoolView& pool) {
  DecayServed(now_ns);
  std::vector<uint64_t> admitted;
  const size_t reserved = num_promised_blocks() + opt_.watermark_blocks;
  size_t avail = pool.free_blocks > reserved ? pool.free_blocks - reserved : 0;
  std::vector<size_t> taken;  // indices into waiting_
  // With several tenants active lately, each leaves a running slot for
  // every other: a flooding tenant cannot hold every slot while another's
  // request waits for one to free.
  std::unordered_map<uint64_t, size_t> slots;  // tenant -> running sequences
  for (const auto& [t, v] : served_) slots.try_emplace(t, 0);
  for (const SchedRequest& w : waiting_) slots.try_emplace(w.tenant, 0);
  for (const auto& [id, r] : running_) ++slots[r.req.tenant];
  const size_t others = slots.empty() ? 0 : slots.size() - 1;
  const size_t per_tenant = opt_.max_running > others ? opt_.max_running - others : 1;
  if (running_.size() >= opt_.max_running) return admitted;
  for (size_t i : FairOrder(pool)) {
    if (running_.size() >= opt_.max_running) break;
    SchedRequest& w = waiting_[i];
    if (slots[w.tenant] >= per_tenant) continue;  // its slots are full; other tenants may go
    if (SharesPendingBlock(w)) continue;  // its prefix is being computed: wait for it, let others pass
    const size_t cached = pool.cached_leading_blocks ? pool.cached_leading_blocks(w) : 0;
    const size_t need = PromptBlocks(w, cached);
    // Keep the order for big requests, but never leave the pool idle: a
    // request that fits an empty running set goes (Submit checked the pool).
    if (pool.free_blocks != SIZE_MAX && need > avail && !running_.empty()) break;
    avail -= std::min(need, avail);
    Running r;
    r.req = std::move(w);
    r.cached_blocks_at_admit = cached;
    const uint64_t id = r.req.id;
    // Until Started reports the hit length, assume every block is computed
    // here, so later arrivals with the same prefix wait.
    MarkPending(r, 0);
    order_.push_back(id);
    ++slots[r.req.tenant];
    running_.emplace(id, std::move(r));
    admitted.push_back(id);
    taken.push_back(i);
  }
  std::sort(taken.rbegin(), taken.rend());
  for (size_t i : taken) waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
  return admitted;
}

// Waiting requests in the order admission considers them: by OrderKey
// (FIFO, or cache-aware: what the pool holds of each prompt makes its
// prefill cheap), then a tenant's k-th waiting request ranks k plus the
// tenant's running sequences, ties in key order. With one tenant this is the
// key order; with several, a tenant that floods the queue cannot keep a
// quiet one's request behind its whole burst.
std::vector<size_t> Scheduler::FairOrder(const PoolView& pool) const {
  std::vector<std::pair<int64_t, size_t>> keyed;  // (key, index)
  keyed.reserve(waiting_.size());
  for (size_t i = 0; i < waiting_.size(); ++i) {
    const SchedRequest& w = waiting_[i];
    size_t cached = 0;
    if (opt_.admission == Admission::kCacheAware && pool.cached_leading_blocks) {
      cached = std::min(pool.cached_leading_blocks(w) * opt_.block_size, w.num_prompt_tokens);
    }
    keyed.emplace_back(OrderKey(w, cached, w.num_prompt_tokens - cached, pool.cost), i);
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::unordered_map<uint64_t, size_t> load;
  for (const auto& [id, r] : running_) ++load[r.req.tenant];
  std::vector<std::pair<size_t, size_t>> ranked;  // (rank, index)
  ranked.reserve(keyed.size());
  for (const auto& [key, i] : keyed) ranked.emplace_back(load[waiting_[i].tenant]++, i);
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<size_t> order;
  order.reserve(ranked.size());
  for (const auto& [rank, i] : ranked) order.push_back(i);
  return order;
}

void Scheduler::MarkPending(const Running& r, size_t from_block) {
  for (size_t k = from_block; k < r.req.block_hashes.size(); ++k) ++pending_[r.req.block_hashes[k]];
}

// Drops pending marks for blocks completed between old_computed and now.
void Scheduler::ReleasePending(Running& r, size_t old_computed) {
  const size_t bs = opt_.block_size;
  const size_t n_hashes = r.req.block_hashes.size();
  const size_t from = std::min(old_computed / bs, n_hashes);
  const size_t to = std::min(r.num_computed / bs, n_hashes);
  for (size_t k = from; k < to; ++k) {
    auto it = pending_.find(r.req.block_hashes[k]);
    PC_CHECK(it != pending_.end());
    if (--it->second == 0) pending_.erase(it);
  }
}

void Scheduler::Started(uint64_t id, size_t num_cached_tokens) {
  auto it = running_.find(id);
  PC_CHECK(it != running_.end() && !it->second.started);
  Running& r = it->second;
  // All of them: its first token comes from kept logits (LogitsMemo).
  PC_CHECK(num_cached_tokens <= r.req.num_prompt_tokens);
  r.started = true;
  r.num_computed = num_cached_tokens;
  ReleasePending(r, 0);
}

size_t Scheduler::NumDecoding() const {
  size_t n = 0;
  for (const auto& [id, r] : running_) n += r.started && !r.in_prefill();
  return std::min(n, opt_.max_batch_tokens);
}

double Scheduler::DecodeContext() const {
  double n = 0;
  for (const auto& [id, r] : running_) {
    if (r.started && !r.in_prefill()) n += static_cast<double>(r.num_computed + r.num_generated);
  }
  return n;
}

std::vector<WorkItem> Scheduler::Plan(size_t max_prefill_tokens) const {
  return Plan(PrefillBudget{max_prefill_tokens, max_prefill_tokens, max_prefill_tokens});
}

Scheduler::Standing Scheduler::StandingOf(uint64_t tenant) const {
  std::unordered_map<uint64_t, double> in_flight;  // tenant -> recent prefill tokens
  auto note = [&](uint64_t t) {
    auto it = served_.find(t);
    in_flight[t] = it == served_.end() ? 0.0 : it->second;
  };
  bool backlog = false;  // requests of this tenant wait for admission
  for (const auto& [id, r] : running_) note(r.req.tenant);
  for (const SchedRequest& r : waiting_) {
    note(r.tenant);
    backlog = backlog || r.tenant == tenant;
  }
  note(tenant);
  if (in_flight.size() < 2) return Standing::kFair;
  double total = 0;
  for (const auto& [t, v] : in_flight) total += v;
  const double share = total / static_cast<double>(in_flight.size());
  const double mine = in_flight[tenant];
  if (mine > 1.25 * share) return Standing::kPastShare;
  // Below its share and asking for no more than is running: what it sends
  // is less than its share of the machine, so it is served at full speed.
  if (mine < share && !backlog) return Standing::kBelowShare;
  return Standing::kFair;
}

std::vector<WorkItem> Scheduler::Plan(const PrefillBudget& prefill) const {
  std::vector<WorkItem> work;
  size_t budget = opt_.max_batch_tokens;
  for (uint64_t id : order_) {  // decode first: running streams never stall
    const Running& r = running_.at(id);
    if (!r.started || r.in_prefill() || budget == 0) continue;
    work.push_back({id, 1, true, false});
    --budget;
  }
  // Prompts take turns by tenant: the tenant that has had the fewest
  // prefill tokens lately goes first, so a tenant with a long queue cannot
  // hold back one that sends little; within a tenant, by OrderKey (the
  // cheapest remaining prefill first, aged by arrival; arrival order when
  // FIFO). Each chunk is bounded by its tenant's budget less what the step
  // has prefilled already, in tokens and, when the budget prices chunks, in
  // milliseconds at the chunk's depth.
  struct Turn {
    double served;  // the tenant's recent prefill tokens
    int64_t key;    // OrderKey
    uint64_t id;
  };
  std::vector<Turn> prefills;  // admission order
  for (uint64_t id : order_) {
    const Running& r = running_.at(id);
    if (!r.started || !r.in_prefill()) continue;
    auto it = served_.find(r.req.tenant);
    const size_t left = r.req.num_prompt_tokens - r.num_computed;
    prefills.push_back({it == served_.end() ? 0.0 : it->second, OrderKey(r.req, r.num_computed, left, prefill.cost), id});
  }
  std::stable_sort(prefills.begin(), prefills.end(), [](const Turn& a, const Turn& b) {
    return a.served != b.served ? a.served < b.served : a.key < b.key;
  });
  // The caps are on the step's prefill so far, at the turn of each tenant.
  size_t used_tokens = 0;
  double used_ms = 0;
  std::unordered_map<uint64_t, std::pair<size_t, double>> caps;  // tenant -> (tokens, ms)
  for (const Turn& t : prefills) {
    const Running& r = running_.at(t.id);
    auto [cap, fresh] = caps.try_emplace(r.req.tenant);
    if (fresh) {
      const Standing st = StandingOf(r.req.tenant);
      cap->second = st == Standing::kPastShare    ? std::pair{prefill.within_target, prefill.within_target_ms}
                    : st == Standing::kBelowShare ? std::pair{prefill.room, std::numeric_limits<double>::infinity()}
                                                  : std::pair{prefill.shared, prefill.shared_ms};
    }
    const auto [cap_tokens, cap_ms] = cap->second;
    size_t allowed = std::min(budget, cap_tokens > used_tokens ? cap_tokens - used_tokens : 0);
    if (prefill.cost && allowed > 0) {
      const size_t fits = prefill.cost->PrefillTokensWithin(cap_ms - used_ms, r.num_computed);
      // A step's first chunk is at least a token: prompts always advance,
      // however deep the position or slow the machine.
      allowed = std::min(allowed, std::max<size_t>(fits, used_tokens == 0 ? 1 : 0));
    }
    if (allowed == 0) continue;
    const size_t left = r.req.num_prompt_tokens - r.num_computed;
    const size_t n = std::min(left, allowed);
    work.push_back({t.id, n, false, n == left});
    budget -= n;
    used_tokens += n;
    if (prefill.cost) used_ms += prefill.cost->PrefillMs(r.num_computed, n);
  }
  return work;
}

// When a request's prefill should run, as an order key (smaller first):
// FIFO by arrival, or (cache-aware) arrival plus its predicted remaining
// prefill time. A request mostly cached costs little and goes ahead of
// misses that arrived shortly before it; a request is passed only by ones
// that arrived before its key, so none starves: its wait grows by at most
// its own predicted prefill time (SGLang's longest-prefix-first, aged).
int64_t Scheduler::OrderKey(const SchedRequest& r, size_t first_token, size_t num_tokens, const StepBudget* cost) const {
  if (opt_.admission == Admission::kFifo) return r.arrival_ns;
  const double ms = cost ? cost->PrefillMs(first_token, num_tokens) : static_cast<double>(num_tokens);
  return r.arrival_ns + static_cast<int64_t>(std::min(ms, 1e9) * 1e6);
}

void Scheduler::Advanced(uint64_t id, size_t num_tokens) {
  auto it = running_.find(id);
  PC_CHECK(it != running_.end() && it->second.started);
  Running& r = it->second;
  if (r.in_prefill()) {
    PC_CHECK(r.num_computed + num_tokens <= r.req.num_prompt_tokens);
    const size_t old = r.num_computed;
    r.num_computed += num_tokens;
    ReleasePending(r, old);
    served_[r.req.tenant] += static_cast<double>(num_tokens);
  } else {
    r.num_generated += num_tokens;
  }
}

// Blocks it never computed are no longer pending on its account.
void Scheduler::DropPending(const Running& r) {
  const size_t done_blocks = r.started ? std::min(r.num_computed / opt_.block_size, r.req.block_hashes.size()) : 0;
  for (size_t k = done_blocks; k < r.req.block_hashes.size(); ++k) {
    auto p = pending_.find(r.req.block_hashes[k]);
    PC_CHECK(p != pending_.end());
    if (--p->second == 0) pending_.erase(p);
  }
}

bool Scheduler::Finish(uint64_t id) {
  auto w = std::find_if(waiting_.begin(), waiting_.end(), [&](const SchedRequest& r) { return r.id == id; });
  if (w != waiting_.end()) {
    waiting_.erase(w);
    return true;
  }
  auto it = running_.find(id);
  if (it == running_.end()) return false;
  DropPending(it->second);
  order_.erase(std::find(order_.begin(), order_.end(), id));
  running_.erase(it);
  return true;
}

// Recent prefill tokens per tenant fade with a 10 s half-life: fairness
// over the last seconds, neither owed nor owing for older history.
void Scheduler::DecayServed(int64_t now_ns) {
  if (last_decay_ns_ == 0 || now_ns <= last_decay_ns_) {
    last_decay_ns_ = std::max(last_decay_ns_, now_ns);
    return;
  }
  const double factor = std::exp2(-static_cast<double>(now_ns - last_decay_ns_) / 10e9);
  last_decay_ns_ = now_ns;
  for (auto it = served_.begin(); it != served_.end();) {
    it->second *= factor;
    it = it->second < 1.0 ? served_.erase(it) : std::next(it);
  }
}

std::optional<uint64_t> Scheduler::NewestStarted() const {
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    if (running_.at(*it).started) return *it;
  }
  return std::nullopt;
}

size_t Scheduler::NumStarted() const {
  size_t n = 0;
  for (const auto& [id, r] : running_) n += r.started;
  return n;
}

void Scheduler::Preempt(uint64_t id, SchedRequest resumed) {
  PC_CHECK(resumed.id == id && running_.count(id) != 0);
  Finish(id);
  waiting_.push_front(std::move(resumed));
}

}  // namespace pc
