#include "sched/scheduler.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

#include "base/check.h"
#include "sched/cheap_first.h"

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
  if (!req.progress) req.progress = std::make_shared<RequestProgress>();
  CountWaiting(req, +1);
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
  const size_t done = std::max(r.cached_blocks_at_admit, r.num_computed() / opt_.block_size);
  return PromptBlocks(r.req, done);
}

size_t Scheduler::num_promised_blocks() const {
  size_t n = 0;
  for (const auto& [id, r] : running_) n += Promised(r);
  return n;
}

std::vector<uint64_t> Scheduler::Admit(int64_t now_ns, const PoolView& pool) {
  DecayServed(now_ns);
  now_ns_ = std::max(now_ns_, now_ns);
  cost_ = pool.cost;
  SettlePassing();
  std::vector<uint64_t> admitted;
  if (running_.size() >= opt_.max_running || waiting_.empty()) return admitted;
  // Nothing was admissible last time and nothing that decides it has
  // changed since (the queue, the running set and how many of it still
  // prefill, the prefixes being computed, the pool, the tenants active):
  // the order would not matter; skip it (the advisor's simulated queues
  // hold thousands).
  PrefillSlots prefill = PrefillSlotsNow();
  const std::array<uint64_t, 6> state = {waiting_version_, running_.size(), prefill.held, pending_version_,
                                         pool.free_blocks, served_.size()};
  if (state == last_empty_admit_) return admitted;
  const size_t reserved = num_promised_blocks() + opt_.watermark_blocks;
  size_t avail = pool.free_blocks > reserved ? pool.free_blocks - reserved : 0;
  std::vector<size_t> taken;  // indices into waiting_
  // With several tenants active lately, each leaves a running slot for
  // every other: a flooding tenant cannot hold every slot while another's
  // request waits for one to free.
  std::unordered_map<uint64_t, size_t> slots;  // tenant -> running sequences
  for (const auto& [t, v] : served_) slots.try_emplace(t, 0);
  for (const auto& [t, n] : waiting_tenants_) slots.try_emplace(t, 0);
  for (const auto& [id, r] : running_) ++slots[r.req.tenant];
  const size_t others = slots.empty() ? 0 : slots.size() - 1;
  const size_t per_tenant = opt_.max_running > others ? opt_.max_running - others : 1;
  for (size_t i : FairOrder(pool)) {
    if (running_.size() >= opt_.max_running) break;
    SchedRequest& w = waiting_[i];
    if (slots[w.tenant] >= per_tenant) continue;  // its slots are full; other tenants may go
    if (SharesPendingBlock(w)) continue;  // its prefix is being computed: wait for it, let others pass
    const size_t cached = pool.cached_leading_blocks ? pool.cached_leading_blocks(w) : 0;
    const size_t cached_tokens = std::min(cached * opt_.block_size, w.num_prompt_tokens);
    const double cost_ms = CostMs(cached_tokens, w.num_prompt_tokens - cached_tokens);
    if (!prefill.Admits(cost_ms)) continue;  // the reserved slots: for prompts that would prefill first
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
    prefill.Add(cost_ms);
    ++slots[r.req.tenant];
    running_.emplace(id, std::move(r));
    admitted.push_back(id);
    taken.push_back(i);
  }
  std::sort(taken.rbegin(), taken.rend());
  for (size_t i : taken) waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
  for (uint64_t id : admitted) CountWaiting(running_.at(id).req, -1);
  if (admitted.empty()) last_empty_admit_ = state;
  // Those still waiting were passed by the admitted requests that arrived
  // after them, for those requests' prefill.
  for (uint64_t id : admitted) {
    const Running& r = running_.at(id);
    const size_t cached = std::min(r.cached_blocks_at_admit * opt_.block_size, r.req.num_prompt_tokens);
    const double ms = CostMs(cached, r.req.num_prompt_tokens - cached);
    for (const SchedRequest& w : waiting_) {
      if (w.arrival_ns < r.req.arrival_ns) passed_ms_[w.id] += ms;
    }
  }
  return admitted;
}

// Waiting requests in the order admission considers them: first come,
// first served, or cache-aware (CheapFirstOrder: what the pool holds of each
// prompt makes its prefill cheap); then a tenant's k-th waiting request
// ranks k plus the tenant's running sequences, ties in that order. With one
// tenant this is the first order; with several, a tenant that floods the
// queue cannot keep a quiet one's request behind its whole burst.
std::vector<size_t> Scheduler::FairOrder(const PoolView& pool) const {
  std::vector<size_t> fcfs(waiting_.size());
  std::iota(fcfs.begin(), fcfs.end(), size_t{0});
  std::stable_sort(fcfs.begin(), fcfs.end(),
                   [&](size_t a, size_t b) { return waiting_[a].arrival_ns < waiting_[b].arrival_ns; });
  std::vector<size_t> first = fcfs;
  if (opt_.admission == Admission::kCacheAware) {
    std::unordered_set<Hash128, Hash128Hasher> claimed;  // first blocks whose first waiter is placed
    std::vector<QueueEntry> entries;
    entries.reserve(fcfs.size());
    for (size_t i : fcfs) {
      const SchedRequest& w = waiting_[i];
      const size_t cached = pool.cached_leading_blocks ? std::min(pool.cached_leading_blocks(w) * opt_.block_size, w.num_prompt_tokens) : 0;
      // The first of several waiting requests with one first block computes
      // it for the others (they wait for it: SharesPendingBlock).
      size_t served = 1;
      if (!w.block_hashes.empty() && cached == 0) {
        if (claimed.insert(w.block_hashes[0]).second) served = std::max<size_t>(WaitingWithFirstBlock(w.block_hashes[0]), 1);
      }
      entries.push_back({w.arrival_ns, CostMs(cached, w.num_prompt_tokens - cached), PassedMs(w.id), served});
    }
    const std::vector<size_t> order = CheapFirstOrder(entries, now_ns_, kPassAllowance);
    for (size_t k = 0; k < order.size(); ++k) first[k] = fcfs[order[k]];
  }
  std::unordered_map<uint64_t, size_t> load;
  for (const auto& [id, r] : running_) ++load[r.req.tenant];
  std::vector<std::pair<size_t, size_t>> ranked;  // (rank, index)
  ranked.reserve(first.size());
  for (size_t i : first) ranked.emplace_back(load[waiting_[i].tenant]++, i);
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<size_t> order;
  order.reserve(ranked.size());
  for (const auto& [rank, i] : ranked) order.push_back(i);
  return order;
}

void Scheduler::CountWaiting(const SchedRequest& r, int delta) {
  ++waiting_version_;
  size_t& t = waiting_tenants_[r.tenant];
  t = static_cast<size_t>(static_cast<int64_t>(t) + delta);
  if (t == 0) waiting_tenants_.erase(r.tenant);
  if (r.block_hashes.empty()) return;
  size_t& n = waiting_first_[r.block_hashes[0]];
  n = static_cast<size_t>(static_cast<int64_t>(n) + delta);
  if (n == 0) waiting_first_.erase(r.block_hashes[0]);
}

size_t Scheduler::WaitingWithFirstBlock(const Hash128& h) const {
  auto it = waiting_first_.find(h);
  return it == waiting_first_.end() ? 0 : it->second;
}

Scheduler::PrefillSlots Scheduler::PrefillSlotsNow() const {
  PrefillSlots p;
  p.open = opt_.max_running - opt_.max_running / 4;
  p.one_step_ms = cost_ != nullptr && cost_->knows_prefill_cost() ? cost_->target_ms() : 0;
  for (const auto& [id, r] : running_) {
    if (!r.in_prefill()) continue;
    ++p.held;
    const size_t done = r.started ? r.num_computed()
                                  : std::min(r.cached_blocks_at_admit * opt_.block_size, r.req.num_prompt_tokens);
    p.least_left_ms = std::min(p.least_left_ms, CostMs(done, r.req.num_prompt_tokens - done));
  }
  return p;
}

double Scheduler::CostMs(size_t first_token, size_t num_tokens) const {
  return cost_ ? cost_->PrefillMs(first_token, num_tokens) : static_cast<double>(num_tokens);
}

double Scheduler::PassedMs(uint64_t id) const {
  auto it = passed_ms_.find(id);
  return it == passed_ms_.end() ? 0.0 : it->second;
}

// The prefill chunks of the last step that went to a request while an
// earlier arrival, in prefill too, got nothing: that one was passed (by
// cheap-first order or another tenant's turn) for the chunk's time.
void Scheduler::SettlePassing() {
  for (const auto& [id, ms] : last_chunks_) {
    auto c = running_.find(id);
    const int64_t arrival = c != running_.end() ? c->second.req.arrival_ns : INT64_MIN;
    for (const auto& [mid, m] : running_) {
      if (m.started && m.in_prefill() && m.req.arrival_ns < arrival && advanced_.count(mid) == 0) passed_ms_[mid] += ms;
    }
  }
  last_chunks_.clear();
  advanced_.clear();
}

void Scheduler::MarkPending(const Running& r, size_t from_block) {
  for (size_t k = from_block; k < r.req.block_hashes.size(); ++k) ++pending_[r.req.block_hashes[k]];
}

// Drops pending marks for blocks completed between old_computed and now.
void Scheduler::ReleasePending(Running& r, size_t old_computed) {
  const size_t bs = opt_.block_size;
  const size_t n_hashes = r.req.block_hashes.size();
  const size_t from = std::min(old_computed / bs, n_hashes);
  const size_t to = std::min(r.num_computed() / bs, n_hashes);
  for (size_t k = from; k < to; ++k) {
    auto it = pending_.find(r.req.block_hashes[k]);
    PC_CHECK(it != pending_.end());
    if (--it->second == 0) pending_.erase(it), ++pending_version_;
  }
}

void Scheduler::Started(uint64_t id, size_t num_cached_tokens) {
  auto it = running_.find(id);
  PC_CHECK(it != running_.end());
  it->second.req.progress->num_computed = num_cached_tokens;
  Started(id);
}

void Scheduler::Started(uint64_t id) {
  auto it = running_.find(id);
  PC_CHECK(it != running_.end() && !it->second.started);
  Running& r = it->second;
  // All of them: its first token comes from kept logits (LogitsMemo).
  PC_CHECK(r.num_computed() <= r.req.num_prompt_tokens);
  r.started = true;
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
    if (r.started && !r.in_prefill()) n += static_cast<double>(r.num_computed());
  }
  return n;
}

// The prompt whose turn comes first takes the step's chunk (the others get
// what it leaves), so its depth prices the step's K/V pass. The shallowest
// prompt in prefill priced it before: under load a prompt just admitted (or
// one left a token a step by a deeper one's turn) sat near 0, so steps
// without decodes deep in long prompts were sized as if at depth 0, about
// 38 ms where their fixed part allowed 50 (mooncake at the AVX2 level,
// 2026-12-08: a fifth to a quarter of those steps carried a 1-2 token piece
// of a shallow prompt).
size_t Scheduler::PrefillDepth() const {
  const std::vector<uint64_t> turns = PrefillTurns();
  return turns.empty() ? 0 : running_.at(turns.front()).num_computed();
}

bool Scheduler::LonePrefill() const {
  return waiting_.empty() && running_.size() == 1 && running_.begin()->second.started &&
         running_.begin()->second.in_prefill();
}

std::vector<WorkItem> Scheduler::Plan(size_t max_prefill_tokens) const {
  return Plan(PrefillBudget{max_prefill_tokens, max_prefill_tokens, max_prefill_tokens});
}

Scheduler::Standing Scheduler::StandingOf(uint64_t tenant) const {
  // One tenant in flight (the usual case): nothing to weigh.
  bool others = waiting_tenants_.size() > 1 || (waiting_tenants_.size() == 1 && !waiting_tenants_.count(tenant));
  for (auto it = running_.begin(); it != running_.end() && !others; ++it) others = it->second.req.tenant != tenant;
  if (!others) return Standing::kFair;
  std::unordered_map<uint64_t, double> in_flight;  // tenant -> recent prefill tokens
  auto note = [&](uint64_t t) {
    auto it = served_.find(t);
    in_flight[t] = it == served_.end() ? 0.0 : it->second;
  };
  for (const auto& [id, r] : running_) note(r.req.tenant);
  for (const auto& [t, n] : waiting_tenants_) note(t);
  const bool backlog = waiting_tenants_.count(tenant) != 0;  // requests of this tenant wait for admission
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

// Per prompt in prefill, the waiting requests that share a block it has yet
// to compute: they wait for it (SharesPendingBlock) and then hit it, so its
// prefill serves them too. A block all of them share but that is computed
// (a common system prompt) makes nobody wait and counts for nothing.
std::vector<size_t> Scheduler::WaitersOf(std::span<const std::pair<uint64_t, const Running*>> in_prefill) const {
  std::vector<size_t> waiters(in_prefill.size(), 0);
  std::unordered_map<Hash128, size_t, Hash128Hasher> computing;  // block -> index into in_prefill
  for (size_t k = 0; k < in_prefill.size(); ++k) {
    const Running& r = *in_prefill[k].second;
    for (size_t b = r.num_computed() / opt_.block_size; b < r.req.block_hashes.size(); ++b) {
      computing.try_emplace(r.req.block_hashes[b], k);
    }
  }
  if (computing.empty()) return waiters;
  std::vector<size_t> seen;
  for (const SchedRequest& w : waiting_) {
    seen.clear();
    for (const Hash128& h : w.block_hashes) {
      auto it = computing.find(h);
      if (it == computing.end() || std::find(seen.begin(), seen.end(), it->second) != seen.end()) continue;
      seen.push_back(it->second);
      ++waiters[it->second];
    }
  }
  return waiters;
}

// Prompts take turns by tenant: the tenant that has had the fewest recent
// prefill tokens goes first, so a tenant with a long queue cannot hold back
// one that sends little; within a tenant, cache-aware by CheapFirstOrder over
// the remaining prefill (arrival order when FIFO).
std::vector<uint64_t> Scheduler::PrefillTurns() const {
  std::vector<std::pair<uint64_t, const Running*>> in_prefill;  // first come, first served
  for (uint64_t id : order_) {
    const Running& r = running_.at(id);
    if (r.started && r.in_prefill()) in_prefill.emplace_back(id, &r);
  }
  std::stable_sort(in_prefill.begin(), in_prefill.end(),
                   [](const auto& a, const auto& b) { return a.second->req.arrival_ns < b.second->req.arrival_ns; });
  if (opt_.admission == Admission::kCacheAware && in_prefill.size() > 1) {
    const std::vector<size_t> served = WaitersOf(in_prefill);
    std::vector<QueueEntry> entries;
    entries.reserve(in_prefill.size());
    for (size_t k = 0; k < in_prefill.size(); ++k) {
      const auto& [id, r] = in_prefill[k];
      entries.push_back({r->req.arrival_ns, CostMs(r->num_computed(), r->req.num_prompt_tokens - r->num_computed()), PassedMs(id),
                         1 + served[k]});
    }
    const std::vector<size_t> order = CheapFirstOrder(entries, now_ns_, kPassAllowance);
    std::vector<std::pair<uint64_t, const Running*>> reordered;
    reordered.reserve(order.size());
    for (size_t k : order) reordered.push_back(in_prefill[k]);
    in_prefill = std::move(reordered);
  }
  std::vector<std::pair<double, uint64_t>> prefills;  // (the tenant's recent prefill tokens, id)
  prefills.reserve(in_prefill.size());
  for (const auto& [id, r] : in_prefill) {
    auto it = served_.find(r->req.tenant);
    prefills.emplace_back(it == served_.end() ? 0.0 : it->second, id);
  }
  std::stable_sort(prefills.begin(), prefills.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<uint64_t> ids;
  ids.reserve(prefills.size());
  for (const auto& [served, id] : prefills) ids.push_back(id);
  return ids;
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
  // Prompts in their turns (PrefillTurns). Each chunk is bounded by its
  // tenant's budget less what the step has prefilled already, in tokens
  // and, when the budget prices chunks, in milliseconds at its depth.
  size_t used_tokens = 0;
  double used_ms = 0;
  double stop_ms = std::numeric_limits<double>::infinity();  // once a prompt's first token is in the step
  struct Cap {
    size_t tokens;
    double ms;
    bool may_finish;  // at its fair share: may stretch the step to finish a prompt
  };
  std::unordered_map<uint64_t, Cap> caps;  // by tenant
  for (uint64_t id : PrefillTurns()) {
    const Running& r = running_.at(id);
    auto [cap, fresh] = caps.try_emplace(r.req.tenant);
    if (fresh) {
      const Standing st = StandingOf(r.req.tenant);
      cap->second = st == Standing::kPastShare    ? Cap{prefill.within_target, prefill.within_target_ms, false}
                    : st == Standing::kBelowShare ? Cap{prefill.room, std::numeric_limits<double>::infinity(), false}
                                                  : Cap{prefill.shared, prefill.shared_ms, true};
    }
    const size_t cap_tokens = cap->second.tokens;
    const double cap_ms = std::min(cap->second.ms, stop_ms);
    const size_t left = r.req.num_prompt_tokens - r.num_computed();
    const size_t token_room = std::min(budget, cap_tokens > used_tokens ? cap_tokens - used_tokens : 0);
    size_t allowed = token_room;
    if (prefill.cost && allowed > 0) {
      const size_t fits = prefill.cost->PrefillTokensWithin(cap_ms - used_ms, r.num_computed());
      // A step's first chunk is at least a token: prompts always advance,
      // however deep the position or slow the machine.
      allowed = std::min(allowed, std::max<size_t>(fits, used_tokens == 0 ? 1 : 0));
      if (allowed < left && left <= token_room && cap->second.may_finish &&
          used_ms + prefill.cost->PrefillMs(r.num_computed(), left) <= std::min(prefill.finish_ms, stop_ms)) {
        allowed = left;
      }
    }
    if (allowed == 0) continue;
    size_t n = std::min(left, allowed);
    const size_t tail = opt_.prompt_tail_tokens;
    if (tail > 0 && left > tail) n = std::min(n, left - tail);
    work.push_back({id, n, false, n == left});
    budget -= n;
    used_tokens += n;
    if (prefill.cost) used_ms += prefill.cost->PrefillMs(r.num_computed(), n);
    if (n == left) stop_ms = prefill.after_first_token_ms;
  }
  return work;
}

void Scheduler::Advanced(uint64_t id, size_t num_tokens) {
  auto it = running_.find(id);
  PC_CHECK(it != running_.end() && it->second.started);
  Running& r = it->second;
  const size_t old = r.num_computed();
  const bool prefill = r.in_prefill();
  PC_CHECK(!prefill || old + num_tokens <= r.req.num_prompt_tokens);
  r.req.progress->num_computed += num_tokens;
  if (prefill) {
    ReleasePending(r, old);
    last_chunks_.emplace_back(id, CostMs(old, num_tokens));
    advanced_.insert(id);
    served_[r.req.tenant] += static_cast<double>(num_tokens);
  }
}

// Blocks it never computed are no longer pending on its account.
void Scheduler::DropPending(const Running& r) {
  const size_t done_blocks = r.started ? std::min(r.num_computed() / opt_.block_size, r.req.block_hashes.size()) : 0;
  for (size_t k = done_blocks; k < r.req.block_hashes.size(); ++k) {
    auto p = pending_.find(r.req.block_hashes[k]);
    PC_CHECK(p != pending_.end());
    if (--p->second == 0) pending_.erase(p), ++pending_version_;
  }
}

bool Scheduler::Finish(uint64_t id) {
  passed_ms_.erase(id);
  auto w = std::find_if(waiting_.begin(), waiting_.end(), [&](const SchedRequest& r) { return r.id == id; });
  if (w != waiting_.end()) {
    CountWaiting(*w, -1);
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
  if (!resumed.progress) resumed.progress = std::make_shared<RequestProgress>();
  resumed.progress->num_computed = 0;
  CountWaiting(resumed, +1);
  waiting_.push_front(std::move(resumed));
}

}  // namespace pc
