// The per-token passes of a forward pass (norms, residual adds, RoPE, the
// activations' conversion for quantized weights) as a table per ISA level,
// each entry the same bits as its scalar function in every table
// (tests/kernels/ops_simd_test.cc). Thread-safety: pure functions over
// spans; the tables are immutable.
#pragma once
#include <cstddef>

#include "kernels/ops.h"
#include "kernels/quant.h"
#include "runtime/cpu_features.h"

namespace pc {

struct RowOps {
  const char* name;
  // RmsNormRows (ops.h): each row's sum of squares one sequential chain of
  // double adds; the SIMD tables run eight rows' chains in the lanes.
  void (*rms_norm_rows)(const float* x, const float* w, float* out, size_t rows, size_t n, float eps);
  // y[i] += x[i] (AddInPlace).
  void (*add)(float* y, const float* x, size_t n);
  // RopeWith: heads of x = [n_heads][head_dim] rotated with a token's angles.
  void (*rope)(float* x, size_t n_heads, const float* cs, const RopeParams& p);
  // Activation rows for the 32-element weight formats: QuantizeRowQ8A.
  void (*quantize_q8a)(const float* x, BlockQ8A* y, size_t n);
};

const RowOps& ScalarRowOps();
const RowOps* Avx2RowOps();  // ops_avx2.cc
// The table for a level (AVX2's for every level above it: these passes
// gain nothing measurable from wider registers).
const RowOps& RowOpsFor(Isa isa);

}  // namespace pc
