// The advisor's simulator: replays a trace through the cache policy (the
// pool and the spill tiers, each an LRU of blocks with a capacity, Redis with
// a TTL) with a prefill queue and calibrated costs, and predicts TTFT,
// end-to-end latency and hit rates with and without caching.
//
// Model of the server (stated, so its limits are plain): prefills run one
// at a time in arrival order (compute-bound; the server's chunked prefill
// interleaves them with decode steps, which this ignores); a request's
// prefill costs the tier loads its cost model accepts plus the calibrated
// prefill time of its uncached tokens at their positions; decoding costs the
// calibrated per-token time at the request's context length, unchanged by
// caching except that a request never waits for another's decode.
// Thread-safety: pure functions.
#pragma once
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "stats.h"
#include "workload.h"

namespace pc::loadgen {

// What one model costs on one machine (promptcache calibrate).
struct CostProfile {
  std::string model;
  size_t block_size = 16;
  std::vector<std::pair<double, double>> prefill_ms_per_token;  // (position, ms per token)
  std::vector<std::pair<double, double>> decode_ms_per_token;   // (context, ms per token)
  struct Tier {
    double latency_ms = 0, ms_per_block = 0;
  };
  std::map<std::string, Tier> tiers;

  double PrefillMs(size_t first_token, size_t end_token) const;  // tokens [first, end)
  double DecodeMs(size_t context) const;
  double LoadMs(const std::string& tier, size_t num_blocks) const;
  nlohmann::json ToJson() const;
  static Result<CostProfile> FromJson(const nlohmann::json& j);
};

struct TierSpec {
  std::string name;           // "pool", "host", "disk", "redis"
  size_t capacity_tokens = 0;
  double ttl_s = 0;           // 0: no expiry
};

struct SimConfig {
  bool caching = true;
  std::vector<TierSpec> tiers;  // the pool first
};

struct SimRequest {
  double arrival_s = 0;
  size_t input_tokens = 0, output_tokens = 0;
  std::vector<uint64_t> keys;  // prefix block ids
  size_t tokens_per_key = 16;
};

struct SimOutcome {
  double ttft_ms = 0, e2e_ms = 0, itl_ms = 0;
  size_t cached_tokens = 0;
  std::map<std::string, size_t> cached_by_tier;
};

struct SimResult {
  std::vector<SimOutcome> requests;
  double cached_fraction = 0;  // cached / input tokens
  std::map<std::string, double> fraction_by_tier;
  Summary ttft_ms, e2e_ms, itl_ms;
};

// Converts trace requests (workload.h) to simulator requests.
std::vector<SimRequest> ToSimRequests(const std::vector<BenchRequest>& reqs);
SimResult Simulate(const std::vector<SimRequest>& reqs, const CostProfile& cost, const SimConfig& cfg);

struct AdviceOptions {
  std::vector<TierSpec> tiers;  // capacities to advise around (the pool first)
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
