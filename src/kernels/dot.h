// Dot-product kernels, one table per instruction-set level. Every SIMD entry
// has a scalar reference in ScalarDotKernels() that tests compare it with.
// Pure functions: no allocation, no threads. Inputs need no alignment.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/kv_layout.h"
#include "kernels/quant.h"
#include "runtime/cpu_features.h"

namespace pc {

constexpr size_t kLaneTile = 16;

// One tile's K and V rows as the cache stores them, for attend_cols, which
// widens them to F32 as it reads them (no F32 copy of the tile is made;
// 8-bit K is read as bytes, QueryQ8):
// K/V head g's elements for position j (< 16) start at k[j] + g *
// head_bytes (likewise v), in `dtype` (Q8_0: whole blocks, head_dim % 32 ==
// 0). Positions the tile lacks point at a zero row.
struct KvTile {
  const uint8_t* k[kLaneTile];
  const uint8_t* v[kLaneTile];
  size_t head_bytes = 0;
  KvDtype dtype = KvDtype::kF32;
};

// Up to 16 query vectors of one K/V head in the lanes (attend_lanes).
struct LaneGroup {
  const float* qt;     // [head_dim][16]
  const int32_t* first;  // [16] positions below it are invisible (a sliding window)
  const int32_t* nv;     // [16] positions from it on are invisible
  float* m;            // [16]
  float* l;            // [16]
  float* acct;         // [head_dim][16]
  // 8-bit K (attend_lanes_q8): the queries as Q8_0 (QueryQ8 below), four
  // elements a lane: qt8[(d / 4) * 16 + i] holds query i's bytes d..d+3;
  // qd[b * 16 + i] and qsum[b * 16 + i] its block b's scale and byte sum.
  const int32_t* qt8 = nullptr;  // [head_dim / 4][16]
  const float* qd = nullptr;     // [head_dim / 32][16]
  const int32_t* qsum = nullptr;  // [head_dim / 32][16]
};

// Queries against 8-bit K (Q8_0 K/V): each scaled query quantized as an
// activation row (quantize_q8_0), so a score is an exact integer dot per
// 32-element block: query i's bytes qs[i * head_dim + d], its block b's
// scale (widened) d[i * nb + b] and the sum of its bytes sum[i * nb + b]
// (nb = head_dim / 32; kernels that bias K's bytes to unsigned subtract
// 128 * sum). Score of query i and K row j (every table, bit for bit):
//   s = fused chain over b = 0..nb-1 of float(I_b) * (d_ib * dk_jb) from 0,
//   I_b = sum over the block's 32 elements of qs * k (exact in int32),
// dk_jb row j's block b scale widened. Half the products of exact F32
// attention and no widening of K, as the reference engine's 8-bit K does.
struct QueryQ8 {
  const int8_t* qs = nullptr;
  const float* d = nullptr;
  const int32_t* sum = nullptr;
};

struct DotKernels {
  const char* name;
  float (*f32)(const float* a, const float* b, size_t n);
  // a, b: fp16 / bf16 rows of n elements; accumulate in f32.
  float (*f16)(const uint16_t* a, const uint16_t* b, size_t n);
  float (*bf16)(const uint16_t* a, const uint16_t* b, size_t n);
  void (*to_f16)(const float* x, uint16_t* y, size_t n);
  // Activation rows to Q8_0 as the reference engine quantizes them
  // (GgmlQuantizeRowQ8_0: 127 / max|x|, ties to even); bit-exact in every
  // table. n % 32 == 0.
  void (*quantize_q8_0)(const float* x, BlockQ8_0* y, size_t n);
  // Activation rows to Q8_K as QuantizeRowQ8_K (the signed extreme maps to
  // -127, ties to even, sums of each 16); bit-exact in every table. n % 256 == 0.
  void (*quantize_q8_k)(const float* x, BlockQ8_K* y, size_t n);
  void (*f16_to_f32)(const uint16_t* x, float* y, size_t n);
  // y[i] += a * x[i] (attention value accumulation) and y[i] *= s.
  void (*axpy_f32)(float a, const float* x, float* y, size_t n);
  void (*axpy_f16)(float a, const uint16_t* x, float* y, size_t n);
  float (*dot_f32_f16)(const float* a, const uint16_t* b, size_t n);
  // Attention tiles, K and V widened to F32 rows [n][head_dim].
  // tile_scores: s[j] = sum_d q[d] * k[j * head_dim + d] for j < n.
  // tile_accum: acc[d] += sum_j p[j] * v[j * head_dim + d], j in order.
  // exp_sum: x[j] = exp(x[j] - m) for j < n, returns their sum (a polynomial
  // exp, relative error < 2e-7). Each output depends only on its own inputs
  // (never on n), so a query's result does not depend on its batch.
  void (*tile_scores)(const float* q, const float* k, size_t head_dim, size_t n, float* s);
  void (*tile_accum)(const float* p, const float* v, size_t head_dim, size_t n, float* acc);
  float (*exp_sum)(float* x, size_t n, float m);
  // out[i] = silu(gate[i]) * up[i] (the FFN's gate; out may alias either).
  void (*silu_mul)(const float* gate, const float* up, float* out, size_t n);
  // out[i] = gelu_tanh(gate[i]) * up[i] (gemma's GeGLU), gelu_tanh(x) =
  // 0.5 x (1 + tanh(y)) = x / (1 + exp(-2y)), y = sqrt(2/pi) (x + 0.044715 x^3).
  void (*gelu_mul)(const float* gate, const float* up, float* out, size_t n);
  // One query against one tile, the online-softmax step: s = scores (scratch,
  // n floats); if max(s) > *m, *l and acc are rescaled by exp(*m - max) and
  // *m = max; then *l += sum exp(s - *m) and acc += those weights times V.
  // What tile_scores, exp_sum and tile_accum do in turn, in one call.
  void (*attend_tile)(const float* q, const float* k, const float* v, size_t head_dim, size_t n, float* s, float* m,
                      float* l, float* acc);
  // Register-tiled float matmul: rows [0, nr) of w (nr <= 4) against
  // activation rows [0, nt) of x (nt <= 4): F32 weights over F32
  // activations, F16 over F16 and BF16 over BF16, nb elements each; writes
  // y[t * y_stride + r]. Row strides in bytes. Each output equals the table's
  // f32/f16/bf16 dot above, bit for bit, so results do not depend on how a
  // batch is tiled. Null when the table has no tiled form. (Quantized
  // weights: qpack.h.)
  void (*tile_f32)(const uint8_t* w, size_t w_stride, int nr, const uint8_t* x, size_t x_stride,
                   int nt, size_t nb, float* y, size_t y_stride);
  void (*tile_f16)(const uint8_t* w, size_t w_stride, int nr, const uint8_t* x, size_t x_stride,
                   int nt, size_t nb, float* y, size_t y_stride);
  void (*tile_bf16)(const uint8_t* w, size_t w_stride, int nr, const uint8_t* x, size_t x_stride,
                    int nt, size_t nb, float* y, size_t y_stride);
  // Attention over one tile of kLaneTile = 16 positions, F32 K/V rows
  // k/v [16][head_dim] (rows past the tile's end zero), in two shapes with
  // the same arithmetic per query, so a query's bits do not depend on which
  // one ran it (null in tables without them: AttendSpan then calls
  // attend_tile). Per query with visible positions first <= j < nv:
  //   s_j = fused chain over d = 0.. of q[d] * k[j][d] from 0; -inf for j >= nv or j < first
  //   mx = max(m, max_j s_j); c = ExpLane(m - mx); p_j = ExpLane(s_j - mx)
  //   l = l * c + sum_j p_j, summed as a tree: u_j = p_j + p_j+8 (j < 8),
  //       w_j = u_j + u_j+4 (j < 4), then (w0 + w2) + (w1 + w3)
  //   acc[d] = fused chain over j = 0..15 of p_j * v[j][d] from acc[d] * c
  //   m = mx.
  // attend_lanes: n groups of up to 16 query vectors of one K/V head, one
  //   per lane (LaneGroup: qt[d * 16 + i] is query i's element d; first[i] <=
  //   nv[i] in 0..16, equal leaving the lane as it is; m[16], l[16] and acct[d * 16 + i]
  //   the lanes' state). For prefill, where a K/V head has many queries;
  //   groups taken two or three at a time share each K and V load.
  // attend_cols: nq query vectors q[i * head_dim + d], query i reading K/V
  //   head i / group of the tile's rows (KvTile, widened to F32 exactly as
  //   f16_to_f32 / q8_0_to_f32 would; 8-bit K below), all seeing positions
  //   first <= j < nv (first < nv <= 16); state m[nq], l[nq], acc[i * head_dim + d]. scratch:
  //   2 * 16 * head_dim floats per K/V head read. For decode, a few queries
  //   per K/V head.
  //   8-bit K (Q8_0 tiles): the scores are QueryQ8's (above), the rest as
  //   for F32; attend_cols then reads the queries from q8 (q unused) and
  //   attend_lanes_q8 from the groups' qt8, qd and qsum, K rows as stored
  //   (krows[j]: position j's K head slice, Q8_0 blocks; a zero row past the
  //   tile's end) and V widened to F32 as for attend_lanes.
  void (*attend_lanes)(const struct LaneGroup* groups, size_t n, const float* k, const float* v, size_t head_dim);
  void (*attend_cols)(const float* q, const QueryQ8& q8, size_t nq, size_t group, const KvTile& kv, size_t head_dim,
                      size_t first, size_t nv, float* scratch, float* m, float* l, float* acc);
  void (*attend_lanes_q8)(const struct LaneGroup* groups, size_t n, const uint8_t* const* krows, const float* v,
                          size_t head_dim);
  // 8-bit K/V rows widened: y[i] = d * qs[i] of n / 32 Q8_0 blocks (one
  // float multiply each, so every table gives the same bits). n % 32 == 0.
  void (*q8_0_to_f32)(const void* x, float* y, size_t n);
};

const DotKernels& ScalarDotKernels();
// The scalar form of exp_sum's exponential (the AVX2 one computes the same
// polynomial in 8 lanes).
float ExpPoly(float x);
// exp as attend_lanes/attend_cols compute it in every table: ExpPoly's
// polynomial with fused steps (the AVX-512 lanes give the same bits).
float ExpLane(float x);
// Null where this binary was built without that level.
const DotKernels* Avx2DotKernels();
// The AVX2 table's attend_lanes and attend_cols (attention_avx2.cc).
void Avx2AttendLanes(const LaneGroup* groups, size_t n, const float* k, const float* v, size_t head_dim);
void Avx2AttendCols(const float* q, const QueryQ8& q8, size_t nq, size_t group, const KvTile& kv, size_t head_dim,
                    size_t first, size_t nv, float* scratch, float* m, float* l, float* acc);
void Avx2AttendLanesQ8(const LaneGroup* groups, size_t n, const uint8_t* const* krows, const float* v, size_t head_dim);
// The AVX2 table with the avxvnni level's attention (8-bit K's integer
// dots by the VEX vpdpbusd; the same bits as the avx2 table's); null where
// the binary lacks either level. Use it only where IsaSupported(kAvxVnni).
const DotKernels* AvxVnniDotKernels();
// Its attention entries (attention_avxvnni.cc).
void AvxVnniAttendLanes(const LaneGroup* groups, size_t n, const float* k, const float* v, size_t head_dim);
void AvxVnniAttendCols(const float* q, const QueryQ8& q8, size_t nq, size_t group, const KvTile& kv, size_t head_dim,
                       size_t first, size_t nv, float* scratch, float* m, float* l, float* acc);
void AvxVnniAttendLanesQ8(const LaneGroup* groups, size_t n, const uint8_t* const* krows, const float* v,
                          size_t head_dim);
// The AVX2 table with AVX-512 attention (attend_lanes, attend_cols),
// F16/BF16 matmul (f16, bf16, tile_f16, tile_bf16: dot_avx512.cc, 16-lane
// arithmetic of its own) and 16-lane F16 widening (f16_to_f32).
const DotKernels* Avx512DotKernels();
// The AVX-512 table's attend_lanes and attend_cols (attention_avx512.cc).
void Avx512AttendLanes(const LaneGroup* groups, size_t n, const float* k, const float* v, size_t head_dim);
void Avx512AttendCols(const float* q, const QueryQ8& q8, size_t nq, size_t group, const KvTile& kv, size_t head_dim,
                      size_t first, size_t nv, float* scratch, float* m, float* l, float* acc);
void Avx512AttendLanesQ8(const LaneGroup* groups, size_t n, const uint8_t* const* krows, const float* v,
                         size_t head_dim);
float Avx512DotF16(const uint16_t* a, const uint16_t* b, size_t n);
void Avx512F16ToF32(const uint16_t* x, float* y, size_t n);
void Avx512Q8_0ToF32(const void* x, float* y, size_t n);
float Avx512DotBf16(const uint16_t* a, const uint16_t* b, size_t n);
void Avx512TileF16(const uint8_t* w, size_t w_stride, int nr, const uint8_t* x, size_t x_stride, int nt, size_t n,
                   float* y, size_t y_stride);
void Avx512TileBf16(const uint8_t* w, size_t w_stride, int nr, const uint8_t* x, size_t x_stride, int nt, size_t n,
                    float* y, size_t y_stride);
// The table for the active level (or the best one at or below it).
const DotKernels& DotKernelsFor(Isa isa);
const DotKernels& ActiveDotKernels();

// Dot of a weight row (type wt, n elements) with an activation row already
// converted to ActivationTypeFor(wt); quantized types by QuantDot.
float DotRow(const DotKernels& k, TensorType wt, const void* w, const void* x, size_t n);

}  // namespace pc
