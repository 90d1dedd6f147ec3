#include "kernels/matmul.h"

#include <algorithm>

namespace pc {

void MatMulRows(const DotKernels& k, const WeightMatrix& w, const uint8_t* x,
                size_t x_stride_bytes, size_t n_tok, float* y, size_t y_stride, size_t row_begin,
                size_t row_end) {
  // Tile output rows so a tile of weight rows stays in cache while every
  // activation row passes over it.
  constexpr size_t kRowTile = 16;
  const size_t rb = w.row_bytes();
  for (size_t r0 = row_begin; r0 < row_end; r0 += kRowTile) {
    const size_t r1 = std::min(row_end, r0 + kRowTile);
    for (size_t t = 0; t < n_tok; ++t) {
      const uint8_t* xt = x + t * x_stride_bytes;
      float* yt = y + t * y_stride;
      for (size_t r = r0; r < r1; ++r) yt[r] = DotRow(k, w.type, w.data + r * rb, xt, w.cols);
    }
  }
}

}  // namespace pc
