// Weight matrix times a batch of activation rows. Pure: no allocation, no
// threads; callers split the output rows across a thread pool.
#pragma once
#include <cstddef>
#include <cstdint>

#include "base/tensor_type.h"
#include "kernels/dot.h"
#include "kernels/qpack_kernels.h"

namespace pc {

// A row-major weight matrix [rows][cols] stored as `type` rows.
struct WeightMatrix {
  TensorType type = TensorType::kF32;
  const uint8_t* data = nullptr;
  size_t rows = 0;  // output features
  size_t cols = 0;  // input features
  // Quantized types, optional: rows [0, rows / 16 * 16) repacked in groups
  // of 16 (qpack.h; group g at packed + g * group_bytes()). Where set, those
  // rows are computed from it by the x16 kernels, the rest from data.
  const uint8_t* packed = nullptr;
  size_t row_bytes() const { return RowBytes(type, cols); }
  size_t packed_rows() const { return packed != nullptr ? rows / kX16Rows * kX16Rows : 0; }
  size_t group_bytes() const { return cols / BlockElems(type) * X16LayoutOf(type).bytes; }
  // Rows [first, first + n) as a matrix of their own (fused tensors).
  WeightMatrix Rows(size_t first, size_t n) const;
};

// Row `row` of w as w.cols floats, from the packed copy where there is one
// (the embedding lookup: the original pages then stay unread).
void DequantizeMatrixRow(const WeightMatrix& w, size_t row, float* out);

// Activation rows already converted to ActivationTypeFor(w.type):
// x_rows[t] starts at x + t * x_stride_bytes, t in [0, n_tok).
// Writes y[t * y_stride + r] for r in [row_begin, row_end). xk: the x16
// kernels for packed rows (null only if w has none).
void MatMulRows(const DotKernels& k, const X16Kernels* xk, const WeightMatrix& w, const uint8_t* x,
                size_t x_stride_bytes, size_t n_tok, float* y, size_t y_stride, size_t row_begin, size_t row_end);

}  // namespace pc
