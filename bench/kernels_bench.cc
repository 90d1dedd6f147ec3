// Kernel microbenchmarks with bytes/s and FLOP/s counters, per ISA level.
// Speed is measured here, never asserted in tests.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "base/fp16.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace pc {
namespace {

std::vector<float> Random(size_t n) {
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// y[1][rows] = W[rows][cols] x: the decode GEMV, one weight type per run.
void BM_Gemv(benchmark::State& state, TensorType wt, Isa isa) {
  if (isa > BestSupportedIsa()) {
    state.SkipWithError("ISA not supported here");
    return;
  }
  const DotKernels& k = DotKernelsFor(isa);
  const size_t rows = static_cast<size_t>(state.range(1)), cols = static_cast<size_t>(state.range(0));
  const auto wf = Random(rows * cols), xf = Random(cols);
  std::vector<uint8_t> w(rows * RowBytes(wt, cols));
  for (size_t r = 0; r < rows; ++r) QuantizeRow(wt, wf.data() + r * cols, w.data() + r * RowBytes(wt, cols), cols);
  const TensorType at = ActivationTypeFor(wt);
  std::vector<uint8_t> x(RowBytes(at, cols));
  QuantizeRow(at, xf.data(), x.data(), cols);
  std::vector<float> y(rows);
  const WeightMatrix m{wt, w.data(), rows, cols};
  for (auto _ : state) {
    MatMulRows(k, m, x.data(), x.size(), 1, y.data(), rows, 0, rows);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(w.size()), benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * rows * cols * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

#define PC_GEMV(type, isa) \
  BENCHMARK_CAPTURE(BM_Gemv, type##_##isa, TensorType::k##type, Isa::k##isa)->Args({576, 1536})->Args({2048, 5632})->Args({576, 65536})
PC_GEMV(F32, Scalar);
PC_GEMV(F32, Avx2);
PC_GEMV(F16, Avx2);
PC_GEMV(BF16, Avx2);
PC_GEMV(Q8_0, Scalar);
PC_GEMV(Q8_0, Avx2);
PC_GEMV(Q4_0, Avx2);

}  // namespace
}  // namespace pc

BENCHMARK_MAIN();
