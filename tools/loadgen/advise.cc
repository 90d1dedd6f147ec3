#include "advise.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <list>
#include <numeric>
#include <set>
#include <unordered_map>

#include "base/piecewise.h"
#include "sched/scheduler.h"
#include "sched/step_budget.h"

namespace pc::loadgen {

using nlohmann::json;

namespace {

// An LRU of block ids with a capacity in blocks and an optional TTL.
class Lru {
 public:
  Lru(size_t capacity, double ttl_s) : cap_(capacity), ttl_s_(ttl_s) {}
  bool Has(uint64_t k, double now_s) {
    auto it = map_.find(k);
    if (it == map_.end()) return false;
    if (ttl_s_ > 0 && now_s - it->second.second > ttl_s_) {
      list_.erase(it->second.first);
      map_.erase(it);
      return false;
    }
    return true;
  }
  // Inserts or refreshes k; returns the ids evicted to make room.
  std::vector<uint64_t> Put(uint64_t k, double now_s) {
    std::vector<uint64_t> out;
    if (cap_ == 0) return out;
    if (auto it = map_.find(k); it != map_.end()) {
      list_.splice(list_.begin(), list_, it->second.first);
      it->second.second = now_s;
      return out;
    }
    list_.push_front(k);
    map_[k] = {list_.begin(), now_s};
    while (map_.size() > cap_) {
      out.push_back(list_.back());
      map_.erase(list_.back());
      list_.pop_back();
    }
    return out;
  }

 private:
  size_t cap_;
  double ttl_s_;
  std::list<uint64_t> list_;
  std::unordered_map<uint64_t, std::pair<std::list<uint64_t>::iterator, double>> map_;
};

}  // namespace

double CostProfile::PrefillMs(size_t first_token, size_t end_token) const {
  if (end_token <= first_token) return 0;
  const double a = InterpolateLinear(prefill_ms_per_token, static_cast<double>(first_token));
  const double b = InterpolateLinear(prefill_ms_per_token, static_cast<double>(end_token));
  return 0.5 * (a + b) * static_cast<double>(end_token - first_token);
}

double CostProfile::ChunkMs(size_t pos, size_t n) const {
  // The samples came from chunks of prefill_chunk_tokens, each paying one
  // pass over the K/V before it: that pass is per chunk, not per token.
  const double pass_per_token_ms = prefill_chunk_tokens > 0 ? kv_pass_ms_per_position / double(prefill_chunk_tokens) : 0;
  const double tokens_ms = PrefillMs(pos, pos + n) - pass_per_token_ms * double(n) * double(pos);
  return std::max(tokens_ms, 0.0) + (prefill_chunk_tokens > 0 ? kv_pass_ms_per_position * double(pos) : 0);
}

double CostProfile::DecodeMs(size_t context) const { return InterpolateLinear(decode_ms_per_token, static_cast<double>(context)); }

double CostProfile::BatchMs(size_t n_tokens, size_t logits_rows, bool greedy) const {
  if (n_tokens == 0) return 0;
  return InterpolateLinear(step_ms_by_tokens, static_cast<double>(n_tokens)) +
         logits_ms_per_row * static_cast<double>(logits_rows > 1 ? logits_rows - 1 : 0) +
         (greedy ? greedy_ms_per_row : sample_ms_per_row) * static_cast<double>(logits_rows);
}

double CostProfile::StepMs(std::span<const size_t> decodes, std::span<const std::pair<size_t, size_t>> chunks,
                           size_t logits_rows, bool greedy) const {
  double summed_ms = 0, depth_ms = 0;
  size_t tokens = 0;
  for (size_t pos : decodes) {
    summed_ms += ChunkMs(pos, 1);
    depth_ms += std::max(DecodeMs(pos) - DecodeMs(0), 0.0);
    ++tokens;
  }
  for (const auto& [pos, n] : chunks) {
    summed_ms += ChunkMs(pos, n);
    depth_ms += std::max(ChunkMs(pos, n) - ChunkMs(0, n), 0.0);
    tokens += n;
  }
  const double scale = step_scale[KindOf(!decodes.empty(), !chunks.empty())];
  if (!step_ms_by_tokens.empty()) return std::max(scale * (BatchMs(tokens, logits_rows, greedy) + depth_ms), 1e-6);
  double ms = summed_ms;  // older profiles: the tokens' prices summed, a decode step at least one decode
  if (!decodes.empty()) {
    double mean_ctx = 0;
    for (size_t pos : decodes) mean_ctx += static_cast<double>(pos) / static_cast<double>(decodes.size());
    ms = std::max(ms, DecodeMs(static_cast<size_t>(mean_ctx)));
  }
  return std::max(scale * ms, 1e-6);
}

double CostProfile::WakeMs(double idle_ms, size_t k) const {
  if (idle_wake_ms.empty() || !(idle_ms > 0)) return 0;
  std::vector<std::pair<double, double>> curve = {{0.0, 0.0}};  // no pause, no extra
  for (const auto& [pause_ms, extra] : idle_wake_ms) curve.emplace_back(pause_ms, k < extra.size() ? extra[k] : 0.0);
  return std::max(InterpolateLinear(curve, std::min(idle_ms, curve.back().first)), 0.0);
}

Result<StepFit> FitStepLog(std::istream& in, const CostProfile& cost, bool greedy) {
  StepFit fit;
  std::array<double, CostProfile::kStepKinds> xy = {0, 0, 0}, xx = {0, 0, 0};
  size_t line_no = 0;
  // Pauses as the simulation has them: the engine idle between two steps
  // (its own work between steps takes well under a millisecond).
  constexpr double kPauseMs = 1.0;
  double last_end_ms = -INFINITY, pause_ms = 0;
  size_t since_pause = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.empty()) continue;
    const json j = json::parse(line, nullptr, false);
    std::vector<size_t> decodes;
    std::vector<std::pair<size_t, size_t>> chunks;
    size_t tokens = 0;
    double ms = 0, t_ms = 0;
    try {
      decodes = j.at("decodes").get<std::vector<size_t>>();
      chunks = j.at("chunks").get<std::vector<std::pair<size_t, size_t>>>();
      tokens = j.at("tokens").get<size_t>();
      ms = j.at("ms").get<double>();
      t_ms = j.at("t_ms").get<double>();
    } catch (const std::exception&) {
      return Errorf("step log line {}: not a `serve --step-log` line", line_no);
    }
    if (!(ms > 0) || !std::isfinite(ms) || !std::isfinite(t_ms)) continue;
    if (t_ms - last_end_ms > kPauseMs) pause_ms = t_ms - last_end_ms, since_pause = 0;
    const double wake_ms = cost.WakeMs(pause_ms, since_pause++);
    last_end_ms = t_ms + ms;
    size_t planned = decodes.size();
    for (const auto& c : chunks) planned += c.second;
    if (tokens != planned) continue;  // drafts verified: priced otherwise
    const double priced = cost.StepMs(decodes, chunks, decodes.size(), greedy) + wake_ms;
    fit.measured_ms += ms;
    fit.priced_ms += priced;
    const size_t kind = CostProfile::KindOf(!decodes.empty(), !chunks.empty());
    xy[kind] += priced * ms;
    xx[kind] += priced * priced;
    ++fit.kind_steps[kind];
    ++fit.steps;
  }
  const double sxx = std::accumulate(xx.begin(), xx.end(), 0.0), sxy = std::accumulate(xy.begin(), xy.end(), 0.0);
  if (!(sxx > 0)) return Status::Error("the step log holds no steps to fit");
  for (size_t k = 0; k < xx.size(); ++k) fit.scale[k] = xx[k] > 0 ? xy[k] / xx[k] : sxy / sxx;
  return fit;
}

double CostProfile::LoadMs(const std::string& tier, size_t num_blocks) const {
  auto it = tiers.find(tier);
  if (it == tiers.end()) return 0;
  return it->second.latency_ms + it->second.ms_per_block * static_cast<double>(num_blocks);
}

json CostProfile::ToJson() const {
  json t = json::object();
  for (const auto& [n, c] : tiers) t[n] = {{"latency_ms", c.latency_ms}, {"ms_per_block", c.ms_per_block}};
  return {{"model", model}, {"block_size", block_size}, {"prefill_ms_per_token", prefill_ms_per_token},
          {"decode_ms_per_token", decode_ms_per_token}, {"kv_pass_ms_per_position", kv_pass_ms_per_position},
          {"prefill_chunk_tokens", prefill_chunk_tokens}, {"step_ms_by_tokens", step_ms_by_tokens},
          {"logits_ms_per_row", logits_ms_per_row}, {"sample_ms_per_row", sample_ms_per_row},
          {"greedy_ms_per_row", greedy_ms_per_row}, {"idle_wake_ms", idle_wake_ms}, {"step_scale", step_scale}, {"tiers", t}};
}

Result<CostProfile> CostProfile::FromJson(const json& j) {
  CostProfile p;
  try {
    p.model = j.value("model", "");
    p.block_size = j.at("block_size").get<size_t>();
    p.prefill_ms_per_token = j.at("prefill_ms_per_token").get<std::vector<std::pair<double, double>>>();
    p.decode_ms_per_token = j.at("decode_ms_per_token").get<std::vector<std::pair<double, double>>>();
    p.kv_pass_ms_per_position = j.value("kv_pass_ms_per_position", 0.0);  // older profiles: none
    p.prefill_chunk_tokens = j.value("prefill_chunk_tokens", size_t{0});
    if (j.contains("step_ms_by_tokens")) {  // older profiles: none
      p.step_ms_by_tokens = j.at("step_ms_by_tokens").get<std::vector<std::pair<double, double>>>();
    }
    p.logits_ms_per_row = j.value("logits_ms_per_row", 0.0);
    p.sample_ms_per_row = j.value("sample_ms_per_row", 0.0);
    p.greedy_ms_per_row = j.value("greedy_ms_per_row", 0.0);
    if (j.contains("step_scale")) p.step_scale = j.at("step_scale").get<std::array<double, kStepKinds>>();  // older: none
    if (j.contains("idle_wake_ms")) {  // older profiles: none
      p.idle_wake_ms = j.at("idle_wake_ms").get<std::vector<std::pair<double, std::vector<double>>>>();
    }
    for (const auto& [n, c] : j.at("tiers").items()) p.tiers[n] = {c.at("latency_ms").get<double>(), c.at("ms_per_block").get<double>()};
  } catch (const std::exception& e) {
    return Errorf("not a cost profile: {}", e.what());
  }
  if (p.prefill_ms_per_token.empty() || p.decode_ms_per_token.empty() || p.block_size == 0) {
    return Status::Error("not a cost profile: empty prefill or decode samples");
  }
  std::sort(p.prefill_ms_per_token.begin(), p.prefill_ms_per_token.end());
  std::sort(p.decode_ms_per_token.begin(), p.decode_ms_per_token.end());
  std::sort(p.step_ms_by_tokens.begin(), p.step_ms_by_tokens.end());
  for (const auto& [n, ms] : p.step_ms_by_tokens) {
    if (!(n >= 1) || !(ms >= 0) || !std::isfinite(ms)) return Status::Error("not a cost profile: a step_ms_by_tokens sample is not (tokens >= 1, ms >= 0)");
  }
  for (double k : p.step_scale) {
    if (!(k > 0) || !std::isfinite(k)) return Status::Error("not a cost profile: a step_scale is not a positive number");
  }
  for (double v : {p.logits_ms_per_row, p.sample_ms_per_row, p.greedy_ms_per_row}) {
    if (!(v >= 0) || !std::isfinite(v)) return Status::Error("not a cost profile: a per-row time is not a non-negative number");
  }
  std::sort(p.idle_wake_ms.begin(), p.idle_wake_ms.end());
  for (const auto& [pause_ms, extra] : p.idle_wake_ms) {
    const bool finite = std::all_of(extra.begin(), extra.end(), [](double e) { return std::isfinite(e) && e >= 0; });
    if (!(pause_ms > 0) || !std::isfinite(pause_ms) || !finite) return Status::Error("not a cost profile: an idle_wake_ms entry is not (pause > 0, [extra ms >= 0...])");
  }
  return p;
}

std::vector<SimRequest> ToSimRequests(const std::vector<BenchRequest>& reqs) {
  std::vector<SimRequest> out;
  for (const BenchRequest& r : reqs) {
    out.push_back({r.arrival_s, r.prompt.size(), static_cast<size_t>(std::max(r.max_tokens, 1)), r.block_keys,
                   std::max<size_t>(r.tokens_per_key, 1)});
  }
  return out;
}

namespace {

// The cache policy: pool and tiers as LRUs of block ids (see the header).
class CachePolicy {
 public:
  CachePolicy(const SimConfig& cfg, size_t tpk) : cfg_(cfg), tpk_(tpk) {
    for (const TierSpec& t : cfg.tiers) lrus_.emplace_back(t.capacity_tokens / tpk, t.ttl_s);
    for (size_t i = 0; i < cfg.tiers.size(); ++i) {
      if (cfg.tiers[i].name == "host") host_ = static_cast<int>(i);
    }
  }
  // Leading full blocks of the request's prompt the pool holds at now_s.
  size_t PoolLeading(const SimRequest& r, double now_s) {
    const size_t full = std::min(r.keys.size(), r.input_tokens / tpk_);
    size_t k = 0;
    if (!lrus_.empty()) {
      while (k < full && lrus_[0].Has(r.keys[k], now_s)) ++k;
    }
    return k;
  }
  // Looks the request up at time now_s and keeps the blocks it found (the
  // pool's and those loaded from tiers) in the pool; fills the outcome's
  // cached tokens by tier and returns the tier load time. The blocks it
  // computes enter the cache as they are computed (Store), as in the
  // server: a request arriving while its prefix is still being prefilled
  // by another finds only what is done.
  double Admit(const SimRequest& r, double now_s, const CostProfile& cost, SimOutcome* o) {
    const size_t full = std::min(r.keys.size(), r.input_tokens / tpk_);
    size_t k = 0;
    double load_ms = 0;
    if (cfg_.caching && !lrus_.empty()) {
      while (k < full && lrus_[0].Has(r.keys[k], now_s)) ++k;
      o->cached_by_tier[cfg_.tiers[0].name] = k * tpk_;
      for (size_t t = 1; t < lrus_.size(); ++t) {
        size_t n = 0;
        while (k + n < full && lrus_[t].Has(r.keys[k + n], now_s)) ++n;
        if (n == 0) continue;
        const double lm = cost.LoadMs(cfg_.tiers[t].name, n);
        if (lm >= cost.PrefillMs(k * tpk_, (k + n) * tpk_)) continue;  // recompute is cheaper
        load_ms += lm;
        o->cached_by_tier[cfg_.tiers[t].name] += n * tpk_;
        k += n;
      }
      for (size_t i = 0; i < k; ++i) PutPool(r.keys[i], now_s);
    }
    o->cached_tokens = std::min(k * tpk_, r.input_tokens > 0 ? r.input_tokens - 1 : 0);
    size_t excess = k * tpk_ - o->cached_tokens;  // the last prompt token is always computed
    for (auto it = o->cached_by_tier.rbegin(); it != o->cached_by_tier.rend() && excess > 0; ++it) {
      const size_t take = std::min(excess, it->second);
      it->second -= take;
      excess -= take;
    }
    return load_ms;
  }
  // Block i of request id's tokens has been computed: it lands in the pool
  // (evictions go down to the host tier) and is written behind to the
  // persistent tiers. Blocks past the prompt's full ones (generated tokens)
  // are cached too, as the server registers them for the next turn: a
  // replay's replies are its own, so they get keys no prompt shares, but
  // they take their room (outputs of 64 tokens: 4 blocks each).
  void Store(uint64_t id, const SimRequest& r, size_t i, double now_s) {
    if (!cfg_.caching || lrus_.empty()) return;
    const bool prompt = i < std::min(r.keys.size(), r.input_tokens / tpk_);
    const uint64_t key = prompt ? r.keys[i] : (uint64_t{1} << 63) | (id << 24) | i;
    PutPool(key, now_s);
    for (size_t t = 1; t < lrus_.size(); ++t) {
      if (static_cast<int>(t) != host_) lrus_[t].Put(key, now_s);
    }
  }

 private:
  void PutPool(uint64_t key, double now_s) {
    for (uint64_t ev : lrus_[0].Put(key, now_s)) {
      if (host_ > 0) lrus_[static_cast<size_t>(host_)].Put(ev, now_s);
    }
  }

  const SimConfig& cfg_;
  size_t tpk_;
  std::vector<Lru> lrus_;
  int host_ = -1;
};

// An admitted request in the simulation.
struct Live {
  double ready_ms;  // its tier loads are done
  size_t cached;    // tokens its cache lookup found
  // The count the scheduler keeps (cached, then prefilled and generated
  // tokens with K/V), as it keeps the engine's.
  std::shared_ptr<RequestProgress> progress;
  bool started = false;
  size_t stored = 0;  // leading prompt blocks in the cache (found, or computed since)
  size_t generated = 0;
  double last_token_ms = 0;
  std::vector<double> gaps;
};

void Summarize(const std::vector<SimRequest>& reqs, SimResult* res) {
  size_t input_total = 0, cached_total = 0;
  std::map<std::string, size_t> by_tier_total;
  std::vector<double> ttft, e2e, itl, hits, misses;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const SimOutcome& o = res->requests[i];
    if (o.cached_tokens == 0) misses.push_back(o.ttft_ms);
    else if (static_cast<double>(o.cached_tokens) >= 0.9 * static_cast<double>(reqs[i].input_tokens)) hits.push_back(o.ttft_ms);
    input_total += reqs[i].input_tokens;
    cached_total += o.cached_tokens;
    for (const auto& [t, n] : o.cached_by_tier) by_tier_total[t] += n;
    ttft.push_back(o.ttft_ms);
    e2e.push_back(o.e2e_ms);
    itl.insert(itl.end(), o.gaps_ms.begin(), o.gaps_ms.end());
  }
  const double in = static_cast<double>(input_total);
  res->cached_fraction = input_total ? static_cast<double>(cached_total) / in : 0;
  for (const auto& [t, n] : by_tier_total) res->fraction_by_tier[t] = input_total ? static_cast<double>(n) / in : 0;
  res->ttft_ms = loadgen::Summarize(ttft);
  res->e2e_ms = loadgen::Summarize(e2e);
  res->itl_ms = loadgen::Summarize(itl);
  res->ttft_hits_ms = loadgen::Summarize(hits);
  res->ttft_misses_ms = loadgen::Summarize(misses);
}

// One simulated step's cost from the calibrated profile; shape is what the
// step budget is told.
double StepCostMs(const std::vector<WorkItem>& work, const std::unordered_map<uint64_t, Live>& live,
                  const CostProfile& cost, bool greedy, StepShape* shape) {
  *shape = {};
  std::vector<size_t> decodes;
  std::vector<std::pair<size_t, size_t>> chunks;
  size_t logits_rows = 0;
  for (const WorkItem& w : work) {
    const size_t pos = live.at(w.id).progress->num_computed;
    if (w.decode) {
      shape->AddDecode(pos);
      decodes.push_back(pos);
    } else {
      shape->AddChunk(pos, w.num_tokens);
      chunks.emplace_back(pos, w.num_tokens);
    }
    logits_rows += w.decode || w.last_prompt_chunk ? 1 : 0;
  }
  return cost.StepMs(decodes, chunks, logits_rows, greedy);
}

}  // namespace

double Utilization(const std::vector<SimRequest>& reqs, const CostProfile& cost) {
  if (reqs.size() < 2) return 0;
  double demand_ms = 0;
  // Prompts at the prompt-only steps' scale, tokens generated at the decode
  // steps' (1 unless --steps fitted them).
  for (const SimRequest& r : reqs) {
    demand_ms += cost.step_scale[CostProfile::kPrefillStep] * cost.PrefillMs(0, r.input_tokens);
    demand_ms += cost.step_scale[CostProfile::kDecodeStep] * static_cast<double>(r.output_tokens) *
                 cost.PrefillMs(r.input_tokens, r.input_tokens + 1);
  }
  const double span_ms = (reqs.back().arrival_s - reqs.front().arrival_s) * 1e3;
  return span_ms > 0 ? demand_ms / span_ms : INFINITY;
}

// The engine's step loop with the server's own Scheduler and StepBudget
// (src/sched), on a simulated clock: arrivals are submitted, admission and
// prefill order, chunk sizes and the step-time target are decided by the
// production code; the step's duration comes from the calibrated profile and
// is reported back to the budget as a measured step would be.
SimResult Simulate(const std::vector<SimRequest>& reqs, const CostProfile& cost, const SimConfig& cfg) {
  const size_t tpk = reqs.empty() ? 16 : std::max<size_t>(reqs.front().tokens_per_key, 1);
  CachePolicy policy(cfg, tpk);
  SimResult res;
  res.requests.resize(reqs.size());
  SchedulerOptions so;
  so.max_batch_tokens = std::max<size_t>(cfg.batch_tokens, 1);
  so.max_running = std::max<size_t>(cfg.max_running, 1);
  so.max_waiting = SIZE_MAX / 4;  // the sim never refuses
  so.num_blocks = SIZE_MAX / 4;   // KV memory limits are not simulated
  so.block_size = tpk;
  so.admission = cfg.admission;
  Scheduler sched(so);
  StepBudget budget(StepBudgetOptions{cfg.step_ms, so.max_batch_tokens, tpk});
  budget.SetKvPass(cost.kv_pass_ms_per_position, cost.prefill_chunk_tokens);
  budget.SetPrefillProfile(cost.prefill_ms_per_token);
  std::unordered_map<uint64_t, Live> live;  // admitted requests, by index
  std::vector<std::shared_ptr<RequestProgress>> progress(reqs.size());  // submitted, not yet admitted
  double now_ms = 0;
  PoolView pool;
  pool.cost = &budget;
  pool.cached_leading_blocks = [&](const SchedRequest& r) {
    return cfg.caching ? policy.PoolLeading(reqs[r.id], now_ms / 1e3) : 0;
  };
  size_t next = 0;  // next arrival
  // The engine starts idle; a step after a pause pays the profile's wake-up
  // extras, the first most (the steps after it run back to back).
  double last_end_ms = -INFINITY, pause_ms = 0;
  size_t since_pause = 0;
  while (next < reqs.size() || sched.num_running() + sched.num_waiting() > 0) {
    for (; next < reqs.size() && reqs[next].arrival_s * 1e3 <= now_ms; ++next) {
      const SimRequest& q = reqs[next];
      std::vector<Hash128> keys;
      if (cfg.caching) {
        for (size_t k = 0; k < std::min(q.keys.size(), q.input_tokens / tpk); ++k) keys.push_back(Hash128{q.keys[k], 1});
      }
      progress[next] = std::make_shared<RequestProgress>();
      sched.Submit(SchedRequest{next, q.input_tokens, std::max<size_t>(q.output_tokens, 1), std::move(keys),
                                static_cast<int64_t>(q.arrival_s * 1e9), 0, progress[next]});
    }
    for (uint64_t id : sched.Admit(static_cast<int64_t>(now_ms * 1e6), pool)) {
      SimOutcome& o = res.requests[id];
      const double load_ms = policy.Admit(reqs[id], now_ms / 1e3, cost, &o);
      live.emplace(id, Live{now_ms + load_ms, o.cached_tokens, std::move(progress[id]), false, o.cached_tokens / tpk, 0, 0, {}});
    }
    double next_event_ms = next < reqs.size() ? reqs[next].arrival_s * 1e3 : INFINITY;
    for (auto& [id, l] : live) {  // loads done: the request starts (the engine's Started)
      if (!l.started && l.ready_ms <= now_ms) sched.Started(id, l.cached), l.started = true;
      if (!l.started) next_event_ms = std::min(next_event_ms, l.ready_ms);
    }
    const std::vector<WorkItem> work = sched.PlanStep(budget);
    if (work.empty()) {  // nothing runnable: jump to the next event
      if (std::isinf(next_event_ms)) break;
      now_ms = std::max(now_ms, next_event_ms);
      continue;
    }
    StepShape shape;
    if (now_ms > last_end_ms) pause_ms = now_ms - last_end_ms, since_pause = 0;
    const double step_ms = StepCostMs(work, live, cost, cfg.greedy, &shape) + cost.WakeMs(pause_ms, since_pause++);
    if (cfg.on_step) {
      std::vector<size_t> positions;
      for (const WorkItem& w : work) positions.push_back(live.at(w.id).progress->num_computed);
      cfg.on_step(SimStep{now_ms, step_ms, work, std::move(positions)});
    }
    budget.Observe(shape, step_ms);
    now_ms += step_ms;
    last_end_ms = now_ms;
    for (const WorkItem& w : work) {
      sched.Advanced(w.id, w.num_tokens);
      Live& l = live.at(w.id);
      for (; (l.stored + 1) * tpk <= l.progress->num_computed; ++l.stored) policy.Store(w.id, reqs[w.id], l.stored, now_ms / 1e3);
      if (!w.decode && !w.last_prompt_chunk) continue;
      // A token: the first after the prompt's last chunk, or a decode step.
      const SimRequest& q = reqs[w.id];
      SimOutcome& o = res.requests[w.id];
      if (l.generated == 0) o.ttft_ms = now_ms - q.arrival_s * 1e3;
      else l.gaps.push_back(now_ms - l.last_token_ms);
      l.last_token_ms = now_ms;
      if (++l.generated >= std::max<size_t>(q.output_tokens, 1)) {
        o.e2e_ms = now_ms - q.arrival_s * 1e3;
        o.itl_ms = l.gaps.empty() ? cost.DecodeMs(q.input_tokens) : Mean(l.gaps);
        o.gaps_ms = std::move(l.gaps);
        sched.Finish(w.id);
        live.erase(w.id);
      }
    }
  }
  Summarize(reqs, &res);
  return res;
}

std::string StepLogLine(const SimStep& s) {
  std::string decodes, chunks;
  size_t tokens = 0;
  for (size_t i = 0; i < s.work.size(); ++i) {
    const WorkItem& w = s.work[i];
    tokens += w.num_tokens;
    if (w.decode) decodes += fmt::format("{}{}", decodes.empty() ? "" : ",", s.positions[i]);
    else chunks += fmt::format("{}[{},{}]", chunks.empty() ? "" : ",", s.positions[i], w.num_tokens);
  }
  return fmt::format("{{\"t_ms\":{:.3f},\"decodes\":[{}],\"chunks\":[{}],\"tokens\":{},\"ms\":{:.3f}}}\n", s.start_ms, decodes,
                     chunks, tokens, s.duration_ms);
}

}  // namespace pc::loadgen
