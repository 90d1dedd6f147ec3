// Kernel microbenchmarks with bytes/s and FLOP/s counters, per ISA level.
// Speed is measured here, never asserted in tests.
#include <benchmark/benchmark.h>

#include <random>
#include <span>
#include <vector>

#include "base/fp16.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/qpack.h"
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

// A random weight matrix of type wt; quantized types optionally repacked in
// groups of 16 rows as the model loader does (qpack.h).
struct BenchMatrix {
  std::vector<uint8_t> w;
  std::vector<uint8_t> packed;
  WeightMatrix m;
  BenchMatrix(TensorType wt, size_t rows, size_t cols, bool pack) : w(rows * RowBytes(wt, cols)) {
    const auto wf = Random(rows * cols);
    const size_t rb = RowBytes(wt, cols), nb = cols / BlockElems(wt);
    for (size_t r = 0; r < rows; ++r) QuantizeRow(wt, wf.data() + r * cols, w.data() + r * rb, cols);
    m = WeightMatrix{wt, w.data(), rows, cols};
    if (pack) {
      const size_t gb = nb * X16LayoutOf(wt).bytes;
      packed.resize(rows / 16 * gb);
      for (size_t g = 0; g < rows / 16; ++g) RepackX16(wt, w.data() + g * 16 * rb, rb, nb, packed.data() + g * gb);
      m.packed = packed.data();
    }
  }
};

// y[1][rows] = W[rows][cols] x: the decode GEMV, one weight type per run.
void BM_Gemv(benchmark::State& state, TensorType wt, Isa isa, bool pack) {
  if (isa > BestSupportedIsa()) {
    state.SkipWithError("ISA not supported here");
    return;
  }
  const DotKernels& k = DotKernelsFor(isa);
  const size_t rows = static_cast<size_t>(state.range(1)), cols = static_cast<size_t>(state.range(0));
  const BenchMatrix bm(wt, rows, cols, pack);
  const auto xf = Random(cols);
  const TensorType at = ActivationTypeFor(wt);
  std::vector<uint8_t> x(RowBytes(at, cols));
  QuantizeActivationRow(at, xf.data(), x.data(), cols);
  std::vector<float> y(rows);
  for (auto _ : state) {
    MatMulRows(k, X16KernelsFor(isa), bm.m, x.data(), x.size(), 1, y.data(), rows, 0, rows);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(bm.w.size()), benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * rows * cols * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Shapes: bench-135m's FFN and a 1B model's (inner sizes multiples of 256
// for the K-quants).
#define PC_GEMV(type, isa, pack, tag) \
  BENCHMARK_CAPTURE(BM_Gemv, type##tag##_##isa, TensorType::k##type, Isa::k##isa, pack)->Args({1536, 576})->Args({2048, 5632})
PC_GEMV(F32, Scalar, false, );
PC_GEMV(F32, Avx2, false, );
PC_GEMV(F16, Avx2, false, );
PC_GEMV(BF16, Avx2, false, );
PC_GEMV(Q8_0, Scalar, false, );
#define PC_GEMV_X16(type) \
  PC_GEMV(type, Avx2, true, x16);       \
  PC_GEMV(type, AvxVnni, true, x16);    \
  PC_GEMV(type, Avx512, true, x16)
PC_GEMV_X16(Q8_0);
PC_GEMV_X16(Q4_0);
PC_GEMV_X16(Q5_0);
PC_GEMV_X16(IQ4_NL);
PC_GEMV_X16(Q4_K);
PC_GEMV_X16(Q5_K);
PC_GEMV_X16(Q6_K);
PC_GEMV_X16(Q3_K);

// Y[n][rows] = X[n][cols] W^T: the prefill GEMM over a chunk of n tokens.
void BM_Gemm(benchmark::State& state, TensorType wt, Isa isa, bool pack) {
  if (isa > BestSupportedIsa()) {
    state.SkipWithError("ISA not supported here");
    return;
  }
  const DotKernels& k = DotKernelsFor(isa);
  const size_t cols = static_cast<size_t>(state.range(0)), rows = static_cast<size_t>(state.range(1));
  const size_t n = static_cast<size_t>(state.range(2));
  const BenchMatrix bm(wt, rows, cols, pack);
  const auto xf = Random(n * cols);
  const TensorType at = ActivationTypeFor(wt);
  const size_t xb = RowBytes(at, cols);
  std::vector<uint8_t> x(n * xb);
  for (size_t t = 0; t < n; ++t) QuantizeActivationRow(at, xf.data() + t * cols, x.data() + t * xb, cols);
  std::vector<float> y(n * rows);
  for (auto _ : state) {
    MatMulRows(k, X16KernelsFor(isa), bm.m, x.data(), xb, n, y.data(), rows, 0, rows);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * rows * cols * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// 64 tokens of 1,536 columns (a prompt chunk through a down projection), and
// 25 of 576 (a cache hit's suffix through gate/up: not a multiple of six).
#define PC_GEMM(type, isa, pack, tag) \
  BENCHMARK_CAPTURE(BM_Gemm, type##tag##_##isa, TensorType::k##type, Isa::k##isa, pack)->Args({1536, 576, 64})->Args({576, 1536, 25})
PC_GEMM(F32, Avx2, false, );
PC_GEMM(F16, Avx2, false, );
PC_GEMM(Q8_0, Scalar, false, );
#define PC_GEMM_X16(type) \
  PC_GEMM(type, Avx2, true, x16);       \
  PC_GEMM(type, AvxVnni, true, x16);    \
  PC_GEMM(type, Avx512, true, x16)
// The same product with its weights streamed from memory (98,304 x 576
// Q8_0, 60 MB, past any cache) for 25 tokens, a cache hit's suffix: how well
// the kernels fetch the next rows while they compute (x16::ShareOfPass).
#define PC_GEMM_STREAM(isa) \
  BENCHMARK_CAPTURE(BM_Gemm, Q8_0x16_stream_##isa, TensorType::kQ8_0, Isa::k##isa, true)->Args({576, 98304, 25})
PC_GEMM_STREAM(Avx2);
PC_GEMM_STREAM(AvxVnni);
PC_GEMM_STREAM(Avx512);
PC_GEMM_X16(Q8_0);
PC_GEMM_X16(Q4_0);
PC_GEMM_X16(Q5_0);
PC_GEMM_X16(Q4_K);
PC_GEMM_X16(Q6_K);

// Attention of `rows` query rows at the end of a context of `depth`
// positions (F16 K/V, bench-135m's heads: 9 query heads over 3 KV heads of
// 64), one thread, every KV head: rows = 1 is a decode step, 16 a prefill
// chunk. GB/s counts the K/V bytes streamed once per KV head. `copies`
// of the K/V at distinct addresses, taken in turn (many: K/V past any
// cache, as a forward pass meets them after a layer's weights went by).
void AttendBench(benchmark::State& state, Isa isa, size_t copies) {
  if (!IsaSupported(isa)) {
    state.SkipWithError("ISA not supported here");
    return;
  }
  const DotKernels& k = DotKernelsFor(isa);
  const size_t depth = static_cast<size_t>(state.range(0)), num_rows = static_cast<size_t>(state.range(1));
  const bool q8 = state.range(2) != 0;  // 8-bit K/V (Q8_0 rows), else F16
  const size_t n_head = 9, n_kv = 3, hd = 64, block = 16, kv_dim = n_kv * hd;
  const size_t blocks = (depth + num_rows + block - 1) / block;
  const size_t elems = blocks * block * kv_dim;
  std::vector<uint16_t> kh(copies * elems), vh(kh.size());
  const auto kf = Random(elems);
  for (size_t i = 0; i < kh.size(); ++i) kh[i] = vh[kh.size() - 1 - i] = Fp32ToFp16(kf[i % elems]);
  std::vector<BlockQ8_0> kq(q8 ? kh.size() / 32 : 0), vq(kq.size());
  if (q8) {
    std::vector<float> kc(kh.size());
    for (size_t i = 0; i < kc.size(); ++i) kc[i] = kf[i % elems];
    std::vector<float> vf(kc.rbegin(), kc.rend());
    QuantizeRowQ8_0(kc.data(), kq.data(), kc.size());
    QuantizeRowQ8_0(vf.data(), vq.data(), vf.size());
  }
  std::vector<int32_t> table(copies * blocks);  // copy c: blocks [c * blocks, (c + 1) * blocks)
  for (size_t b = 0; b < table.size(); ++b) table[b] = static_cast<int32_t>(b);
  auto view = [&](size_t c) {
    const std::span<const int32_t> t(table.data() + c * blocks, blocks);
    return q8 ? KvLayerView{kq.data(), vq.data(), KvDtype::kQ8_0, block, kv_dim, t}
              : KvLayerView{kh.data(), vh.data(), KvDtype::kF16, block, kv_dim, t};
  };
  const auto q = Random(num_rows * n_head * hd);
  const AttnHeads heads{n_head, n_kv, hd};
  std::vector<float> out(q.size()), scratch(AttendScratchFloats(num_rows, heads));
  std::vector<int32_t> pos(num_rows);
  for (size_t r = 0; r < num_rows; ++r) pos[r] = static_cast<int32_t>(depth + r);
  const AttnRows rows{q.data(), n_head * hd, pos.data(), out.data(), n_head * hd};
  size_t c = 0;
  for (auto _ : state) {
    AttendRows(k, view(c), rows, 0, num_rows, heads, scratch.data());
    benchmark::DoNotOptimize(out.data());
    c = c + 1 == copies ? 0 : c + 1;
  }
  const double positions = static_cast<double>(depth + num_rows);
  state.counters["GB/s"] = benchmark::Counter(positions * 2 * KvBytes(view(0).dtype, kv_dim), benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.counters["GFLOP/s"] = benchmark::Counter(4.0 * positions * num_rows * n_head * hd * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
void BM_Attend(benchmark::State& state, Isa isa) { AttendBench(state, isa, 1); }
// 160 copies of 473 positions' F16 K/V: 58 MB.
void BM_AttendStream(benchmark::State& state, Isa isa) { AttendBench(state, isa, 160); }
// Args: depth, rows (1: a decode step; 25 at 448: a cache hit's suffix;
// 256 at 4,000: compare.sh server's partial hit, its K/V tiles widened once
// for many lane groups), 8-bit K/V (0: F16).
BENCHMARK_CAPTURE(BM_Attend, scalar, Isa::kScalar)->Args({4096, 1, 0})->Args({4096, 16, 0});
BENCHMARK_CAPTURE(BM_Attend, avx2, Isa::kAvx2)->Args({448, 25, 0})->Args({512, 1, 0})->Args({4096, 1, 0})->Args({4096, 1, 1})->Args({4096, 16, 0})->Args({4096, 16, 1})->Args({4000, 256, 0})->Args({4000, 256, 1});
// The avxvnni level differs from avx2 only in 8-bit K's integer dots.
BENCHMARK_CAPTURE(BM_Attend, avxvnni, Isa::kAvxVnni)->Args({4096, 1, 1})->Args({4096, 16, 1})->Args({4000, 256, 1});
BENCHMARK_CAPTURE(BM_AttendStream, avx2, Isa::kAvx2)->Args({448, 25, 0});
BENCHMARK_CAPTURE(BM_AttendStream, avx512, Isa::kAvx512)->Args({448, 25, 0});
BENCHMARK_CAPTURE(BM_Attend, avx512, Isa::kAvx512)->Args({448, 25, 0})->Args({512, 1, 0})->Args({4096, 1, 0})->Args({4096, 1, 1})->Args({4096, 16, 0})->Args({4096, 16, 1})->Args({4000, 256, 0})->Args({4000, 256, 1});

// Element-wise steps of a layer over n floats (one token row of bench-1b's
// FFN is 5,632): GB/s counts bytes read and written.
void SetRates(benchmark::State& state, double bytes, double flops) {
  state.counters["GB/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_RmsNorm(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const auto x = Random(n), w = Random(n);
  std::vector<float> y(n);
  for (auto _ : state) {
    RmsNorm(x.data(), w.data(), y.data(), n, 1e-5f);
    benchmark::DoNotOptimize(y.data());
  }
  SetRates(state, 3.0 * n * sizeof(float), 4.0 * n);
}
BENCHMARK(BM_RmsNorm)->Arg(576)->Arg(2048);

void BM_Rope(benchmark::State& state) {
  const size_t head_dim = 64, n_heads = static_cast<size_t>(state.range(0));
  auto x = Random(n_heads * head_dim);
  for (auto _ : state) {
    RopeParams p;
    p.head_dim = p.rope_dim = head_dim;
    Rope(x.data(), n_heads, 1234, p);
    benchmark::DoNotOptimize(x.data());
  }
  SetRates(state, 2.0 * x.size() * sizeof(float), 3.0 * x.size());
}
BENCHMARK(BM_Rope)->Arg(9)->Arg(32);

// The gated activation of each level's table (an FFN row of 1536 and of 5632).
void BM_SiluMul(benchmark::State& state, Isa isa) {
  if (isa > BestSupportedIsa()) {
    state.SkipWithError("ISA not supported here");
    return;
  }
  const DotKernels& k = DotKernelsFor(isa);
  const size_t n = static_cast<size_t>(state.range(0));
  const auto g = Random(n), u = Random(n);
  std::vector<float> y(n);
  for (auto _ : state) {
    k.silu_mul(g.data(), u.data(), y.data(), n);
    benchmark::DoNotOptimize(y.data());
  }
  SetRates(state, 3.0 * n * sizeof(float), 5.0 * n);
}
BENCHMARK_CAPTURE(BM_SiluMul, scalar, Isa::kScalar)->Arg(1536)->Arg(5632);
BENCHMARK_CAPTURE(BM_SiluMul, avx2, Isa::kAvx2)->Arg(1536)->Arg(5632);
BENCHMARK_CAPTURE(BM_SiluMul, avx512, Isa::kAvx512)->Arg(1536)->Arg(5632);

// The per-ISA element kernels: activation quantizer, F16 widening, softmax exp.
void BM_Elementwise(benchmark::State& state, int which, Isa isa) {
  if (isa > BestSupportedIsa()) {
    state.SkipWithError("ISA not supported here");
    return;
  }
  const DotKernels& k = DotKernelsFor(isa);
  const size_t n = static_cast<size_t>(state.range(0));
  auto x = Random(n);
  std::vector<BlockQ8_0> q(n / kQuantBlock);
  std::vector<uint16_t> h(n);
  k.to_f16(x.data(), h.data(), n);
  std::vector<float> y(n);
  for (auto _ : state) {
    if (which == 0) k.quantize_q8_0(x.data(), q.data(), n);
    if (which == 1) k.f16_to_f32(h.data(), y.data(), n);
    if (which == 2) {
      y = x;
      benchmark::DoNotOptimize(k.exp_sum(y.data(), n, 3.0f));
    }
    benchmark::DoNotOptimize(q.data());
    benchmark::DoNotOptimize(y.data());
  }
  const double in = which == 1 ? 2.0 : 4.0, out = which == 0 ? 34.0 / 32 : 4.0;
  SetRates(state, (in + out) * static_cast<double>(n), which == 2 ? 12.0 * n : 2.0 * n);
}
BENCHMARK_CAPTURE(BM_Elementwise, quantize_q8_0_scalar, 0, Isa::kScalar)->Arg(4096);
BENCHMARK_CAPTURE(BM_Elementwise, quantize_q8_0_avx2, 0, Isa::kAvx2)->Arg(4096);
BENCHMARK_CAPTURE(BM_Elementwise, f16_to_f32_scalar, 1, Isa::kScalar)->Arg(4096);
BENCHMARK_CAPTURE(BM_Elementwise, f16_to_f32_avx2, 1, Isa::kAvx2)->Arg(4096);
BENCHMARK_CAPTURE(BM_Elementwise, exp_sum_scalar, 2, Isa::kScalar)->Arg(4096);
BENCHMARK_CAPTURE(BM_Elementwise, exp_sum_avx2, 2, Isa::kAvx2)->Arg(4096);

}  // namespace
}  // namespace pc

BENCHMARK_MAIN();
