#include "roofline.h"

#include <algorithm>

#include "runtime/cpu_features.h"

namespace pc {

double FmaLoopAvx2(size_t iters, float* sink);  // roofline_avx2.cc

float ReadSweep(std::span<const float> data) {
  // Eight independent accumulators: the loop is bound by loads, not by the
  // add latency (the compiler vectorizes it).
  float acc[8] = {};
  size_t i = 0;
  // Lines 16 KiB ahead asked for, as the matmul kernels ask for the next
  // weight group: without it the sweep measures the hardware prefetcher
  // alone, and decode read faster than this "peak" (106-120% of it on an
  // Intel guest).
  constexpr size_t kAhead = 16384 / sizeof(float);
  for (; i + 8 <= data.size(); i += 8) {
    if (i % 16 == 0) __builtin_prefetch(data.data() + std::min(i + kAhead, data.size() - 1), 0, 2);
    for (int k = 0; k < 8; ++k) acc[k] += data[i + static_cast<size_t>(k)];
  }
  for (; i < data.size(); ++i) acc[0] += data[i];
  float s = 0;
  for (float a : acc) s += a;
  return s;
}

double FmaLoop(size_t iters, float* sink) {
  Result<Isa> isa = ActiveIsa();
  if (isa.ok() && *isa >= Isa::kAvx2) return FmaLoopAvx2(iters, sink);
  float a[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  const float m = 0.999999f, c = 1e-7f;
  for (size_t it = 0; it < iters; ++it) {
    for (float& x : a) x = x * m + c;
  }
  *sink = a[0] + a[7];
  return 2.0 * 8 * static_cast<double>(iters);
}

}  // namespace pc
