// Weight matrix times a batch of activation rows. Pure: no allocation, no
// threads; callers split the output rows across a thread pool.
#pragma once
#include <cstddef>
#include <cstdint>

#include "base/tensor_type.h"
#include "kernels/dot.h"

namespace pc {

// A row-major weight matrix [rows][cols] stored as `type` rows.
struct WeightMatrix {
  TensorType type = TensorType::kF32;
  const uint8_t* data = nullptr;
  size_t rows = 0;  // output features
  size_t cols = 0;  // input features
  // Q8_0 only, optional: rows [0, rows / 8 * 8) repacked in groups of eight
  // (group g = cols / 32 blocks at packed + g * cols / 32). Where set, those
  // rows are computed from it (tile_q8_0x8's numerics), the rest from data.
  const BlockQ8_0x8* packed = nullptr;
  size_t row_bytes() const { return RowBytes(type, cols); }
  size_t packed_rows() const { return packed != nullptr ? rows / 8 * 8 : 0; }
};

// Row `row` of w as w.cols floats, from the packed copy where there is one
// (the embedding lookup: the original pages then stay unread).
void DequantizeMatrixRow(const WeightMatrix& w, size_t row, float* out);

// Activation rows already converted to ActivationTypeFor(w.type):
// x_rows[t] starts at x + t * x_stride_bytes, t in [0, n_tok).
// Writes y[t * y_stride + r] for r in [row_begin, row_end).
void MatMulRows(const DotKernels& k, const WeightMatrix& w, const uint8_t* x,
                size_t x_stride_bytes, size_t n_tok, float* y, size_t y_stride, size_t row_begin,
                size_t row_end);

}  // namespace pc
