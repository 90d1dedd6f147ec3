#include "stats.h"

#include <algorithm>
#include <cmath>

namespace pc::loadgen {

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(v.size() - 1);
  const size_t i = static_cast<size_t>(std::floor(pos));
  const double frac = pos - static_cast<double>(i);
  return i + 1 < v.size() ? v[i] + frac * (v[i + 1] - v[i]) : v[i];
}

double Mean(const std::vector<double>& v) {
  if (v.empty()) return NAN;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double StdDev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = Mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

Summary Summarize(const std::vector<double>& v) {
  Summary s;
  s.n = v.size();
  if (v.empty()) {
    s.mean = s.p50 = s.p90 = s.p99 = NAN;
    return s;
  }
  s.mean = Mean(v);
  s.p50 = Percentile(v, 0.5);
  s.p90 = Percentile(v, 0.9);
  s.p99 = Percentile(v, 0.99);
  return s;
}

namespace {
// splitmix64: a fixed generator so intervals reproduce everywhere.
uint64_t Next(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
std::vector<double> Resample(const std::vector<double>& v, uint64_t& s) {
  std::vector<double> r(v.size());
  for (double& x : r) x = v[Next(s) % v.size()];
  return r;
}
}  // namespace

Interval MedianRatioCI(const std::vector<double>& a, const std::vector<double>& b, int rounds, uint64_t seed) {
  Interval iv;
  if (a.empty() || b.empty()) return {NAN, NAN, NAN};
  iv.estimate = Percentile(b, 0.5) / Percentile(a, 0.5);
  std::vector<double> ratios;
  ratios.reserve(static_cast<size_t>(rounds));
  uint64_t s = seed;
  for (int i = 0; i < rounds; ++i) ratios.push_back(Percentile(Resample(b, s), 0.5) / Percentile(Resample(a, s), 0.5));
  iv.lo = Percentile(ratios, 0.025);
  iv.hi = Percentile(ratios, 0.975);
  return iv;
}

CacheOutcome ClassifyOutcome(size_t prompt_tokens, size_t cached_tokens) {
  if (cached_tokens == 0 || prompt_tokens == 0) return CacheOutcome::kMiss;
  if (static_cast<double>(cached_tokens) >= 0.9 * static_cast<double>(prompt_tokens)) return CacheOutcome::kHit;
  return CacheOutcome::kPartial;
}

const char* OutcomeName(CacheOutcome o) {
  switch (o) {
    case CacheOutcome::kMiss: return "miss";
    case CacheOutcome::kPartial: return "partial";
    case CacheOutcome::kHit: return "hit";
  }
  return "miss";
}

}  // namespace pc::loadgen
