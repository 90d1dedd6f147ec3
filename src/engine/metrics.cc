#include "engine/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace pc {

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {
  std::sort(bounds_.begin(), bounds_.end());
}

void Histogram::Observe(double v) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  ++counts_[i];
  sum_ += v;
  ++count_;
}

namespace {
std::string Num(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}
std::string Join(const std::string& labels, const std::string& extra) {
  if (labels.empty()) return extra.empty() ? "" : "{" + extra + "}";
  return "{" + labels + (extra.empty() ? "" : "," + extra) + "}";
}
}  // namespace

void Histogram::Render(const std::string& name, const std::string& labels, std::string* out) const {
  uint64_t cum = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cum += counts_[i];
    const double le = i < bounds_.size() ? bounds_[i] : INFINITY;
    *out += fmt::format("{}_bucket{} {}\n", name, Join(labels, "le=\"" + Num(le) + "\""), cum);
  }
  *out += fmt::format("{}_sum{} {}\n", name, Join(labels, ""), Num(sum_));
  *out += fmt::format("{}_count{} {}\n", name, Join(labels, ""), count_);
}

std::vector<double> LatencyBucketsSeconds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.015, 0.025, 0.035, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60, 120};
}

MetricsRegistry::Family& MetricsRegistry::FamilyFor(const std::string& name, const std::string& type) {
  Family& f = families_[name];
  if (f.type.empty()) f.type = type;
  return f;
}

void MetricsRegistry::Describe(const std::string& name, const std::string& type, const std::string& help,
                               const std::vector<std::string>& default_labels) {
  MutexLock lock(mu_);
  Family& f = families_[name];
  f.type = type;
  f.help = help;
  for (const std::string& l : default_labels) {
    if (type == "histogram") f.histograms.try_emplace(l, LatencyBucketsSeconds());
    else f.values.try_emplace(l, 0.0);
  }
}

void MetricsRegistry::Add(const std::string& name, const std::string& labels, double delta) {
  MutexLock lock(mu_);
  FamilyFor(name, "counter").values[labels] += delta;
}

void MetricsRegistry::Set(const std::string& name, const std::string& labels, double value) {
  MutexLock lock(mu_);
  FamilyFor(name, "gauge").values[labels] = value;
}

void MetricsRegistry::Observe(const std::string& name, const std::string& labels, double value) {
  MutexLock lock(mu_);
  Family& f = FamilyFor(name, "histogram");
  f.histograms.try_emplace(labels, LatencyBucketsSeconds()).first->second.Observe(value);
}

double MetricsRegistry::Get(const std::string& name, const std::string& labels) const {
  MutexLock lock(mu_);
  auto f = families_.find(name);
  if (f == families_.end()) return 0;
  if (auto v = f->second.values.find(labels); v != f->second.values.end()) return v->second;
  if (auto h = f->second.histograms.find(labels); h != f->second.histograms.end()) return static_cast<double>(h->second.count());
  return 0;
}

std::string MetricsRegistry::Render() const {
  MutexLock lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    if (!f.help.empty()) out += fmt::format("# HELP {} {}\n", name, f.help);
    out += fmt::format("# TYPE {} {}\n", name, f.type);
    for (const auto& [labels, v] : f.values) out += fmt::format("{}{} {}\n", name, Join(labels, ""), Num(v));
    for (const auto& [labels, h] : f.histograms) h.Render(name, labels, &out);
  }
  return out;
}

}  // namespace pc
