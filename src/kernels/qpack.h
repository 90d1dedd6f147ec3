// Quantized weights repacked at load into groups of 16 rows ("x16"), the
// layout every SIMD matmul kernel of the quantized types reads.
//
// Per block of the format (32 or 256 elements) a group stores its 16 rows
// side by side so that one 64-byte load holds 4 consecutive elements of
// every row, a 32-bit lane per row: the kernels broadcast 4 activation bytes
// to all lanes and accumulate exact integer sums per row with no horizontal
// reduction, then apply the row's scales (QuantDot's formula, so every
// kernel gives the scalar reference's bits). One group is one sequential
// stream, read once per token tile.
//
// An x16 block, in order (sizes in bytes; r = row 0..15):
//   dh[16]          fp16 block scales, row order (bf16 for MXFP4)     32
//   mh[16]          fp16 minima (formats with a minimum)              32
//   sc[nsub][16]    int8 sub-block scales (256-element formats)       16 * nsub
//   mn[nsub][16]    uint8 sub-block minima (Q2_K, Q4_K, Q5_K)         16 * nsub
//   low             the low bits of q, by width:
//     8 bits: [n/4][16][4]  byte k of lane r = q[4v + k] of vector v
//     4 bits: [n/8][16][4]  byte k = q[8c + k] | q[8c + 4 + k] << 4 (vectors 2c, 2c+1)
//     2 bits: [n/16][16][4] byte k = sum_i q[16c + 4i + k] << 2i     (vectors 4c + i)
//   high            the rest of q:
//     Q5 (bit 4), Q3_K (bit 2): [n/32][16] uint32, byte k bit v = that bit of q[32c + 4v + k]
//     Q6_K (bits 4-5): [n/16][16][4] 2-bit fields as the 2-bit low layout
// q is the DecodedBlock value (unsigned; the grid formats store grid indices).
// Thread-safety: pure functions.
#pragma once
#include <cstddef>
#include <cstdint>

#include "base/tensor_type.h"
#include "kernels/quant.h"

namespace pc {

constexpr size_t kX16Rows = 16;

struct X16Layout {
  int n = 0, sub = 0, bits = 0, offset = 0;
  bool has_min = false, sub_scales = false, sub_mins = false, table = false;
  Grid grid = Grid::kNone;
  bool bf16_scale = false;  // dh holds bf16 (MXFP4's E8M0 scales), else fp16
  size_t dh = 0, mh = 0, sc = 0, mn = 0, low = 0, high = 0, bytes = 0;
};

constexpr X16Layout MakeX16Layout(int n, int sub, int bits, int offset, bool has_min, Grid grid, bool bf16_scale) {
  X16Layout l;
  const bool table = grid != Grid::kNone;
  l.grid = grid;
  l.bf16_scale = bf16_scale;
  l.n = n;
  l.sub = sub;
  l.bits = bits;
  l.offset = offset;
  l.has_min = has_min;
  l.table = table;
  l.sub_scales = n == 256;
  l.sub_mins = n == 256 && has_min;
  size_t off = 32;
  if (has_min) l.mh = off, off += 32;
  if (l.sub_scales) l.sc = off, off += static_cast<size_t>(n / sub) * 16;
  if (l.sub_mins) l.mn = off, off += static_cast<size_t>(n / sub) * 16;
  l.low = off;
  const int low_bits = bits == 8 ? 8 : (bits >= 4 ? 4 : 2);
  off += static_cast<size_t>(n) * 16 * low_bits / 8;
  l.high = off;
  if (bits == 5 || bits == 3) off += static_cast<size_t>(n) / 32 * 64;
  if (bits == 6) off += static_cast<size_t>(n) / 16 * 64;
  l.bytes = off;
  return l;
}

// The x16 layout of a quantized weight type (n == 0 for other types).
constexpr X16Layout X16LayoutFor(TensorType t) {
  const QuantFormat f = QuantFormatFor(t);
  if (f.bits == 0) return X16Layout{};
  return MakeX16Layout(f.n, f.sub, f.bits, f.offset, f.has_min, f.grid, f.e8m0);
}
inline X16Layout X16LayoutOf(TensorType t) { return X16LayoutFor(t); }

// Rows [0, 16) of a matrix (row_bytes apart, nb blocks each) to nb x16
// blocks at out (X16LayoutOf(t).bytes each).
void RepackX16(TensorType t, const uint8_t* rows, size_t row_bytes, size_t nb, uint8_t* out);
// Row r (< 16) of a group of nb x16 blocks back to the file's row bytes.
void UnpackX16Row(TensorType t, const uint8_t* group, size_t nb, int r, uint8_t* row_out);

// The x16 kernel of one type: rows [0, 16) of a group of nb blocks against
// activation rows [0, nt) of x (nt <= kX16MaxTokens, x_stride bytes apart, in
// ActivationTypeFor(t)); writes y[t * y_stride + r]. Every output equals
// QuantDot of that row, bit for bit.
constexpr int kX16MaxTokens = 8;
// pf, pf_lines: 64-byte lines to bring into L2 while the kernel runs, spread
// over its blocks (the next group, so that its first pass finds it there);
// pf_lines 0 for none.
using X16Kernel = void (*)(const uint8_t* group, size_t nb, const uint8_t* x, size_t x_stride, int nt, float* y,
                           size_t y_stride, const uint8_t* pf, size_t pf_lines);
// Two consecutive groups (group, group + gb: rows [0, 32)) against every one
// of nt activation rows (any count); writes y[t * y_stride + r], r < 32, the
// bits X16Kernel gives. Worth a call from kX16PairMinTokens rows (below, it
// runs the groups one by one; so does matmul.cc).
constexpr size_t kX16PairMinTokens = 4;
using X16PairKernel = void (*)(const uint8_t* group, size_t gb, size_t nb, const uint8_t* x, size_t x_stride,
                               size_t nt, float* y, size_t y_stride, const uint8_t* pf, size_t pf_lines);

}  // namespace pc
