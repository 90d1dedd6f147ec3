// The advisor's simulator: replays a trace through the cache policy (the
// pool and the spill tiers, each an LRU of blocks with a capacity, Redis with
// a TTL) with calibrated costs, and predicts TTFT, inter-token latency,
// end-to-end latency and hit rates with and without caching.
//
// Model of the server: the engine's step loop, on a simulated clock, driving
// the server's own Scheduler and StepBudget (src/sched): admission (running
// cap, cache-aware or FIFO order, waiting for a prefix another request is
// computing), prefill turns, chunk sizes under the step-time target, all
// decided by the production code, so the advice follows every scheduling
// change by construction. A step costs what calibrate measured for a step of
// its size at depth 0 (the weights stream once per step; small batches run
// below a long chunk's speed), one more row of logits for each decode past
// the first, a token's draw for every row, and what depth adds to each item: a chunk's attention and K/V
// pass at its position (the prefill curve), a decode's context (the decode
// curve). That duration is what the budget is told, as a measured step
// would be. Profiles without the batch curve price a step as its tokens'
// prefill prices summed, at least one single-token decode step.
// Cached tokens are skipped; a run loaded from a tier delays the request's
// start by its load time (the loader is asynchronous: others keep stepping).
// Ignored: KV memory limits on admission (preemption), tenants, and the
// exact overlap of loads with steps.
// Thread-safety: pure functions.
#pragma once
#include <nlohmann/json.hpp>

#include <array>
#include <functional>
#include <map>
#include <istream>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "sched/scheduler.h"
#include "stats.h"
#include "workload.h"

namespace pc::loadgen {

// What one model costs on one machine (promptcache calibrate).
struct CostProfile {
  std::string model;
  size_t block_size = 16;
  std::vector<std::pair<double, double>> prefill_ms_per_token;  // (position, ms per token)
  std::vector<std::pair<double, double>> decode_ms_per_token;   // (context, ms per token)
  // One chunk's pass over the K/V before it (calibrate's one-token steps),
  // and the chunk size the prefill samples were measured with (0: unknown,
  // the samples are taken per token as they are).
  double kv_pass_ms_per_position = 0;
  size_t prefill_chunk_tokens = 0;
  // A step's time at depth 0 by the tokens it holds (calibrate's
  // CalibrateBatchSizes), and what each row of logits past the first adds;
  // empty in older profiles: a step then costs its tokens' prices summed.
  std::vector<std::pair<double, double>> step_ms_by_tokens;  // (tokens, ms)
  double logits_ms_per_row = 0;
  double sample_ms_per_row = 0;  // a token drawn from a row of logits (temperature 1)
  double greedy_ms_per_row = 0;  // the same at temperature 0
  // What a step costs more when the engine has been idle (calibrate: a
  // pause, then one-token steps back to back, less a warm one's time): by
  // the pause (ms, ascending), the extra ms of the first, second, ... step
  // after it (2-core Xeon guest, bench-135m, after 200 ms: +3.2, +2.2,
  // +1.7, +1.4 ms on a 3.3 ms step: threads parked, caches and clocks
  // cold). Empty in older profiles: no extra.
  std::vector<std::pair<double, std::vector<double>>> idle_wake_ms;
  struct Tier {
    double latency_ms = 0, ms_per_block = 0;
  };
  std::map<std::string, Tier> tiers;

  double PrefillMs(size_t first_token, size_t end_token) const;  // tokens [first, end)
  // A chunk of n prompt tokens from position pos, its K/V pass included.
  double ChunkMs(size_t pos, size_t n) const;
  double DecodeMs(size_t context) const;
  // A step of n_tokens tokens at depth 0, logits_rows of them with logits,
  // a token drawn from each (greedily or not).
  double BatchMs(size_t n_tokens, size_t logits_rows, bool greedy = false) const;
  double LoadMs(const std::string& tier, size_t num_blocks) const;
  // A step of decodes at these positions and prompt chunks (position,
  // tokens), a row of logits per decode: its size at depth 0 plus what
  // depth adds to each item (the simulation's price of a step).
  double StepMs(std::span<const size_t> decodes, std::span<const std::pair<size_t, size_t>> chunks, size_t logits_rows,
                bool greedy) const;
  // The extra ms of the k-th step (0: the first) after an idle pause of
  // idle_ms: idle_wake_ms interpolated over the pause (none at 0).
  double WakeMs(double idle_ms, size_t k) const;
  // What a server's steps took against these prices (FitStepLog), by the
  // step's kind: decodes only, decodes and prompt tokens, prompt tokens
  // only (2-core Xeon guest, bench-135m replays: 1.0, 1.05 and 0.96).
  // Multiplies StepMs.
  enum StepKind { kDecodeStep, kMixedStep, kPrefillStep, kStepKinds };
  std::array<double, kStepKinds> step_scale = {1, 1, 1};
  static StepKind KindOf(bool decodes, bool prompt_tokens) {
    return !prompt_tokens ? kDecodeStep : decodes ? kMixedStep : kPrefillStep;
  }
  nlohmann::json ToJson() const;
  static Result<CostProfile> FromJson(const nlohmann::json& j);
};

// What the server's own steps say of a profile: `serve --step-log` lines
// priced by CostProfile::StepMs against their measured times. calibrate
// times the model alone on an idle machine; the server's steps also carry
// its HTTP threads, the clients beside it and the machine's moment (2-core
// Xeon guest, replays of bench-135m: 10-19% over the calibrated prices).
struct StepFit {
  size_t steps = 0;       // lines used (steps with verified drafts are left out)
  double measured_ms = 0, priced_ms = 0;
  // Least squares, measured ~ scale x priced, per kind of step
  // (CostProfile::StepKind); a kind the log lacks takes the all-steps fit.
  std::array<double, CostProfile::kStepKinds> scale = {1, 1, 1};
  std::array<size_t, CostProfile::kStepKinds> kind_steps = {0, 0, 0};
  // The profile with the scales applied.
  void ApplyTo(CostProfile* p) const {
    for (size_t k = 0; k < scale.size(); ++k) p->step_scale[k] *= scale[k];
  }
};
Result<StepFit> FitStepLog(std::istream& in, const CostProfile& cost, bool greedy);

struct TierSpec {
  std::string name;           // "pool", "host", "disk", "redis"
  size_t capacity_tokens = 0;
  double ttl_s = 0;           // 0: no expiry
};

// One simulated step: when it started, how long it took, what it ran
// (request indices as ids).
struct SimStep {
  double start_ms = 0, duration_ms = 0;
  std::vector<WorkItem> work;
  std::vector<size_t> positions;  // per work item: its tokens with K/V when the step started
};

struct SimConfig {
  bool caching = true;
  std::vector<TierSpec> tiers;  // the pool first
  size_t max_running = 32;      // serve --max-running
  size_t batch_tokens = 256;    // serve --batch-tokens
  double step_ms = 25;          // serve --max-step-ms
  Admission admission = Admission::kCacheAware;  // serve --admission
  // The clients ask for greedy tokens (temperature 0, as bench does); a
  // trace does not say, and the API's default temperature is 1.
  bool greedy = false;
  std::function<void(const SimStep&)> on_step;   // optional: every step, as planned
};

struct SimRequest {
  double arrival_s = 0;
  size_t input_tokens = 0, output_tokens = 0;
  std::vector<uint64_t> keys;  // prefix block ids
  size_t tokens_per_key = 16;
};

struct SimOutcome {
  double ttft_ms = 0, e2e_ms = 0;
  double itl_ms = 0;               // mean gap between its tokens
  std::vector<double> gaps_ms;     // every gap between its tokens
  size_t cached_tokens = 0;
  std::map<std::string, size_t> cached_by_tier;
};

struct SimResult {
  std::vector<SimOutcome> requests;
  double cached_fraction = 0;  // cached / input tokens
  std::map<std::string, double> fraction_by_tier;
  Summary ttft_ms, e2e_ms;
  Summary itl_ms;  // over every gap of every request, as bench reports it
  // TTFT of hits (at least 90% of the prompt cached when admitted) and of
  // misses (nothing cached) apart, as `bench` splits them: what cache-aware
  // admission changes under load.
  Summary ttft_hits_ms, ttft_misses_ms;
};

// Converts trace requests (workload.h) to simulator requests.
std::vector<SimRequest> ToSimRequests(const std::vector<BenchRequest>& reqs);
SimResult Simulate(const std::vector<SimRequest>& reqs, const CostProfile& cost, const SimConfig& cfg);
// A simulated step as one JSON line in the format of `serve --step-log`
// (t_ms, decodes, chunks, tokens, ms), to set beside the server's.
std::string StepLogLine(const SimStep& s);
// Compute the trace asks of one server without caching (all prefill plus one
// decode step per output token) over the trace's span: above 1 the queue
// grows without bound.
double Utilization(const std::vector<SimRequest>& reqs, const CostProfile& cost);

struct AdviceOptions {
  std::vector<TierSpec> tiers;  // capacities to advise around (the pool first)
  size_t max_running = 32, batch_tokens = 256;
  double step_ms = 25;
  Admission admission = Admission::kCacheAware;
  bool greedy = false;  // SimConfig::greedy
  std::function<void(const SimStep&)> on_step;  // SimConfig::on_step, for the run with the cache as configured
};

struct Advice {
  SimResult with_cache, without_cache;
  // Hit fraction against capacity, per tier (others held as configured).
  std::map<std::string, std::vector<std::pair<size_t, double>>> hit_curve;
  std::map<std::string, size_t> capacity_for_90pct;  // tokens reaching 90% of the achievable gain
  struct Class {
    std::string name;
    size_t num_requests = 0;
    double e2e_saved_fraction = 0, ttft_saved_fraction = 0;
  };
  std::vector<Class> classes;
  bool has_prefix_info = false;
  std::string verdict;
};

Advice Advise(const std::vector<SimRequest>& reqs, const CostProfile& cost, const AdviceOptions& opt);
std::string AdviceTable(const Advice& a);
nlohmann::json AdviceJson(const Advice& a, const nlohmann::json& meta);
std::string AdviceHtml(const std::string& title, const Advice& a, const nlohmann::json& meta);

}  // namespace pc::loadgen
