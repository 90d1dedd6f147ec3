// Block quantization formats (the GGUF/ggml layouts) and row conversions.
// Every weight format is described once by a decoder to a common form
// (DecodedBlock: unsigned integer values, integer sub-block scales and mins,
// half-precision block scales) and an encoder back; dequantization, the
// scalar dot products, our quantizers and the repacked layouts (qpack.h) are
// written over that form. Pure functions over caller-owned memory.
#pragma once
#include <cstddef>
#include <cstdint>

#include "base/tensor_type.h"

namespace pc {

constexpr size_t kQuantBlock = 32;   // elements per block of the 32-element formats
constexpr size_t kSuperBlock = 256;  // elements per block of the K-quants and IQ4_XS

// The file formats. x: the value of an element; q: its stored bits.
struct BlockQ8_0 {  // x = d * qs
  uint16_t d;       // fp16
  int8_t qs[32];
};
struct BlockQ4_0 {  // x[j] = d * ((qs[j] & 15) - 8), x[j + 16] = d * ((qs[j] >> 4) - 8)
  uint16_t d;
  uint8_t qs[16];
};
struct BlockQ4_1 {  // as Q4_0 without the -8, plus m
  uint16_t d, m;
  uint8_t qs[16];
};
struct BlockQ5_0 {  // Q4_0's nibbles plus a fifth bit per element (bit j of qh), minus 16
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ5_1 {  // Q5_0 without the -16, plus m
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockIQ4_NL {  // x = d * kIq4Values[nibble], nibbles as Q4_0
  uint16_t d;
  uint8_t qs[16];
};
// OCP microscaling FP4 (gpt-oss's experts): x = 2^(e - 128) * kMxfp4Values[nibble],
// nibbles as Q4_0. The grid holds twice the E2M1 values, hence the halved scale.
struct BlockMXFP4 {
  uint8_t e;  // E8M0 exponent
  uint8_t qs[16];
};
// 256 elements in 16 sub-blocks of 16: x = d * (scales & 15) * q - dmin * (scales >> 4), q 2 bits.
struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d, dmin;
};
// 16 sub-blocks of 16: x = d * (s - 32) * (q - 4), q 3 bits (2 in qs, 1 in hmask), s 6 bits.
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
// 8 sub-blocks of 32: x = d * s * q - dmin * m, q 4 bits, s and m 6 bits packed in 12 bytes.
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
// As Q4_K with a fifth bit per element in qh.
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
// 16 sub-blocks of 16: x = d * scales * (q - 32), q 6 bits (4 in ql, 2 in qh).
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
// 8 sub-blocks of 32: x = d * (s - 32) * kIq4Values[nibble], s 6 bits.
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24 && sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockMXFP4) == 17);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockIQ4_XS) == 136);

// The 16 values of the IQ4 formats' non-linear grid.
extern const int8_t kIq4Values[16];
extern const uint8_t kIq4ValuesPlus128[16];  // the same + 128
// MXFP4's grid: E2M1 values doubled (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their
// negatives; nibble 8 is -0).
extern const int8_t kMxfp4Values[16];
extern const uint8_t kMxfp4ValuesPlus128[16];

// The grid a format's q indexes (none for the linear formats).
enum class Grid : uint8_t { kNone, kIq4, kMxfp4 };
inline const int8_t* GridValues(Grid g) { return g == Grid::kMxfp4 ? kMxfp4Values : kIq4Values; }
inline const uint8_t* GridValuesPlus128(Grid g) { return g == Grid::kMxfp4 ? kMxfp4ValuesPlus128 : kIq4ValuesPlus128; }

// E8M0 exponent e <-> the bf16 bits of 2^(e - 128) (MXFP4's halved scale;
// every such power of two, the two subnormal ones included, is exact in bf16).
uint16_t E8m0HalfToBf16(uint8_t e);
uint8_t Bf16ToE8m0Half(uint16_t bf16);

// Activations met by quantized weights. The 32-element formats take Q8A
// (our Q8_0 with the scale as a float and the integer sum of the block); the
// 256-element ones take Q8_K (float scale, sums of each 16), as the reference
// engine pairs them.
struct BlockQ8A {
  float d;
  int32_t sum;
  int8_t qs[32];
};
struct BlockQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};
static_assert(sizeof(BlockQ8A) == 40 && sizeof(BlockQ8_K) == 292);

// One block of any weight format in a common form: element e is
//   x[e] = fp16(dh) * sc[e / sub] * (q[e] - offset) + m * mn[e / sub]
// with m = fp16(mh), negated where the format subtracts its minimum. For
// the grid formats (IQ4, MXFP4) q is the grid value + 128 (offset 128), so
// every q is an unsigned byte and every sum below is an exact integer.
// MXFP4's dh holds bf16 bits (bf16_scale): its E8M0 scale is exact there.
struct DecodedBlock {
  int n = 0;     // elements: 32 or 256
  int sub = 0;   // elements per sub-block (16 or 32; n for the 32-element formats)
  int offset = 0;
  uint16_t dh = 0, mh = 0;
  bool has_min = false, neg_min = false;
  bool bf16_scale = false;  // dh is bf16 (MXFP4), else fp16
  uint8_t q[256];
  int32_t sc[16];  // n / sub used; 1 where the format has no sub-block scales
  int32_t mn[16];  // 0 where the format has no minimum
  float d() const;
  float m() const;  // with its sign
};

// Bits per stored q, the q offset and the sub-block size of a weight format.
struct QuantFormat {
  int n;        // elements per block: 32 or 256
  int bits;     // 2, 3, 4, 5, 6 or 8
  int sub;      // elements per sub-block
  int offset;   // q - offset is the signed integer the scales multiply
  bool has_min;  // a float minimum (per block, or per sub-block times mn)
  Grid grid;     // q indexes GridValues(grid)
  bool e8m0;     // the block scale is an E8M0 exponent (DecodedBlock::bf16_scale)
};
// The formats' constants (bits 0 for float and activation-only types).
constexpr QuantFormat QuantFormatFor(TensorType t) {
  constexpr Grid kNo = Grid::kNone;
  switch (t) {  // elements, bits, sub-block, offset, minimum, grid, E8M0 scale
    case TensorType::kQ8_0: return {32, 8, 32, 128, false, kNo, false};
    case TensorType::kQ4_0: return {32, 4, 32, 8, false, kNo, false};
    case TensorType::kQ4_1: return {32, 4, 32, 0, true, kNo, false};
    case TensorType::kQ5_0: return {32, 5, 32, 16, false, kNo, false};
    case TensorType::kQ5_1: return {32, 5, 32, 0, true, kNo, false};
    case TensorType::kIQ4_NL: return {32, 4, 32, 128, false, Grid::kIq4, false};
    case TensorType::kMXFP4: return {32, 4, 32, 128, false, Grid::kMxfp4, true};
    case TensorType::kQ2_K: return {256, 2, 16, 0, true, kNo, false};
    case TensorType::kQ3_K: return {256, 3, 16, 4, false, kNo, false};
    case TensorType::kQ4_K: return {256, 4, 32, 0, true, kNo, false};
    case TensorType::kQ5_K: return {256, 5, 32, 0, true, kNo, false};
    case TensorType::kQ6_K: return {256, 6, 16, 32, false, kNo, false};
    case TensorType::kIQ4_XS: return {256, 4, 32, 128, false, Grid::kIq4, false};
    default: return {0, 0, 0, 0, false, kNo, false};
  }
}
// Null for float and activation-only types.
const QuantFormat* QuantFormatOf(TensorType t);

// Block of type t <-> common form. Encode requires every field to fit its
// bits (what Decode produces always does).
void DecodeBlock(TensorType t, const void* block, DecodedBlock* out);
void EncodeBlock(TensorType t, const DecodedBlock& in, void* block);

// Any weight type to float and back; n is a multiple of BlockElems(type).
// Quantizing is ours (simple round-to-nearest fits, no search): good
// enough for benchmark models, not a replacement for the reference tools.
void DequantizeRow(TensorType type, const void* src, float* dst, size_t n);
void QuantizeRow(TensorType type, const float* src, void* dst, size_t n);

// n % 32 == 0. Q8_0 quantizer of the file format (1/d, ties away from zero).
void QuantizeRowQ8_0(const float* x, BlockQ8_0* y, size_t n);
void QuantizeRowQ4_0(const float* x, BlockQ4_0* y, size_t n);
void ConvertRowF16(const float* x, uint16_t* y, size_t n);
void ConvertRowBf16(const float* x, uint16_t* y, size_t n);

// Activation quantizers, as the reference engine quantizes activations:
// Q8A's scale is max|x|/127 rounded to fp16, values rounded ties-to-even
// (its Q8_0); Q8_K's scale is -max/127 for the signed extreme, values capped
// at 127. n % 32 (Q8A) or n % 256 (Q8_K) == 0.
void QuantizeRowQ8A(const float* x, BlockQ8A* y, size_t n);
void QuantizeRowQ8_K(const float* x, BlockQ8_K* y, size_t n);
// A float row to any activation type (the float types, Q8A, Q8_K).
void QuantizeActivationRow(TensorType type, const float* x, void* y, size_t n);
// Q8A from Q8_0 activation blocks (the SIMD Q8_0 quantizer's output).
void Q8_0ToQ8A(const BlockQ8_0* x, BlockQ8A* y, size_t nb);

// The first value of largest magnitude in x[0..n), with its sign (0 if all
// are zero): the anchor of the signed-scale block formats.
float SignedExtreme(const float* x, size_t n);

// The activation type a weight type multiplies with: F16 weights meet F16
// activations, 32-element formats Q8A, 256-element formats Q8_K.
TensorType ActivationTypeFor(TensorType weight);

// The reference dot product of one weight row with one activation row
// (n elements, x in ActivationTypeFor(type)) for the quantized types: per
// block, exact integer sums A = sum_j sc_j * sum_e (q_e - offset) * x_e and
// B = sum_j mn_j * sum_e x_e, then
//   s += (float)A * (d * dx)            (+ (float)B * (m * dx) with a minimum)
// in block order, products rounded one at a time. Every SIMD kernel of these
// types gives these bits.
float QuantDot(TensorType type, const void* w, const void* x, size_t n);

}  // namespace pc
