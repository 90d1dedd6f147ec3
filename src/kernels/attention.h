// Attention over a paged K/V layout. K and V rows of one layer live in
// fixed-size blocks; a sequence's block table maps its position p to block
// table[p / block_size], row p % block_size. Kernels never allocate.
#pragma once
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>

#include "kernels/dot.h"
#include "kernels/kv_layout.h"

namespace pc {

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
  // A sliding window: row r sees positions (pos[r] - window, pos[r]]; 0: all.
  size_t window = 0;
  // Attention sinks (gpt-oss): one more score per head, in the units of the
  // scaled scores, whose value row is zero; null: none.
  const float* sinks = nullptr;  // [n_head]
};

constexpr size_t kAttnTile = 16;   // K/V positions per tile
constexpr size_t kAttnSpan = 512;  // positions per span, a multiple of kAttnTile

// Head shapes: n_head query heads share n_kv_head K/V heads in groups of
// n_head / n_kv_head (GQA/MQA); every head has head_dim elements.
struct AttnHeads {
  size_t n_head = 0, n_kv_head = 0, head_dim = 0;
  float scale = 0;  // of the scores; 0: 1 / sqrt(head_dim)
  size_t group() const { return n_head / n_kv_head; }
  float Scale() const { return scale != 0 ? scale : 1.0f / __builtin_sqrtf(static_cast<float>(head_dim)); }
};

// Softmax state of nq query vectors over some positions: running max m[nq],
// denominator l[nq] (0 while no position was seen) and the unnormalised
// output acc[nq][head_dim], laid out in that order in one float buffer.
struct AttnState {
  float* m;
  float* l;
  float* acc;
};
inline size_t AttnStateFloats(size_t nq, size_t head_dim) { return nq * (head_dim + 2); }
inline AttnState AttnStateAt(float* base, size_t nq, size_t head_dim) {
  return {base + nq * head_dim, base + nq * head_dim + nq, base};
}
// The part of st from query vector `first` on (a row's queries are
// consecutive: row r's start at r * n_head).
inline AttnState AttnStateFrom(AttnState st, size_t first, size_t head_dim) {
  return {st.m + first, st.l + first, st.acc + first * head_dim};
}

// K/V heads [begin, end) of a call and the query heads of their groups
// (end 0: every head). A call over some heads writes only their queries'
// states and outputs; a head's results never depend on which other heads
// share the call (so heads can be split across threads like rows).
struct KvHeadRange {
  size_t begin = 0, end = 0;
  size_t End(const AttnHeads& h) const { return end == 0 ? h.n_kv_head : end; }
};

// Queries per K/V head from which a call runs them in lanes (attend_lanes,
// which take a range of heads); fewer run one row at a time over every
// head (attend_cols). Same bits either way.
constexpr size_t kLanesMinQueries = 8;

// Rows of one sequence whose queries fill whole lane groups of every K/V
// head (16 lanes; a head's group of query heads per row).
inline size_t AttnLaneRows(const AttnHeads& h) {
  return kLaneTile / std::gcd(kLaneTile, h.group());
}

// Scratch floats AttendRows (and AttendSpan) need for `rows` rows.
size_t AttendScratchFloats(size_t rows, const AttnHeads& h);

// Causal attention for rows [r0, r1) of one sequence, every head, over span
// `span` only: positions [span * kAttnSpan, (span + 1) * kAttnSpan), each row
// up to its own position (and from the start of its window). Each tile of kAttnTile positions is read once,
// whole K/V rows (every KV head: contiguous memory), for all rows and heads
// (flash-style online softmax, no score matrix). out holds
// nq = (r1 - r0) * n_head vectors, query vector (r - r0) * n_head + head; it
// is overwritten. Tiles and spans sit at absolute positions, so a row's
// result never depends on which other rows share the call, nor on whether
// spans run on one thread or several (split-KV decode).
void AttendSpan(const DotKernels& k, const KvLayerView& kv, const AttnRows& rows, size_t r0, size_t r1,
                const AttnHeads& h, size_t span, float* scratch, AttnState out, KvHeadRange only = {});
// into := into merged with part (the softmax merge of two position sets).
// Spans are merged in increasing order, span 0 being the starting state (a
// state that has seen nothing yet takes part as it is).
void MergeAttnState(AttnState into, AttnState part, size_t nq, size_t head_dim);
// The same for the queries of rows r0 .. r0 + rows - 1 in `only`'s heads.
void MergeAttnStateHeads(AttnState into, AttnState part, size_t rows, const AttnHeads& h, KvHeadRange only);
// Writes each row's outputs: acc / l, a sink's share taken first.
void FinishAttnState(AttnState st, const AttnRows& rows, size_t r0, size_t r1, const AttnHeads& h,
                     KvHeadRange only = {});
// Spans of rows [r0, r1): up to their largest position.
size_t AttnSpanCount(const AttnRows& rows, size_t r0, size_t r1);
// Positions AttendSpan reads for rows [r0, r1) in span `span`: from the
// span's start (or the first tile of the earliest row's window) to their
// largest position, within the span; 0 when it reads none. What a split-KV
// plan prices a span by.
size_t AttnSpanPositions(const AttnRows& rows, size_t r0, size_t r1, size_t span);

// Every span of the rows in order on this thread (AttendSpan, merge), then
// the outputs: what the split-KV path computes, bit for bit.
void AttendRows(const DotKernels& k, const KvLayerView& kv, const AttnRows& rows, size_t r0, size_t r1,
                const AttnHeads& h, float* scratch, KvHeadRange only = {});

// What some families add to attention: a sliding window (the query at pos
// sees positions (pos - window, pos]; 0: every position up to pos), a score
// scale, soft-capping of the scaled scores (s -> softcap * tanh(s /
// softcap); 0: none), and a sink (gpt-oss: one more scaled score per head
// whose value row is zero, so the weights over the positions may sum to
// less than one).
struct AttnExtras {
  size_t window = 0;
  float scale = 0;  // 0: 1 / sqrt(head_dim)
  float softcap = 0;
  bool has_sink = false;
  float sink = 0;
};
// AttendHead with those extras: one head, online softmax, F16 or F32 K/V.
void AttendHeadExtras(const DotKernels& k, const float* q_head, const KvLayerView& kv, size_t pos, size_t kv_head,
                      size_t head_dim, const AttnExtras& x, float* out_head);

// The reference engine's attention arithmetic (AttendHeadF16Accum,
// AttendHeadGgmlTiled, AttendHeadExtrasF16Accum) is in ggml_compat.h.

}  // namespace pc
