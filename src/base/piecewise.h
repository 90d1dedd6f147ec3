// Piecewise-linear interpolation over measured samples (cost models):
// below the first sample, its value; past the last, the last segment's
// slope extended (prefill and decode costs grow linearly with position).
// Thread-safety: a pure function.
#pragma once
#include <utility>
#include <vector>

namespace pc {

// samples sorted by x.
inline double InterpolateLinear(const std::vector<std::pair<double, double>>& samples, double x) {
  if (samples.empty()) return 0;
  if (samples.size() == 1 || x <= samples.front().first) return samples.front().second;
  size_t i = 1;
  while (i + 1 < samples.size() && x > samples[i].first) ++i;
  const auto [x0, y0] = samples[i - 1];
  const auto [x1, y1] = samples[i];
  const double dx = x1 - x0 > 1e-9 ? x1 - x0 : 1e-9;
  return y0 + (y1 - y0) * (x - x0) / dx;
}

}  // namespace pc
