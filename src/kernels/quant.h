// Block quantization formats (ggml-compatible, round to nearest) and row
// conversions. Pure functions over caller-owned memory; no allocation.
#pragma once
#include <cstddef>
#include <cstdint>

#include "base/tensor_type.h"

namespace pc {

// 32 weights: x[i] = d * qs[i].
struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34);

// 32 weights: x[j] = d * ((qs[j] & 15) - 8), x[j + 16] = d * ((qs[j] >> 4) - 8).
struct BlockQ4_0 {
  uint16_t d;  // fp16 scale
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_0) == 18);

// 256 weights in 16 groups of 16, each with an int8 scale: x = d * scale * (q - 32),
// q a 6-bit value split over ql (low 4 bits) and qh (high 2 bits).
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;  // fp16 super-block scale
};
static_assert(sizeof(BlockQ6_K) == 210);

constexpr size_t kQuantBlock = 32;

// Block b of eight Q8_0 rows, interleaved for the 8-row matmul kernels:
// qs[32 * g + 4 * r + k] is row r's element 4 * g + k (g < 8, k < 4), so one
// 32-byte load holds 4 consecutive elements of each row, a lane per row.
// Same bytes as the eight BlockQ8_0 (272 = 8 x 34), reordered once at load.
struct BlockQ8_0x8 {
  uint16_t d[8];  // fp16 scales, row order
  int8_t qs[256];
};
static_assert(sizeof(BlockQ8_0x8) == 272);

// Rows [0, 8) of w (row_bytes apart, nb blocks each) to nb interleaved blocks.
void PackQ8_0x8(const uint8_t* w, size_t row_bytes, size_t nb, BlockQ8_0x8* out);
// Row r (< 8) of block b back to a BlockQ8_0 (tests and scalar kernels).
BlockQ8_0 UnpackQ8_0x8(const BlockQ8_0x8& b, int r);
constexpr size_t kSuperBlock = 256;

// One Q6_K block to 256 floats.
void DequantizeBlockQ6_K(const BlockQ6_K& b, float* y);

// The first value of largest magnitude in x[0..n), with its sign (0 if all
// are zero): the anchor of the signed-scale block formats.
float SignedExtreme(const float* x, size_t n);

// n must be a multiple of 32.
void QuantizeRowQ8_0(const float* x, BlockQ8_0* y, size_t n);
void QuantizeRowQ4_0(const float* x, BlockQ4_0* y, size_t n);
void ConvertRowF16(const float* x, uint16_t* y, size_t n);
void ConvertRowBf16(const float* x, uint16_t* y, size_t n);

// Any supported type to float; n is a multiple of BlockElems(type).
void DequantizeRow(TensorType type, const void* src, float* dst, size_t n);
// Float row to any supported type (the inverse, lossy for all but F32).
void QuantizeRow(TensorType type, const float* src, void* dst, size_t n);

// The type a weight row of `weight` is multiplied with: activations are
// converted to it first (F16 weights use F16 activations, quantized weights
// use Q8_0 activations), as the reference engine does.
TensorType ActivationTypeFor(TensorType weight);

}  // namespace pc
