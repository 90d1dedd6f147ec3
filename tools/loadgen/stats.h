// Statistics for latency samples: percentiles, summaries, confidence
// intervals, and the cache-outcome buckets. Pure functions.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace pc::loadgen {

// Linear interpolation between closest ranks (q in [0, 1]); NaN if empty.
double Percentile(std::vector<double> v, double q);
double Mean(const std::vector<double>& v);
double StdDev(const std::vector<double>& v);  // sample (n-1)

struct Summary {
  size_t n = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;
};
Summary Summarize(const std::vector<double>& v);

struct Interval {
  double estimate = 0, lo = 0, hi = 0;
  bool Contains(double x) const { return lo <= x && x <= hi; }
};

// Ratio of medians b/a with a 95% percentile-bootstrap interval
// (deterministic: fixed seed, `rounds` resamples).
Interval MedianRatioCI(const std::vector<double>& a, const std::vector<double>& b, int rounds = 2000, uint64_t seed = 1);

// Cache outcome of one request from its usage: miss (nothing reused), hit
// (at least 90% of the prompt reused), partial (anything between).
enum class CacheOutcome { kMiss, kPartial, kHit };
CacheOutcome ClassifyOutcome(size_t prompt_tokens, size_t cached_tokens);
const char* OutcomeName(CacheOutcome o);

}  // namespace pc::loadgen
