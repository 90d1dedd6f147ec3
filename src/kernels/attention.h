// Attention over a paged K/V layout. K and V rows of one layer live in
// fixed-size blocks; a sequence's block table maps its position p to block
// table[p / block_size], row p % block_size. Kernels never allocate.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/dot.h"

namespace pc {

enum class KvDtype { kF32, kF16 };

// One layer's K/V as seen by one sequence.
struct KvLayerView {
  const void* k = nullptr;  // layer base: [num_blocks][block_size][kv_dim]
  const void* v = nullptr;
  KvDtype dtype = KvDtype::kF16;
  size_t block_size = 16;  // tokens per block
  size_t kv_dim = 0;       // n_kv_heads * head_dim
  std::span<const int32_t> block_table;
};

// Causal attention of one query token at position `pos` over positions
// [0, pos] of its sequence (online softmax, K/V streamed once).
// q: [n_head][head_dim]; out: [n_head][head_dim]. Heads share KV heads in
// groups of n_head / n_kv_head (GQA/MQA).
void AttendOne(const DotKernels& k, const float* q, const KvLayerView& kv, size_t pos,
               size_t n_head, size_t n_kv_head, size_t head_dim, float* out);

// Same for a single head h (so callers can parallelise over heads).
void AttendHead(const DotKernels& k, const float* q_head, const KvLayerView& kv, size_t pos,
                size_t kv_head, size_t head_dim, float* out_head);

// Query rows of one sequence for tiled attention: row r's head h starts at
// q + r * q_stride + h * head_dim; its position is pos[r].
struct AttnRows {
  const float* q = nullptr;
  size_t q_stride = 0;
  const int32_t* pos = nullptr;
  float* out = nullptr;  // same layout as q
  size_t out_stride = 0;
};

constexpr size_t kAttnTile = 32;  // K/V positions per tile
// Scratch floats AttendKvHead needs for `rows` rows.
size_t AttendScratchFloats(size_t rows, size_t group, size_t head_dim);

// Causal attention for rows [r0, r1) and the `group` query heads sharing KV
// head kv_head (GQA): K/V are streamed once per tile of kAttnTile positions
// for all those rows and heads (flash-style online softmax, no score
// matrix). Tiles sit at absolute positions, so a row's result does not
// depend on which other rows share the call (batch-invariant).
void AttendKvHead(const DotKernels& k, const KvLayerView& kv, const AttnRows& rows, size_t r0, size_t r1,
                  size_t kv_head, size_t group, size_t head_dim, float* scratch);

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

}  // namespace pc
