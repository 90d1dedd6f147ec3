// Prometheus text exposition (format 0.0.4) for counters, gauges and
// histograms. Metric names carry their unit (`_seconds`, `_tokens`,
// `_blocks`) and counters end in `_total`.
// Thread-safety: a MetricsRegistry may be updated from any thread (one mutex);
// Render takes a consistent snapshot.
#pragma once
#include <map>
#include <mutex>

#include "base/mutex.h"
#include <string>
#include <vector>

namespace pc {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double v);
  // Appends the _bucket/_sum/_count lines; labels like `tier="ram"` or "".
  void Render(const std::string& name, const std::string& labels, std::string* out) const;
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Latency buckets from 1 ms to 120 s, roughly x2.5 apart, closer around
// the step-time targets (10-150 ms) so step quantiles can be read from them.
std::vector<double> LatencyBucketsSeconds();

class MetricsRegistry {
 public:
  void Add(const std::string& name, const std::string& labels, double delta);
  void Set(const std::string& name, const std::string& labels, double value);
  void Observe(const std::string& name, const std::string& labels, double value);
  // Declares HELP and TYPE ("counter", "gauge", "histogram") for a name; a
  // declared histogram or counter renders even before its first sample.
  void Describe(const std::string& name, const std::string& type, const std::string& help,
                const std::vector<std::string>& default_labels = {""});
  double Get(const std::string& name, const std::string& labels = "") const;
  std::string Render() const;

 private:
  struct Family {
    std::string type, help;
    std::map<std::string, double> values;        // counters and gauges, by labels
    std::map<std::string, Histogram> histograms;  // by labels
  };
  Family& FamilyFor(const std::string& name, const std::string& type) PC_REQUIRES(mu_);
  mutable Mutex mu_;
  std::map<std::string, Family> families_ PC_GUARDED_BY(mu_);
};

}  // namespace pc
