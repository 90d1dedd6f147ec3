#include "kernels/attention.h"

#include <xmmintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <limits>

#include "base/check.h"
#include "base/fp16.h"

namespace pc {

namespace {

// One head's online softmax over K/V rows of either type: Score(q, elem) is
// the dot with the K row at element offset elem; Add(score, elem) rescales
// what was accumulated when a new maximum appears, then adds the V row with
// weight exp(score - max); Finish divides by the running sum into out.
struct OnlineHead {
  OnlineHead(const DotKernels& k, const KvLayerView& kv, size_t head_dim, float* out)
      : k(k), kv(kv), head_dim(head_dim), out(out) {
    std::memset(out, 0, head_dim * sizeof(float));
  }
  float Score(const float* q, size_t elem) {
    if (q8) {
      k.q8_0_to_f32(static_cast<const uint8_t*>(kv.k) + KvBytes(kv.dtype, elem), row, head_dim);
      return k.f32(q, row, head_dim);
    }
    return f16 ? k.dot_f32_f16(q, static_cast<const uint16_t*>(kv.k) + elem, head_dim)
               : k.f32(q, static_cast<const float*>(kv.k) + elem, head_dim);
  }
  void Add(float score, size_t elem) {
    if (score > max_score) {
      const float correction = std::exp(max_score - score);
      denom *= correction;
      for (size_t i = 0; i < head_dim; ++i) out[i] *= correction;
      max_score = score;
    }
    const float weight = std::exp(score - max_score);
    denom += weight;
    if (q8) {
      k.q8_0_to_f32(static_cast<const uint8_t*>(kv.v) + KvBytes(kv.dtype, elem), row, head_dim);
      k.axpy_f32(weight, row, out, head_dim);
    } else if (f16) {
      k.axpy_f16(weight, static_cast<const uint16_t*>(kv.v) + elem, out, head_dim);
    } else {
      k.axpy_f32(weight, static_cast<const float*>(kv.v) + elem, out, head_dim);
    }
  }
  // An attention sink: a score with a zero value row (it only takes its
  // share of the softmax's mass).
  void AddSink(float score) {
    if (score > max_score) {
      const float correction = std::exp(max_score - score);
      denom *= correction;
      for (size_t i = 0; i < head_dim; ++i) out[i] *= correction;
      max_score = score;
    }
    denom += std::exp(score - max_score);
  }
  void Finish() const {
    const float inv = 1.0f / denom;
    for (size_t i = 0; i < head_dim; ++i) out[i] *= inv;
  }

  const DotKernels& k;
  const KvLayerView& kv;
  size_t head_dim;
  float* out;
  bool f16 = kv.dtype == KvDtype::kF16, q8 = kv.dtype == KvDtype::kQ8_0;
  float row[1024];  // a Q8_0 row widened (head_dim <= 1024)
  float max_score = -std::numeric_limits<float>::infinity(), denom = 0.0f;
};

// Element offset of position p's row for one KV head (offset = its first dim).
size_t ElemAt(const KvLayerView& kv, size_t p, size_t offset) {
  return (static_cast<size_t>(kv.block_table[p / kv.block_size]) * kv.block_size + p % kv.block_size) * kv.kv_dim +
         offset;
}

}  // namespace

void AttendHead(const DotKernels& k, const float* q_head, const KvLayerView& kv, size_t pos,
                size_t kv_head, size_t head_dim, float* out_head) {
  PC_CHECK(kv.block_table.size() * kv.block_size > pos);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  OnlineHead head(k, kv, head_dim, out_head);
  for (size_t p = 0; p <= pos; ++p) {
    const size_t elem = ElemAt(kv, p, kv_head * head_dim);
    head.Add(head.Score(q_head, elem) * scale, elem);
  }
  head.Finish();
}

void AttendHeadExtras(const DotKernels& k, const float* q_head, const KvLayerView& kv, size_t pos, size_t kv_head,
                      size_t head_dim, const AttnExtras& x, float* out_head) {
  PC_CHECK(kv.block_table.size() * kv.block_size > pos);
  PC_CHECK(head_dim <= 1024);
  const float scale = x.scale != 0 ? x.scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  const float inv_cap = x.softcap != 0 ? 1.0f / x.softcap : 0.0f;
  const size_t lo = x.window != 0 && pos + 1 > x.window ? pos + 1 - x.window : 0;
  // The query scaled first, and rounded to F16 against F16 keys, as the
  // reference engine does: with soft-capped scores (large by design) that
  // rounding moves logprobs by tenths, so it is matched rather than improved on.
  float qs[1024];
  for (size_t i = 0; i < head_dim; ++i) {
    qs[i] = q_head[i] * scale;
    if (kv.dtype == KvDtype::kF16) qs[i] = Fp16ToFp32(Fp32ToFp16(qs[i]));
  }
  OnlineHead head(k, kv, head_dim, out_head);
  for (size_t p = lo; p <= pos; ++p) {
    const size_t elem = ElemAt(kv, p, kv_head * head_dim);
    float score = head.Score(qs, elem);
    if (x.softcap != 0) score = std::tanh(score * inv_cap) * x.softcap;
    head.Add(score, elem);
  }
  if (x.has_sink) head.AddSink(x.sink);
  head.Finish();
}

namespace {

static_assert(kAttnTile == kLaneTile, "the lane kernels take whole attention tiles");

size_t LaneGroups(size_t rows, const AttnHeads& h) { return (rows * h.group() + kLaneTile - 1) / kLaneTile; }
// One lane group: qt [head_dim][16], acct [head_dim][16], m[16], l[16],
// then for 8-bit K qt8 [head_dim / 4][16], qd and qsum [head_dim / 32][16].
size_t LaneGroupFloats(size_t head_dim) { return 2 * kLaneTile * head_dim + 2 * kLaneTile + 5 * head_dim; }
// The queries of attend_cols for 8-bit K (QueryQ8): bytes, scales, sums.
size_t QueryQ8Floats(size_t nq, size_t head_dim) { return nq * head_dim / 4 + 2 * nq * (head_dim / kKvQ8Block) + 1; }

}  // namespace

size_t AttendScratchFloats(size_t rows, const AttnHeads& h) {
  const size_t nq = rows * h.n_head, kv_dim = h.n_kv_head * h.head_dim;
  const size_t tiles = 3 * kAttnTile * kv_dim + kAttnTile;  // K, V, K transposed, scores
  const size_t lanes = h.n_kv_head * LaneGroups(rows, h) * LaneGroupFloats(h.head_dim);
  return tiles + std::max(nq * h.head_dim + QueryQ8Floats(nq, h.head_dim), lanes) + 2 * AttnStateFloats(nq, h.head_dim);
}

namespace {

// K and V rows [p0, p0 + n) of K/V heads [g0, g1) (all of them: whole,
// contiguous rows), widened to F32 per head: kt[kv_head][j][head_dim], vt
// likewise; rows [n, kAttnTile) zero (the lane kernels read whole tiles).
// 8-bit K is left as stored (attend_lanes_q8 reads it so): kt untouched.
void LoadTile(const DotKernels& k, const KvLayerView& kv, size_t head_dim, size_t p0, size_t n, float* kt, float* vt,
              size_t g0, size_t g1) {
  const bool widen_k = kv.dtype != KvDtype::kQ8_0;
  const size_t dim = kv.kv_dim;
  for (size_t j = 0; j < n; ++j) {
    const size_t p = p0 + j;
    const size_t elem = (static_cast<size_t>(kv.block_table[p / kv.block_size]) * kv.block_size + p % kv.block_size) * dim;
    for (size_t g = g0; g < g1; ++g) {
      float* kd = kt + (g * kAttnTile + j) * head_dim;
      float* vd = vt + (g * kAttnTile + j) * head_dim;
      if (kv.dtype == KvDtype::kQ8_0) {  // widened while loading: the read is half F16's
        const size_t at = KvBytes(kv.dtype, elem + g * head_dim);
        k.q8_0_to_f32(static_cast<const uint8_t*>(kv.v) + at, vd, head_dim);
      } else if (kv.dtype == KvDtype::kF16) {
        k.f16_to_f32(static_cast<const uint16_t*>(kv.k) + elem + g * head_dim, kd, head_dim);
        k.f16_to_f32(static_cast<const uint16_t*>(kv.v) + elem + g * head_dim, vd, head_dim);
      } else {
        std::memcpy(kd, static_cast<const float*>(kv.k) + elem + g * head_dim, head_dim * sizeof(float));
        std::memcpy(vd, static_cast<const float*>(kv.v) + elem + g * head_dim, head_dim * sizeof(float));
      }
    }
  }
  for (size_t g = g0; g < g1 && n < kAttnTile; ++g) {
    if (widen_k) std::fill(kt + (g * kAttnTile + n) * head_dim, kt + (g + 1) * kAttnTile * head_dim, 0.0f);
    std::fill(vt + (g * kAttnTile + n) * head_dim, vt + (g + 1) * kAttnTile * head_dim, 0.0f);
  }
}

// Asks for K and V rows [p0, p0 + n) ahead of use: the tile's compute then
// overlaps the next tile's transfer (without it decode attention stalls on
// each tile's first loads and runs at a fraction of the bandwidth).
// Only K/V heads [g0, g1) of each row (a call that takes some heads).
void PrefetchTile(const KvLayerView& kv, size_t p0, size_t n, size_t head_dim, size_t g0, size_t g1) {
  const size_t row_bytes = KvBytes(kv.dtype, kv.kv_dim);
  const size_t lo = KvBytes(kv.dtype, g0 * head_dim) / 64 * 64, hi = KvBytes(kv.dtype, g1 * head_dim);
  for (size_t p = p0; p < p0 + n; ++p) {
    const size_t row = static_cast<size_t>(kv.block_table[p / kv.block_size]) * kv.block_size + p % kv.block_size;
    const char* kr = static_cast<const char*>(kv.k) + row * row_bytes;
    const char* vr = static_cast<const char*>(kv.v) + row * row_bytes;
    for (size_t off = lo; off < hi; off += 64) {
      __builtin_prefetch(kr + off);
      __builtin_prefetch(vr + off);
    }
  }
}

size_t MaxPos(const KvLayerView& kv, const AttnRows& rows, size_t r0, size_t r1) {
  size_t max_pos = 0;
  for (size_t r = r0; r < r1; ++r) {
    PC_CHECK(rows.pos[r] >= 0 && kv.block_table.size() * kv.block_size > static_cast<size_t>(rows.pos[r]));
    max_pos = std::max(max_pos, static_cast<size_t>(rows.pos[r]));
  }
  return max_pos;
}

// The span's tiles [begin, last] in order, K/V heads [g0, g1) of each
// loaded (and the next tile prefetched) before fn(p0, n) uses it.
template <class Fn>
void ForEachTile(const DotKernels& k, const KvLayerView& kv, size_t head_dim, size_t begin, size_t last, size_t g0,
                 size_t g1, float* kt, float* vt, Fn&& fn) {
  for (size_t p0 = begin; p0 <= last; p0 += kAttnTile) {
    const size_t n = std::min(kAttnTile, last + 1 - p0);
    if (p0 + n <= last) PrefetchTile(kv, p0 + n, std::min(kAttnTile, last + 1 - (p0 + n)), head_dim, g0, g1);
    LoadTile(k, kv, head_dim, p0, n, kt, vt, g0, g1);
    fn(p0, n);
  }
}

// Positions of a tile starting at p0 (n long) that a query at pos sees: its
// offsets [first, nv) (empty when first >= nv).
size_t Visible(int32_t pos, size_t p0, size_t n) {
  return static_cast<size_t>(pos) < p0 ? 0 : std::min(n, static_cast<size_t>(pos) - p0 + 1);
}
size_t FirstVisible(const AttnRows& rows, int32_t pos, size_t p0, size_t n) {
  if (rows.window == 0 || static_cast<size_t>(pos) + 1 <= rows.window) return 0;
  const size_t lo = static_cast<size_t>(pos) + 1 - rows.window;
  return lo <= p0 ? 0 : std::min(n, lo - p0);
}
// The first position any of rows [r0, r1) sees.
size_t MinVisible(const AttnRows& rows, size_t r0, size_t r1) {
  size_t lo = SIZE_MAX;
  for (size_t r = r0; r < r1; ++r) {
    const size_t p = static_cast<size_t>(rows.pos[r]);
    lo = std::min(lo, rows.window == 0 || p + 1 <= rows.window ? 0 : p + 1 - rows.window);
  }
  return lo;
}

// A scaled query x (head_dim floats) as QueryQ8 holds it (dot.h): the
// activation quantizer's blocks (bit-exact in every table), their bytes,
// widened scales and byte sums.
void QuantizeQuery(const DotKernels& k, const float* x, size_t head_dim, int8_t* qs, float* d, int32_t* sum) {
  BlockQ8_0 blocks[1024 / kKvQ8Block];
  PC_CHECK(head_dim <= 1024 && head_dim % kKvQ8Block == 0);
  k.quantize_q8_0(x, blocks, head_dim);
  for (size_t b = 0; b < head_dim / kKvQ8Block; ++b) {
    d[b] = Fp16ToFp32(blocks[b].d);
    int32_t total = 0;
    for (size_t e = 0; e < kKvQ8Block; ++e) total += blocks[b].qs[e];
    sum[b] = total;
    std::memcpy(qs + b * kKvQ8Block, blocks[b].qs, kKvQ8Block);
  }
}

// Scaled query rows [r0, r1): qs[(r - r0) * n_head + head][head_dim].
void ScaledQueries(const AttnRows& rows, size_t r0, size_t r1, const AttnHeads& h, float scale, float* qs) {
  for (size_t r = r0; r < r1; ++r) {
    const float* q = rows.q + r * rows.q_stride;
    float* qd = qs + (r - r0) * h.n_head * h.head_dim;
    for (size_t i = 0; i < h.n_head * h.head_dim; ++i) qd[i] = q[i] * scale;
  }
}

struct SpanArgs {
  const DotKernels& k;
  const KvLayerView& kv;
  const AttnRows& rows;
  size_t r0, r1;
  const AttnHeads& h;
  size_t begin, last;
  float scale;
  size_t g0, g1;  // K/V heads of the call (the lane path; the others take all)
};

// Many queries per K/V head (prefill): lane group gi of K/V head g holds its
// queries u = gi * 16 + lane, row r0 + u / group, head g * group + u % group;
// its state lives in `work` (LaneGroupFloats each: qt, acct, m, l).
struct LaneSpan {
  const SpanArgs& a;
  float* work;
  size_t hd = a.h.head_dim, group = a.h.group(), per_kv = (a.r1 - a.r0) * group;
  size_t groups = LaneGroups(a.r1 - a.r0, a.h), floats = LaneGroupFloats(hd);

  float* Qt(size_t g, size_t gi) const { return work + (g * groups + gi) * floats; }
  float* Acct(size_t g, size_t gi) const { return Qt(g, gi) + kLaneTile * hd; }
  float* M(size_t g, size_t gi) const { return Acct(g, gi) + kLaneTile * hd; }
  // 8-bit K: the group's queries quantized (LaneGroup's qt8, qd, qsum).
  int32_t* Qt8(size_t g, size_t gi) const { return reinterpret_cast<int32_t*>(M(g, gi) + 2 * kLaneTile); }
  float* Qd(size_t g, size_t gi) const { return M(g, gi) + 2 * kLaneTile + 4 * hd; }
  int32_t* Qsum(size_t g, size_t gi) const { return reinterpret_cast<int32_t*>(Qd(g, gi) + hd / 2); }
  LaneGroup Group(size_t g, size_t gi, const int32_t* first, const int32_t* nv) const {
    return {Qt(g, gi), first, nv, M(g, gi), M(g, gi) + kLaneTile, Acct(g, gi), Qt8(g, gi), Qd(g, gi), Qsum(g, gi)};
  }
  // The group's queries (lanes past the last query are left out): their
  // rows of q and the count.
  size_t Queries(size_t g, size_t gi, const float** q, size_t* qi) const {
    size_t lanes = 0;
    for (size_t u = gi * kLaneTile; lanes < kLaneTile && u < per_kv; ++lanes, ++u) {
      q[lanes] = a.rows.q + (a.r0 + u / group) * a.rows.q_stride + (g * group + u % group) * hd;
      qi[lanes] = (u / group) * a.h.n_head + g * group + u % group;
    }
    return lanes;
  }
  // Scaled queries transposed into qt; an empty softmax state. A full group
  // of a head size that is a multiple of 4 is moved in 4 x 4 blocks (SSE,
  // the x86-64 baseline; the same products): element by element, this and
  // Finish were a tenth of a long prefill's attention at the AVX2 level.
  void Start(size_t g, size_t gi) const {
    float* qt = Qt(g, gi);
    std::fill(Acct(g, gi), Acct(g, gi) + kLaneTile * hd, 0.0f);
    std::fill(M(g, gi), M(g, gi) + kLaneTile, -std::numeric_limits<float>::infinity());
    std::fill(M(g, gi) + kLaneTile, M(g, gi) + 2 * kLaneTile, 0.0f);
    const float* q[kLaneTile];
    size_t qi[kLaneTile];
    const size_t lanes = Queries(g, gi, q, qi);
    if (a.kv.dtype == KvDtype::kQ8_0) {  // the lanes read only the quantized queries
      StartQ8(g, gi, q, lanes);
      return;
    }
    if (lanes == kLaneTile && hd % 4 == 0) {
      const __m128 scale = _mm_set1_ps(a.scale);
      for (size_t i0 = 0; i0 < kLaneTile; i0 += 4) {
        for (size_t d0 = 0; d0 < hd; d0 += 4) {
          __m128 r0 = _mm_mul_ps(_mm_loadu_ps(q[i0] + d0), scale), r1 = _mm_mul_ps(_mm_loadu_ps(q[i0 + 1] + d0), scale);
          __m128 r2 = _mm_mul_ps(_mm_loadu_ps(q[i0 + 2] + d0), scale), r3 = _mm_mul_ps(_mm_loadu_ps(q[i0 + 3] + d0), scale);
          _MM_TRANSPOSE4_PS(r0, r1, r2, r3);  // r_e: element d0 + e of lanes i0..i0+3
          _mm_storeu_ps(qt + d0 * kLaneTile + i0, r0);
          _mm_storeu_ps(qt + (d0 + 1) * kLaneTile + i0, r1);
          _mm_storeu_ps(qt + (d0 + 2) * kLaneTile + i0, r2);
          _mm_storeu_ps(qt + (d0 + 3) * kLaneTile + i0, r3);
        }
      }
      return;
    }
    std::fill(qt, qt + kLaneTile * hd, 0.0f);  // lanes past the last query stay 0
    for (size_t d = 0; d < hd; ++d) {  // written in order: the transpose's cheap side
      for (size_t i = 0; i < lanes; ++i) qt[d * kLaneTile + i] = q[i][d] * a.scale;
    }
  }
  // 8-bit K: each lane's scaled query quantized (QuantizeQuery), its bytes
  // four to a lane; lanes past the last query all zero.
  void StartQ8(size_t g, size_t gi, const float* const* q, size_t lanes) const {
    const size_t nb = hd / kKvQ8Block;
    int32_t* qt8 = Qt8(g, gi);
    float* qd = Qd(g, gi);
    int32_t* qsum = Qsum(g, gi);
    std::fill(qt8, qt8 + kLaneTile * hd / 4, 0);
    std::fill(qd, qd + kLaneTile * nb, 0.0f);
    std::fill(qsum, qsum + kLaneTile * nb, 0);
    float x[1024], d[1024 / kKvQ8Block];
    alignas(4) int8_t bytes[1024];
    int32_t sum[1024 / kKvQ8Block];
    for (size_t i = 0; i < lanes; ++i) {
      for (size_t e = 0; e < hd; ++e) x[e] = q[i][e] * a.scale;
      QuantizeQuery(a.k, x, hd, bytes, d, sum);
      for (size_t w = 0; w < hd / 4; ++w) std::memcpy(&qt8[w * kLaneTile + i], bytes + 4 * w, 4);
      for (size_t b = 0; b < nb; ++b) qd[b * kLaneTile + i] = d[b], qsum[b * kLaneTile + i] = sum[b];
    }
  }
  // Positions of the tile (p0, n long) each lane sees, [first, nv); false
  // if none does.
  bool Visible(size_t gi, size_t p0, size_t n, int32_t* first, int32_t* nv) const {
    std::fill(nv, nv + kLaneTile, 0);
    std::fill(first, first + kLaneTile, 0);
    // Most tiles lie wholly before (and, with a window, inside the window of)
    // every row of the group: then each lane sees [0, n), with no per-lane
    // work (which, at depth, was a tenth of the lane kernels' time).
    const size_t lanes = std::min(kLaneTile, per_kv - gi * kLaneTile);
    const size_t row_lo = a.r0 + gi * kLaneTile / group, row_hi = a.r0 + (gi * kLaneTile + lanes - 1) / group;
    size_t lo = SIZE_MAX, hi = 0;
    for (size_t r = row_lo; r <= row_hi; ++r) {
      lo = std::min(lo, static_cast<size_t>(a.rows.pos[r]));
      hi = std::max(hi, static_cast<size_t>(a.rows.pos[r]));
    }
    if (p0 > hi) return false;
    if (p0 + n - 1 <= lo && FirstVisible(a.rows, static_cast<int32_t>(hi), p0, n) == 0) {
      std::fill(nv, nv + lanes, static_cast<int32_t>(n));
      return true;
    }
    bool any = false;
    size_t row = row_lo, rem = gi * kLaneTile % group;  // no divisions per lane
    for (size_t i = 0, u = gi * kLaneTile; i < kLaneTile && u < per_kv; ++i, ++u) {
      nv[i] = static_cast<int32_t>(pc::Visible(a.rows.pos[row], p0, n));
      first[i] = static_cast<int32_t>(FirstVisible(a.rows, a.rows.pos[row], p0, n));
      any = any || nv[i] > first[i];
      if (++rem == group) rem = 0, ++row;
    }
    return any;
  }
  // The lanes' state into out, per query vector.
  void Finish(size_t g, size_t gi, AttnState out) const {
    const float* q[kLaneTile];
    size_t qi[kLaneTile];
    const size_t lanes = Queries(g, gi, q, qi);
    const float* acct = Acct(g, gi);
    for (size_t i = 0; i < lanes; ++i) {
      out.m[qi[i]] = M(g, gi)[i];
      out.l[qi[i]] = M(g, gi)[kLaneTile + i];
    }
    if (lanes == kLaneTile && hd % 4 == 0) {  // 4 x 4 blocks, as Start
      for (size_t i0 = 0; i0 < kLaneTile; i0 += 4) {
        for (size_t d0 = 0; d0 < hd; d0 += 4) {
          __m128 r0 = _mm_loadu_ps(acct + d0 * kLaneTile + i0), r1 = _mm_loadu_ps(acct + (d0 + 1) * kLaneTile + i0);
          __m128 r2 = _mm_loadu_ps(acct + (d0 + 2) * kLaneTile + i0), r3 = _mm_loadu_ps(acct + (d0 + 3) * kLaneTile + i0);
          _MM_TRANSPOSE4_PS(r0, r1, r2, r3);  // r_k: elements d0..d0+3 of lane i0 + k
          _mm_storeu_ps(out.acc + qi[i0] * hd + d0, r0);
          _mm_storeu_ps(out.acc + qi[i0 + 1] * hd + d0, r1);
          _mm_storeu_ps(out.acc + qi[i0 + 2] * hd + d0, r2);
          _mm_storeu_ps(out.acc + qi[i0 + 3] * hd + d0, r3);
        }
      }
      return;
    }
    for (size_t d = 0; d < hd; ++d) {
      for (size_t i = 0; i < lanes; ++i) out.acc[qi[i] * hd + d] = acct[d * kLaneTile + i];
    }
  }
};

void TileRows(const KvLayerView& kv, size_t p0, size_t n, const uint8_t* zero, KvTile* t);

// zero: a row's bytes (8-bit K's rows past a tile's end).
void SpanLanes(const SpanArgs& a, float* kt, float* vt, float* work, uint8_t* zero, AttnState out) {
  const LaneSpan ls{a, work};
  for (size_t g = a.g0; g < a.g1; ++g) {
    for (size_t gi = 0; gi < ls.groups; ++gi) ls.Start(g, gi);
  }
  const size_t hd = ls.hd;
  const bool q8k = a.kv.dtype == KvDtype::kQ8_0;
  if (q8k) std::memset(zero, 0, KvBytes(a.kv.dtype, a.kv.kv_dim));
  KvTile rows;
  ForEachTile(a.k, a.kv, hd, a.begin, a.last, a.g0, a.g1, kt, vt, [&](size_t p0, size_t n) {
    if (q8k) TileRows(a.kv, p0, n, zero, &rows);
    for (size_t g = a.g0; g < a.g1; ++g) {
      // The head's groups with a position in this tile, up to six per call
      // (the kernels share each K/V load among two or three of them).
      constexpr size_t kBatch = 6;
      LaneGroup batch[kBatch];
      int32_t nvs[kBatch][kLaneTile], firsts[kBatch][kLaneTile];
      const uint8_t* krows[kLaneTile];
      if (q8k) {
        for (size_t j = 0; j < kLaneTile; ++j) krows[j] = rows.k[j] + KvBytes(a.kv.dtype, g * hd);
      }
      size_t nb = 0;
      auto flush = [&] {
        if (nb > 0 && q8k) a.k.attend_lanes_q8(batch, nb, krows, vt + g * kAttnTile * hd, hd);
        if (nb > 0 && !q8k) a.k.attend_lanes(batch, nb, kt + g * kAttnTile * hd, vt + g * kAttnTile * hd, hd);
        nb = 0;
      };
      for (size_t gi = 0; gi < ls.groups; ++gi) {
        if (!ls.Visible(gi, p0, n, firsts[nb], nvs[nb])) continue;
        batch[nb] = ls.Group(g, gi, firsts[nb], nvs[nb]);
        if (++nb == kBatch) flush();
      }
      flush();
    }
  });
  for (size_t g = a.g0; g < a.g1; ++g) {
    for (size_t gi = 0; gi < ls.groups; ++gi) ls.Finish(g, gi, out);
  }
}

// The rows of the tile at p0 (n long) as stored, for attend_cols to widen
// as it reads them; positions past n read the zero row.
void TileRows(const KvLayerView& kv, size_t p0, size_t n, const uint8_t* zero, KvTile* t) {
  const size_t row_bytes = KvBytes(kv.dtype, kv.kv_dim);
  for (size_t j = 0; j < kAttnTile; ++j) {
    if (j >= n) {
      t->k[j] = t->v[j] = zero;
      continue;
    }
    const size_t p = p0 + j;
    const size_t row = static_cast<size_t>(kv.block_table[p / kv.block_size]) * kv.block_size + p % kv.block_size;
    t->k[j] = static_cast<const uint8_t*>(kv.k) + row * row_bytes;
    t->v[j] = static_cast<const uint8_t*>(kv.v) + row * row_bytes;
  }
}

// Few queries per K/V head (decode): a row's queries at a time, K/V read
// as stored (no F32 copy of the tile: at depth, decode attention is bound
// by its arithmetic, and the copy was a third of it). scratch: 2 * 16 *
// kv_dim floats; zero: a row's bytes.
void SpanCols(const SpanArgs& a, float* scratch, uint8_t* zero, float* qs, AttnState out) {
  const size_t hd = a.h.head_dim, nq = (a.r1 - a.r0) * a.h.n_head, nb = hd / kKvQ8Block;
  ScaledQueries(a.rows, a.r0, a.r1, a.h, a.scale, qs);
  // 8-bit K: the queries quantized, after the scaled ones in the scratch.
  QueryQ8 q8;
  if (a.kv.dtype == KvDtype::kQ8_0) {
    int8_t* bytes = reinterpret_cast<int8_t*>(qs + nq * hd);
    float* d = qs + nq * hd + nq * hd / 4;
    int32_t* sum = reinterpret_cast<int32_t*>(d + nq * nb);
    for (size_t i = 0; i < nq; ++i) QuantizeQuery(a.k, qs + i * hd, hd, bytes + i * hd, d + i * nb, sum + i * nb);
    q8 = {bytes, d, sum};
  }
  std::memset(zero, 0, KvBytes(a.kv.dtype, a.kv.kv_dim));
  KvTile tile;
  tile.dtype = a.kv.dtype;
  tile.head_bytes = KvBytes(a.kv.dtype, hd);
  for (size_t p0 = a.begin; p0 <= a.last; p0 += kAttnTile) {
    const size_t n = std::min(kAttnTile, a.last + 1 - p0);
    if (p0 + n <= a.last) PrefetchTile(a.kv, p0 + n, std::min(kAttnTile, a.last + 1 - (p0 + n)), hd, 0, a.h.n_kv_head);
    TileRows(a.kv, p0, n, zero, &tile);
    for (size_t r = a.r0; r < a.r1; ++r) {
      const size_t nv = Visible(a.rows.pos[r], p0, n), qi = (r - a.r0) * a.h.n_head;
      const size_t first = FirstVisible(a.rows, a.rows.pos[r], p0, n);
      if (nv <= first) continue;
      const QueryQ8 row_q8{q8.qs == nullptr ? nullptr : q8.qs + qi * hd, q8.d == nullptr ? nullptr : q8.d + qi * nb,
                           q8.sum == nullptr ? nullptr : q8.sum + qi * nb};
      a.k.attend_cols(qs + qi * hd, row_q8, a.h.n_head, a.h.group(), tile, hd, first, nv, scratch, out.m + qi,
                      out.l + qi, out.acc + qi * hd);
    }
  }
}

// Tables without lane kernels: one query at a time, attend_tile.
void SpanTiles(const SpanArgs& a, float* kt, float* vt, float* s, float* qs, AttnState out) {
  PC_CHECK(a.rows.window == 0 && "attend_tile has no lower bound");
  PC_CHECK(a.kv.dtype != KvDtype::kQ8_0 && "8-bit K needs the lane or column kernels");
  const size_t hd = a.h.head_dim;
  ScaledQueries(a.rows, a.r0, a.r1, a.h, a.scale, qs);
  ForEachTile(a.k, a.kv, hd, a.begin, a.last, 0, a.h.n_kv_head, kt, vt, [&](size_t p0, size_t n) {
    for (size_t r = a.r0; r < a.r1; ++r) {
      const size_t nv = Visible(a.rows.pos[r], p0, n);
      if (nv == 0) continue;
      for (size_t head = 0; head < a.h.n_head; ++head) {
        const size_t qi = (r - a.r0) * a.h.n_head + head, tile = head / a.h.group() * kAttnTile * hd;
        a.k.attend_tile(qs + qi * hd, kt + tile, vt + tile, hd, nv, s, &out.m[qi], &out.l[qi], out.acc + qi * hd);
      }
    }
  });
}

}  // namespace

size_t AttnSpanCount(const AttnRows& rows, size_t r0, size_t r1) {
  int32_t max_pos = 0;
  for (size_t r = r0; r < r1; ++r) max_pos = std::max(max_pos, rows.pos[r]);
  return static_cast<size_t>(max_pos) / kAttnSpan + 1;
}

size_t AttnSpanPositions(const AttnRows& rows, size_t r0, size_t r1, size_t span) {
  const size_t begin = std::max(span * kAttnSpan, MinVisible(rows, r0, r1) / kAttnTile * kAttnTile);
  size_t end = 0;
  for (size_t r = r0; r < r1; ++r) end = std::max(end, static_cast<size_t>(rows.pos[r]) + 1);
  end = std::min(end, (span + 1) * kAttnSpan);
  return end > begin ? end - begin : 0;
}

void AttendSpan(const DotKernels& k, const KvLayerView& kv, const AttnRows& rows, size_t r0, size_t r1,
                const AttnHeads& h, size_t span, float* scratch, AttnState out, KvHeadRange only) {
  const size_t hd = h.head_dim, nq = (r1 - r0) * h.n_head, kv_dim = kv.kv_dim;
  PC_CHECK(kv_dim == h.n_kv_head * hd);
  float* kt = scratch;
  float* vt = kt + kAttnTile * kv_dim;
  float* ktt = vt + kAttnTile * kv_dim;  // attend_cols' zero row
  float* s = ktt + kAttnTile * kv_dim;   // scores (attend_tile)
  float* work = s + kAttnTile;           // scaled queries, or lane groups
  // Tiles wholly before every row's window are skipped (they sit at
  // absolute positions, so a row's bits do not change).
  const size_t begin = std::max(span * kAttnSpan, MinVisible(rows, r0, r1) / kAttnTile * kAttnTile);
  PC_CHECK(only.begin < only.End(h) && only.End(h) <= h.n_kv_head);
  const size_t last = std::min(MaxPos(kv, rows, r0, r1), span * kAttnSpan + kAttnSpan - 1);
  const SpanArgs a{k, kv, rows, r0, r1, h, begin, last, h.Scale(), only.begin, only.End(h)};
  const bool empty = a.last < begin || begin >= (span + 1) * kAttnSpan;
  const bool lanes = (kv.dtype == KvDtype::kQ8_0 ? k.attend_lanes_q8 != nullptr : k.attend_lanes != nullptr) &&
                     (r1 - r0) * h.group() >= kLanesMinQueries;
  if (empty || !lanes) {  // (the lane groups' Finish writes every query's state)
    std::fill(out.acc, out.acc + nq * hd, 0.0f);
    std::fill(out.m, out.m + nq, -std::numeric_limits<float>::infinity());
    std::fill(out.l, out.l + nq, 0.0f);
  }
  if (empty) return;
  if (lanes) {
    SpanLanes(a, kt, vt, work, reinterpret_cast<uint8_t*>(ktt), out);
  } else if (k.attend_cols != nullptr) {
    SpanCols(a, kt, reinterpret_cast<uint8_t*>(ktt), work, out);  // kt and vt: its scratch
  } else {
    SpanTiles(a, kt, vt, s, work, out);
  }
}

namespace {

// Four floats as one value (GCC's vector extension: SSE2 on every x86-64;
// -ffp-contract=off keeps a * b + c two roundings, as in scalar code).
typedef float F4 __attribute__((vector_size(16)));
inline F4 LoadF4(const float* p) {
  F4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void StoreF4(float* p, F4 v) { std::memcpy(p, &v, sizeof v); }

void MergeQuery(AttnState into, AttnState part, size_t qi, size_t head_dim) {
  if (part.l[qi] == 0.0f) return;  // the span held none of this row's positions
  float* __restrict a = into.acc + qi * head_dim;
  const float* __restrict b = part.acc + qi * head_dim;
  if (into.l[qi] == 0.0f) {  // nothing seen yet (a window starting past span 0)
    std::copy(b, b + head_dim, a);
    into.l[qi] = part.l[qi];
    into.m[qi] = part.m[qi];
    return;
  }
  const float m = std::max(into.m[qi], part.m[qi]);
  const float ca = ExpPoly(into.m[qi] - m), cb = ExpPoly(part.m[qi] - m);
  // Four at a time (F4), the same two roundings per element as the scalar
  // tail: a split-KV decode or a hit past the first span merges every span
  // of every layer (15 rows' three spans took ~20 us a layer in the scalar
  // loop).
  size_t d = 0;
  for (; d + 4 <= head_dim; d += 4) StoreF4(a + d, LoadF4(a + d) * ca + LoadF4(b + d) * cb);
  for (; d < head_dim; ++d) a[d] = a[d] * ca + b[d] * cb;
  into.l[qi] = into.l[qi] * ca + part.l[qi] * cb;
  into.m[qi] = m;
}

}  // namespace

void MergeAttnState(AttnState into, AttnState part, size_t nq, size_t head_dim) {
  for (size_t qi = 0; qi < nq; ++qi) MergeQuery(into, part, qi, head_dim);
}

void MergeAttnStateHeads(AttnState into, AttnState part, size_t rows, const AttnHeads& h, KvHeadRange only) {
  const size_t first = only.begin * h.group(), last = only.End(h) * h.group();
  for (size_t r = 0; r < rows; ++r) {
    for (size_t head = first; head < last; ++head) MergeQuery(into, part, r * h.n_head + head, h.head_dim);
  }
}

void FinishAttnState(AttnState st, const AttnRows& rows, size_t r0, size_t r1, const AttnHeads& h, KvHeadRange only) {
  for (size_t r = r0; r < r1; ++r) {
    for (size_t head = only.begin * h.group(); head < only.End(h) * h.group(); ++head) {
      const size_t qi = (r - r0) * h.n_head + head;
      float* __restrict out = rows.out + r * rows.out_stride + head * h.head_dim;
      float l = st.l[qi], c = 1.0f;
      if (rows.sinks != nullptr) {  // the sink's share of the softmax, no value
        const float sink = rows.sinks[head], m = st.m[qi];
        if (sink > m) {
          c = ExpPoly(m - sink);
          l = l * c + 1.0f;
        } else {
          l += ExpPoly(sink - m);
        }
      }
      const float inv = c / l;
      const float* __restrict acc = st.acc + qi * h.head_dim;
      size_t d = 0;
      for (; d + 4 <= h.head_dim; d += 4) StoreF4(out + d, LoadF4(acc + d) * inv);  // (as in MergeQuery)
      for (; d < h.head_dim; ++d) out[d] = acc[d] * inv;
    }
  }
}

void AttendRows(const DotKernels& k, const KvLayerView& kv, const AttnRows& rows, size_t r0, size_t r1,
                const AttnHeads& h, float* scratch, KvHeadRange only) {
  const size_t nq = (r1 - r0) * h.n_head, state_floats = AttnStateFloats(nq, h.head_dim);
  float* states = scratch + AttendScratchFloats(r1 - r0, h) - 2 * state_floats;
  const AttnState total = AttnStateAt(states, nq, h.head_dim);
  const AttnState part = AttnStateAt(states + state_floats, nq, h.head_dim);
  AttendSpan(k, kv, rows, r0, r1, h, 0, scratch, total, only);
  const size_t spans = AttnSpanCount(rows, r0, r1);
  for (size_t sp = 1; sp < spans; ++sp) {
    AttendSpan(k, kv, rows, r0, r1, h, sp, scratch, part, only);
    MergeAttnStateHeads(total, part, r1 - r0, h, only);
  }
  FinishAttnState(total, rows, r0, r1, h, only);
}

void AttendOne(const DotKernels& k, const float* q, const KvLayerView& kv, size_t pos,
               size_t n_head, size_t n_kv_head, size_t head_dim, float* out) {
  const size_t group = n_head / n_kv_head;
  for (size_t h = 0; h < n_head; ++h) {
    AttendHead(k, q + h * head_dim, kv, pos, h / group, head_dim, out + h * head_dim);
  }
}

}  // namespace pc
