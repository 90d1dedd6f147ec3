#include "kernels/matmul.h"

#include <algorithm>

#include "kernels/quant.h"

namespace pc {

namespace {

using TileFn = void (*)(const uint8_t*, size_t, int, const uint8_t*, size_t, int, size_t, float*, size_t);

TileFn TileFor(const DotKernels& k, TensorType t) {
  if (t == TensorType::kQ8_0) return k.tile_q8_0;
  if (t == TensorType::kQ4_0) return k.tile_q4_0;
  if (t == TensorType::kF32) return k.tile_f32;
  if (t == TensorType::kF16) return k.tile_f16;
  return nullptr;
}

// Rows [row_begin, row_end) of the packed part: whole groups of 8 straight
// into y, up to 4 tokens per call; a group the range cuts (a pool chunk
// boundary off the 8-row grid) is computed whole and the wanted rows kept.
void MatMulPacked(const DotKernels& k, const WeightMatrix& w, const uint8_t* x, size_t x_stride_bytes,
                  size_t n_tok, float* y, size_t y_stride, size_t row_begin, size_t row_end) {
  constexpr int kTok = 4;
  const size_t nb = w.cols / kQuantBlock;
  for (size_t r = row_begin; r < row_end;) {
    const size_t g0 = r / 8 * 8;
    const size_t g1 = std::min(row_end, g0 + 8);
    const BlockQ8_0x8* wg = w.packed + g0 / 8 * nb;
    for (size_t t = 0; t < n_tok; t += kTok) {
      const int nt = static_cast<int>(std::min<size_t>(kTok, n_tok - t));
      const uint8_t* xt = x + t * x_stride_bytes;
      if (r == g0 && g1 == g0 + 8) {
        k.tile_q8_0x8(wg, xt, x_stride_bytes, nt, nb, y + t * y_stride + g0, y_stride);
        continue;
      }
      float part[kTok * 8];
      k.tile_q8_0x8(wg, xt, x_stride_bytes, nt, nb, part, 8);
      for (int i = 0; i < nt; ++i) {
        for (size_t j = r; j < g1; ++j) y[(t + i) * y_stride + j] = part[i * 8 + (j - g0)];
      }
    }
    r = g1;
  }
}

}  // namespace

void DequantizeMatrixRow(const WeightMatrix& w, size_t row, float* out) {
  if (row >= w.packed_rows()) {
    DequantizeRow(w.type, w.data + row * w.row_bytes(), out, w.cols);
    return;
  }
  const size_t nb = w.cols / kQuantBlock;
  const BlockQ8_0x8* group = w.packed + row / 8 * nb;
  for (size_t b = 0; b < nb; ++b) {
    const BlockQ8_0 block = UnpackQ8_0x8(group[b], static_cast<int>(row % 8));
    DequantizeRow(TensorType::kQ8_0, &block, out + b * kQuantBlock, kQuantBlock);
  }
}

void MatMulRows(const DotKernels& k, const WeightMatrix& w, const uint8_t* x,
                size_t x_stride_bytes, size_t n_tok, float* y, size_t y_stride, size_t row_begin,
                size_t row_end) {
  // Tile output rows so a tile of weight rows stays in cache while every
  // activation row passes over it.
  constexpr size_t kRowTile = 16;
  const size_t rb = w.row_bytes();
  if (row_begin < w.packed_rows()) {
    const size_t packed_end = std::min(row_end, w.packed_rows());
    MatMulPacked(k, w, x, x_stride_bytes, n_tok, y, y_stride, row_begin, packed_end);
    row_begin = packed_end;
  }
  if (TileFn tile = TileFor(k, w.type)) {
    const bool quantized = w.type == TensorType::kQ8_0 || w.type == TensorType::kQ4_0;
    const size_t nb = quantized ? w.cols / kQuantBlock : w.cols;
    // One token of float weights: one row at a time, a single sequential
    // stream the hardware prefetcher follows (four interleaved F16 rows
    // measured 20-30% slower from DRAM). Same bits: each output's operations
    // do not depend on the tile shape.
    const size_t rows_per_tile = quantized || n_tok > 1 ? 4 : 1;
    for (size_t r0 = row_begin; r0 < row_end; r0 += kRowTile) {
      const size_t r1 = std::min(row_end, r0 + kRowTile);
      for (size_t t = 0; t < n_tok; t += 2) {
        const int nt = static_cast<int>(std::min<size_t>(2, n_tok - t));
        for (size_t r = r0; r < r1; r += rows_per_tile) {
          const int nr = static_cast<int>(std::min<size_t>(rows_per_tile, r1 - r));
          tile(w.data + r * rb, rb, nr, x + t * x_stride_bytes, x_stride_bytes, nt, nb,
               y + t * y_stride + r, y_stride);
        }
      }
    }
    return;
  }
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
