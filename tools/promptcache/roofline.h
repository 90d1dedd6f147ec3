// In-process measurements of this machine's limits, so benchmarks report
// the fraction of the roofline reached in the same run: streaming read
// bandwidth and register-only FP32 FMA throughput at the active ISA.
// Kernels are pure loops over caller memory; the caller splits the work
// across its threads (each call runs on one thread).
#pragma once
#include <cstddef>
#include <span>

namespace pc {

// Sums a buffer (reads every byte once); the result defeats dead-code removal.
float ReadSweep(std::span<const float> data);
// FP32 fused multiply-adds in registers for `iters` rounds; returns the
// number of floating-point operations done (2 per FMA lane).
double FmaLoop(size_t iters, float* sink);

}  // namespace pc
