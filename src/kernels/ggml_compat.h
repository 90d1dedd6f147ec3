// The arithmetic of the independent reference engine (llama.cpp's CPU
// backend as built with GCC for one of three targets, GgmlTarget below),
// reproduced in portable scalar code
// so that our outputs can be compared with its outputs bit for bit
// (Numerics::kGgmlCompat). Only the order and rounding of float operations
// matter here, not speed: F16 rounding of Q/K/V and of the F16 attention
// accumulator turns a one-ulp F32 difference upstream into a visible logprob
// difference downstream, so "close" is not enough.
//
// What that engine does, as measured against its published outputs:
// - F32 matrix times one vector: 4 accumulators of 16 lanes over steps of 64
//   (lane l of accumulator j takes element 64i + 16j + l, fused multiply-add),
//   then acc0+acc2, acc1+acc3, their sum, a 16-to-1 pairwise tree, then the
//   leftover elements added one at a time (multiply rounded, then add).
// - F32 matrix times several vectors (a prompt), when the inner size is a
//   multiple of 16: one accumulator of 16 lanes (fused multiply-add), then the
//   same 16-to-1 tree. Otherwise as for one vector.
// - Q8_0 activations: see GgmlQuantizeRowQ8_0.
// - SiLU: a vectorised exp approximation (range reduction by ln2 plus a
//   degree-5 polynomial) on each row's first floor(n/16)*16 elements, libm
//   expf on the rest.
// Built for AVX2 (GgmlTarget::kAvx2) its F32 and F16 loops are 8 lanes wide
// (VecDot8/GemmDot8 in ggml_compat_loops.h) and its F16 dots F32 arithmetic
// on widened values; for AVX-512 without FP16 arithmetic (kAvx512) the
// 16-lane F32 orders above on widened values; with AVX512-FP16
// (kAvx512Fp16) the F16 arithmetic described at GgmlDotF16Vec.
// The shared references name the CPU each set was recorded on.
// Pure functions: no allocation, no threads.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

#include "kernels/attention.h"
#include "kernels/kv_layout.h"
#include "kernels/quant.h"
#include "runtime/cpu_features.h"

namespace pc {

enum class GgmlTarget { kAvx512Fp16, kAvx512, kAvx2 };
// The build the reference engine would run on this CPU (its AVX-512 build
// with FP16 arithmetic where the CPU has it; AVX2 below AVX-512).
GgmlTarget DefaultGgmlTarget();
// Process-wide (initially DefaultGgmlTarget()); set before Forward calls,
// never during one.
void SetGgmlTarget(GgmlTarget t);
GgmlTarget ActiveGgmlTarget();
const char* GgmlTargetName(GgmlTarget t);  // "avx512fp16", "avx512", "avx2"
Result<GgmlTarget> ParseGgmlTarget(const std::string& name);

// Sum of 16 lanes in the order of the AVX-512 horizontal add:
// halves (a[i] + a[i+8]), quarters, then (t0 + t2) + (t1 + t3).
float GgmlReduce16(const float* lanes);

// dot(w, x) over n floats in the vector-dot order described above.
float GgmlDotF32Vec(const float* w, const float* x, size_t n);

// dot(w, x) in the blocked-GEMM order; requires n % 16 == 0.
float GgmlDotF32Gemm(const float* w, const float* x, size_t n);

// F16 rows. The reference machine has AVX512-FP16, so its vector dot is
// done in F16 arithmetic: 4 accumulators of 32 F16 lanes over steps of 128
// (fused multiply-add rounded to F16), F16 adds acc0+acc2, acc1+acc3, their
// sum and a 32-to-1 pairwise tree, then the leftover products (exact in
// float) added in double. Its GEMM order is the F32 one above on widened
// values.
float GgmlDotF16Vec(const uint16_t* w, const uint16_t* x, size_t n);
float GgmlDotF16Gemm(const uint16_t* w, const uint16_t* x, size_t n);

// Activations to Q8_0 as the reference quantizes them inside quantized
// matmuls: scale d = max|x|/127 stored as F16, values x * (127/max|x|)
// rounded to nearest, ties to even (the weight-file quantizer in quant.h
// uses 1/d and ties away from zero, as the file format's reference does).
void GgmlQuantizeRowQ8_0(const float* x, BlockQ8_0* y, size_t n);

// Q8_0/Q4_0 weights times Q8_0 activations in the reference's order (the
// same for one vector and for a prompt): per block, 8 lanes each summing 4
// products exactly; lane += d_w*d_x * lane_sum (fused); then a pairwise tree.
float GgmlDotQ8_0(const BlockQ8_0* w, const BlockQ8_0* x, size_t num_blocks);
float GgmlDotQ4_0(const BlockQ4_0* w, const BlockQ8_0* x, size_t num_blocks);

// Q6_K weights take activations in 8-bit blocks of 256 with a float scale:
// d = -max/127 where max is the signed value of largest magnitude, values
// x * (-127/max) rounded to nearest (ties to even), capped at 127.
// (QuantizeRowQ8_K, which also fills the sums of each 16.)
void GgmlQuantizeRowQ8_K(const float* x, BlockQ8_K* y, size_t n);

// Q6_K times Q8_K in the reference's AVX2 order: per super-block, exact
// integer sums of scale * (q6 - 32) * q8 in 8 lanes (lane l takes elements
// 4l..4l+3 of every 32), lane += (d_x * d_w) * lane_sum fused, then the
// 8-lane tree.
float GgmlDotQ6_K(const BlockQ6_K* w, const BlockQ8_K* x, size_t num_blocks);

// MXFP4 times Q8_0 (the same order for every target: its AVX2 code).
float GgmlDotMxfp4(const BlockMXFP4* w, const BlockQ8_0* x, size_t num_blocks);

// Q4_0 and MXFP4 weights the reference keeps in its interleaved 8-row forms
// (its CPU repack, on by default on x86 CPUs with AVX2: a matrix of these
// types whose row count is a multiple of 8, experts' matrices included):
// every output, for one token or several, then sums block by block,
// acc = fma(exact block sum, d_w * d_x, acc) from 0, instead of the
// vector-dot order of GgmlDotQ4_0 / GgmlDotMxfp4.
bool GgmlRepacksRows(TensorType t, size_t rows);
float GgmlDotQ4_0Repacked(const BlockQ4_0* w, const BlockQ8_0* x, size_t num_blocks);
float GgmlDotMxfp4Repacked(const BlockMXFP4* w, const BlockQ8_0* x, size_t num_blocks);

// The hot loops above as a table per instruction-set level; every level
// gives identical bits (fused multiply-adds are exact wherever computed).
struct GgmlCompatKernels {
  const char* name;
  float (*f32_vec)(const float* w, const float* x, size_t n);
  float (*f32_gemm)(const float* w, const float* x, size_t n);
  float (*f16_gemm)(const uint16_t* w, const uint16_t* x, size_t n);
  float (*f16_vec)(const uint16_t* w, const uint16_t* x, size_t n);
  float (*q8_0)(const BlockQ8_0* w, const BlockQ8_0* x, size_t num_blocks);
  float (*q4_0)(const BlockQ4_0* w, const BlockQ8_0* x, size_t num_blocks);
  float (*q6_k)(const BlockQ6_K* w, const BlockQ8_K* x, size_t num_blocks);
  float (*mxfp4)(const BlockMXFP4* w, const BlockQ8_0* x, size_t num_blocks);
  float (*q4_0_repacked)(const BlockQ4_0* w, const BlockQ8_0* x, size_t num_blocks);
  float (*mxfp4_repacked)(const BlockMXFP4* w, const BlockQ8_0* x, size_t num_blocks);
  size_t gemm_multiple;  // the GEMM order needs the inner size a multiple of this
};
// Best available at or below isa, for the target (default: the active one).
const GgmlCompatKernels& GgmlCompatKernelsFor(Isa isa);
const GgmlCompatKernels& GgmlCompatKernelsFor(Isa isa, GgmlTarget target);
const GgmlCompatKernels& ActiveGgmlCompatKernels();  // for ActiveIsa() and ActiveGgmlTarget()
const GgmlCompatKernels* GgmlCompatAvx2Kernels(GgmlTarget target = GgmlTarget::kAvx512Fp16);  // null if not built

// exp(x) as the reference's vectorised approximation computes it (about
// 1.5 ulp from the true value), in the active target's form (the AVX2 build
// rounds its polynomial differently); std::exp outside |x| < 87.
float GgmlExpApprox(float x);
// The target's vector width in floats (8 for AVX2, else 16), and the sum of
// that many lanes in its horizontal-add order.
size_t GgmlVectorLanes();
float GgmlReduceLanes(const float* lanes);

// y[n] = the reference's soft_max of x[n]: the max; exp by the vectorised
// approximation over whole vectors of the target's width (each vector's
// values summed in its lane order, added in double), libm exp for the rest;
// then every value times the float reciprocal of that double sum. y may
// alias x.
void GgmlSoftMaxRow(const float* x, float* y, size_t n);

// out[r][i] = silu(gate[r][i]) * up[r][i] for num_rows rows of row_len
// floats, with the reference's split between approximate and libm exp (the
// first whole vectors of each row approximated).
// out may alias gate.
void GgmlSiluMul(const float* gate, const float* up, float* out, size_t num_rows, size_t row_len);

// --- Attention in the reference's order (ggml_compat_attention.cc) ---

// The same in the reference engine's flash-attention numerics (as
// AttendHeadF16Accum below): the scaled query rounded to F16, dots with the
// K rows by GgmlDotF16Vec (the target's order), soft-capping, a sink's share
// after the positions, the V accumulator held in F16 (rounded after every
// rescale and every fused multiply-add). The reference scales gemma's query
// before the rounding and gpt-oss's scores after the dot: the same bits for
// their power-of-two scales. F16 K/V, head_dim <= 512.
void AttendHeadExtrasF16Accum(const float* q_head, const KvLayerView& kv, size_t pos, size_t kv_head, size_t head_dim,
                              const AttnExtras& x, float* out_head);

// The numerics of ggml's one-chunk CPU flash attention, which llama.cpp uses
// for query batches under 64 rows: Q rounded to F16, and the V accumulator
// held in F16 (rounded after every rescale and every multiply-add). Less
// precise than AttendHead; it exists so outputs can be compared with that
// engine step for step. F16 K/V only; head_dim <= 512. Scalar.
void AttendHeadF16Accum(const float* q_head, const KvLayerView& kv, size_t pos, size_t kv_head,
                        size_t head_dim, float* out_head);

// The numerics of ggml's tiled CPU flash attention, which llama.cpp uses for
// query batches of 64 rows or more when the head size is a multiple of 16:
// Q kept in F32, KV tiles of 64 at absolute positions, per tile the scores as
// fused multiply-add chains, a running max with libm exp rescaling, tile
// probabilities by the vectorised exp approximation summed in double over
// 16-lane partial sums, and V accumulated in F32 fused chains. F16 K/V only;
// head_dim <= 512. Scalar.
void AttendHeadGgmlTiled(const float* q_head, const KvLayerView& kv, size_t pos, size_t kv_head, size_t head_dim,
                         float* out_head);
// The same with a window, soft-capping, a score scale and a sink (as
// AttendHeadExtrasF16Accum; tiles wholly outside the window are skipped),
// the probabilities summed over the target's vector width.
void AttendHeadGgmlTiledExtras(const float* q_head, const KvLayerView& kv, size_t pos, size_t kv_head,
                               size_t head_dim, const AttnExtras& x, float* out_head);

}  // namespace pc
