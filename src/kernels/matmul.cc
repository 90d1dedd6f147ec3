#include "kernels/matmul.h"

#include <algorithm>
#include <vector>

#include "base/check.h"
#include "kernels/quant.h"

namespace pc {

namespace {

using TileFn = void (*)(const uint8_t*, size_t, int, const uint8_t*, size_t, int, size_t, float*, size_t);

TileFn TileFor(const DotKernels& k, TensorType t) {
  if (t == TensorType::kF32) return k.tile_f32;
  if (t == TensorType::kF16) return k.tile_f16;
  if (t == TensorType::kBF16) return k.tile_bf16;
  return nullptr;
}

// Rows [row_begin, row_end) of the packed part: whole groups of 16 straight
// into y, up to kX16MaxTokens tokens per call, or two whole groups at once
// with every token where the table has a pair kernel and there are at least
// kX16PairMinTokens; a group the range cuts (a pool chunk boundary off the
// 16-row grid) is computed whole and the wanted rows kept.
void MatMulPacked(X16Kernel kernel, X16PairKernel pair, const WeightMatrix& w, const uint8_t* x, size_t x_stride_bytes,
                  size_t n_tok, float* y, size_t y_stride, size_t row_begin, size_t row_end) {
  const size_t nb = w.cols / BlockElems(w.type), gb = w.group_bytes();
  for (size_t r = row_begin; r < row_end;) {
    const size_t g0 = r / kX16Rows * kX16Rows;
    if (pair != nullptr && n_tok >= kX16PairMinTokens && r == g0 && g0 + 2 * kX16Rows <= row_end) {
      const uint8_t* group = w.packed + g0 / kX16Rows * gb;
      const size_t next = std::min(row_end - (g0 + 2 * kX16Rows), 2 * kX16Rows) / kX16Rows;
      pair(group, gb, nb, x, x_stride_bytes, n_tok, y + g0, y_stride, group + 2 * gb, next * gb / 64);
      r = g0 + 2 * kX16Rows;
      continue;
    }
    const size_t g1 = std::min(row_end, g0 + kX16Rows);
    const uint8_t* group = w.packed + g0 / kX16Rows * gb;
    // The first pass over a group waits on memory unless the group is
    // already in cache: every pass over this group fetches a share of the
    // next one in the range into L2, spread over its blocks.
    const size_t passes = (n_tok + kX16MaxTokens - 1) / kX16MaxTokens;
    const size_t lines = g1 < row_end ? gb / 64 : 0;
    for (size_t t = 0, pass = 0; t < n_tok; t += kX16MaxTokens, ++pass) {
      const int nt = static_cast<int>(std::min<size_t>(kX16MaxTokens, n_tok - t));
      const uint8_t* xt = x + t * x_stride_bytes;
      const size_t pf_first = pass * lines / passes, pf_lines = (pass + 1) * lines / passes - pf_first;
      const uint8_t* pf = group + gb + 64 * pf_first;
      if (r == g0 && g1 == g0 + kX16Rows) {
        kernel(group, nb, xt, x_stride_bytes, nt, y + t * y_stride + g0, y_stride, pf, pf_lines);
        continue;
      }
      float part[kX16MaxTokens * kX16Rows];
      kernel(group, nb, xt, x_stride_bytes, nt, part, kX16Rows, pf, pf_lines);
      for (int i = 0; i < nt; ++i) {
        for (size_t j = r; j < g1; ++j) y[(t + i) * y_stride + j] = part[i * kX16Rows + (j - g0)];
      }
    }
    r = g1;
  }
}

}  // namespace

WeightMatrix WeightMatrix::Rows(size_t first, size_t n) const {
  PC_CHECK(first + n <= rows && packed == nullptr);
  WeightMatrix m = *this;
  m.data = data + first * row_bytes();
  m.rows = n;
  return m;
}

void DequantizeMatrixRow(const WeightMatrix& w, size_t row, float* out) {
  if (row >= w.packed_rows()) {
    DequantizeRow(w.type, w.data + row * w.row_bytes(), out, w.cols);
    return;
  }
  // Block by block through one block's bytes on the stack (no allocation).
  const size_t be = BlockElems(w.type), nb = w.cols / be, layout_bytes = X16LayoutOf(w.type).bytes;
  const uint8_t* group = w.packed + row / kX16Rows * w.group_bytes();
  alignas(16) uint8_t block[kMaxBlockBytes];
  PC_CHECK(BlockBytes(w.type) <= sizeof(block));
  for (size_t b = 0; b < nb; ++b) {
    UnpackX16Row(w.type, group + b * layout_bytes, 1, static_cast<int>(row % kX16Rows), block);
    DequantizeRow(w.type, block, out + b * be, be);
  }
}

void MatMulRows(const DotKernels& k, const X16Kernels* xk, const WeightMatrix& w, const uint8_t* x,
                size_t x_stride_bytes, size_t n_tok, float* y, size_t y_stride, size_t row_begin, size_t row_end) {
  // Tile output rows so a tile of weight rows stays in cache while every
  // activation row passes over it.
  constexpr size_t kRowTile = 16;
  const size_t rb = w.row_bytes();
  if (row_begin < w.packed_rows()) {
    PC_CHECK(xk != nullptr);
    const size_t packed_end = std::min(row_end, w.packed_rows());
    MatMulPacked(xk->For(w.type), xk->PairFor(w.type), w, x, x_stride_bytes, n_tok, y, y_stride, row_begin, packed_end);
    row_begin = packed_end;
  }
  if (TileFn tile = TileFor(k, w.type)) {
    // One token of float weights: one row at a time, a single sequential
    // stream the hardware prefetcher follows (four interleaved F16 rows
    // measured 20-30% slower from DRAM). Same bits: each output's operations
    // do not depend on the tile shape.
    const size_t rows_per_tile = n_tok > 1 ? 4 : 1;
    for (size_t r0 = row_begin; r0 < row_end; r0 += kRowTile) {
      const size_t r1 = std::min(row_end, r0 + kRowTile);
      for (size_t t = 0; t < n_tok; t += 4) {
        const int nt = static_cast<int>(std::min<size_t>(4, n_tok - t));
        for (size_t r = r0; r < r1; r += rows_per_tile) {
          const int nr = static_cast<int>(std::min<size_t>(rows_per_tile, r1 - r));
          tile(w.data + r * rb, rb, nr, x + t * x_stride_bytes, x_stride_bytes, nt, w.cols, y + t * y_stride + r,
               y_stride);
        }
      }
    }
    return;
  }
  // Rows left in the file's layout (the scalar level, or the last rows/16):
  // the reference dot, which the x16 kernels equal bit for bit.
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
