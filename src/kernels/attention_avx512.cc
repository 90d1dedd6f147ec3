// AVX-512 attention tiles (attend_lanes, attend_cols of dot.h) and the
// avx512 DotKernels table: the AVX2 table with these two and the F16/BF16
// dots and tiles of dot_avx512.cc. This file alone is
// compiled with AVX-512 flags; it runs only after ActiveIsa() confirmed them.
// No inline helpers shared with other files are instantiated here (the
// linker could pick this copy for callers on other CPUs), except those of
// tree_sum_avx512.h and exp_avx512.h, which only AVX-512 files include.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "kernels/dot.h"
#include "kernels/exp_avx512.h"
#include "kernels/kv_rows_simd.h"
#include "kernels/tree_sum_avx512.h"

namespace pc {
namespace {

constexpr int kT = static_cast<int>(kLaneTile);

using avx512::Exp16;
using avx512::TreeSum;

// G lane groups (1 to 3) against one tile. The groups share every K and V
// load: the scores take J positions per pass over d (G x J = 16 or 12
// accumulators), the accumulation 8 dimensions of each group at a time
// (G x 8 accumulators). Per query the operations are those of the scalar
// twin, in its order, whatever G.
template <int G>
void LaneScoresF32(const LaneGroup* g, const float* k, size_t head_dim, float (*sbuf)[kT][kT]) {
  static_assert(G >= 1 && G <= 3);
  constexpr int J = G == 3 ? 8 : kT / G;
  static_assert(kT % J == 0);
  for (int j0 = 0; j0 < kT; j0 += J) {
    __m512 s[G][J];
    for (int x = 0; x < G; ++x) {
      for (int j = 0; j < J; ++j) s[x][j] = _mm512_setzero_ps();
    }
    for (size_t d = 0; d < head_dim; ++d) {
      __m512 q[G];
      for (int x = 0; x < G; ++x) q[x] = _mm512_loadu_ps(g[x].qt + d * kT);
      for (int j = 0; j < J; ++j) {
        const __m512 kb = _mm512_set1_ps(k[(j0 + j) * head_dim + d]);
        for (int x = 0; x < G; ++x) s[x][j] = _mm512_fmadd_ps(q[x], kb, s[x][j]);
      }
    }
    for (int x = 0; x < G; ++x) {
      for (int j = 0; j < J; ++j) _mm512_store_ps(sbuf[x][j0 + j], s[x][j]);
    }
  }
}

// 8-bit K (QueryQ8, dot.h): the same scores from the groups' bytes, four
// elements a lane: each K row's dword, biased to unsigned (+128, undone by
// starting from -128 times the query's byte sum), broadcast and multiplied
// into the 16 lanes by vpdpbusd; J positions x G groups per pass.
template <int G>
void LaneScoresQ8(const LaneGroup* g, const uint8_t* const* krows, size_t head_dim, float (*sbuf)[kT][kT]) {
  constexpr int J = 4;
  const size_t nb = head_dim / kKvQ8Block;
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int j0 = 0; j0 < kT; j0 += J) {
    __m512 s[G][J];
    for (int x = 0; x < G; ++x) {
      for (int j = 0; j < J; ++j) s[x][j] = _mm512_setzero_ps();
    }
    for (size_t b = 0; b < nb; ++b) {
      __m512i acc[G][J];
      for (int x = 0; x < G; ++x) {
        const __m512i start = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(_mm512_loadu_si512(g[x].qsum + b * kT), 7));
        for (int j = 0; j < J; ++j) acc[x][j] = start;
      }
      for (size_t w = 0; w < kKvQ8Block / 4; ++w) {
        __m512i q[G];
        for (int x = 0; x < G; ++x) q[x] = _mm512_loadu_si512(g[x].qt8 + (b * 8 + w) * kT);
        for (int j = 0; j < J; ++j) {
          int32_t kw;
          std::memcpy(&kw, krows[j0 + j] + b * kKvQ8BlockBytes + 2 + 4 * w, sizeof kw);
          const __m512i kb = _mm512_xor_si512(_mm512_set1_epi32(kw), bias);
          for (int x = 0; x < G; ++x) acc[x][j] = _mm512_dpbusd_epi32(acc[x][j], kb, q[x]);
        }
      }
      for (int j = 0; j < J; ++j) {
        uint16_t bits;
        std::memcpy(&bits, krows[j0 + j] + b * kKvQ8BlockBytes, sizeof bits);
        const __m512 dk = _mm512_set1_ps(_cvtsh_ss(bits));
        for (int x = 0; x < G; ++x) {
          const __m512 scale = _mm512_mul_ps(_mm512_loadu_ps(g[x].qd + b * kT), dk);
          s[x][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[x][j]), scale, s[x][j]);
        }
      }
    }
    for (int x = 0; x < G; ++x) {
      for (int j = 0; j < J; ++j) _mm512_store_ps(sbuf[x][j0 + j], s[x][j]);
    }
  }
}

// The online-softmax step and the V accumulation of G groups over their
// scores sbuf (then their weights).
template <int G>
void LaneSoftmaxAccum(const LaneGroup* g, float (*sbuf)[kT][kT], const float* v, size_t head_dim) {
  __m512 c[G];
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int x = 0; x < G; ++x) {
    const __m512i nvv = _mm512_loadu_si512(g[x].nv), fv = _mm512_loadu_si512(g[x].first);
    const __mmask16 active = _mm512_cmpgt_epi32_mask(nvv, fv);
    const __m512 m_old = _mm512_loadu_ps(g[x].m);
    __m512 mx = m_old;
    for (int j = 0; j < kT; ++j) {
      const __m512i jv = _mm512_set1_epi32(j);
      const __mmask16 seen = _mm512_cmpgt_epi32_mask(nvv, jv) & _mm512_cmple_epi32_mask(fv, jv);
      const __m512 sj = _mm512_mask_blend_ps(seen, ninf,
                                             _mm512_load_ps(sbuf[x][j]));
      _mm512_store_ps(sbuf[x][j], sj);
      mx = _mm512_max_ps(mx, sj);
    }
    // Lanes without positions here: weights 0 (their scores are -inf), c = 1.
    const __m512 sub = _mm512_maskz_mov_ps(active, mx);
    c[x] = _mm512_mask_blend_ps(active, _mm512_set1_ps(1.0f), Exp16(_mm512_sub_ps(m_old, mx)));
    _mm512_storeu_ps(g[x].m, _mm512_mask_blend_ps(active, m_old, mx));
    __m512 u[8];
    for (int j = 0; j < 8; ++j) {
      const __m512 p0 = Exp16(_mm512_sub_ps(_mm512_load_ps(sbuf[x][j]), sub));
      const __m512 p8 = Exp16(_mm512_sub_ps(_mm512_load_ps(sbuf[x][j + 8]), sub));
      _mm512_store_ps(sbuf[x][j], p0);
      _mm512_store_ps(sbuf[x][j + 8], p8);
      u[j] = _mm512_add_ps(p0, p8);
    }
    __m512 w[4];
    for (int j = 0; j < 4; ++j) w[j] = _mm512_add_ps(u[j], u[j + 4]);
    const __m512 y = _mm512_add_ps(_mm512_add_ps(w[0], w[2]), _mm512_add_ps(w[1], w[3]));
    _mm512_storeu_ps(g[x].l, _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(g[x].l), c[x]), y));
  }
  // acct[d][lanes] = acct * c, then the fused chain over the 16 positions.
  size_t d0 = 0;
  for (; d0 + 8 <= head_dim; d0 += 8) {
    __m512 a[G][8];
    for (int x = 0; x < G; ++x) {
      for (int t = 0; t < 8; ++t) a[x][t] = _mm512_mul_ps(_mm512_loadu_ps(g[x].acct + (d0 + t) * kT), c[x]);
    }
    for (int j = 0; j < kT; ++j) {
      __m512 p[G];
      for (int x = 0; x < G; ++x) p[x] = _mm512_load_ps(sbuf[x][j]);
      const float* vj = v + j * head_dim + d0;
      for (int t = 0; t < 8; ++t) {
        const __m512 vb = _mm512_set1_ps(vj[t]);
        for (int x = 0; x < G; ++x) a[x][t] = _mm512_fmadd_ps(p[x], vb, a[x][t]);
      }
    }
    for (int x = 0; x < G; ++x) {
      for (int t = 0; t < 8; ++t) _mm512_storeu_ps(g[x].acct + (d0 + t) * kT, a[x][t]);
    }
  }
  for (; d0 < head_dim; ++d0) {
    for (int x = 0; x < G; ++x) {
      __m512 a = _mm512_mul_ps(_mm512_loadu_ps(g[x].acct + d0 * kT), c[x]);
      for (int j = 0; j < kT; ++j) a = _mm512_fmadd_ps(_mm512_load_ps(sbuf[x][j]), _mm512_set1_ps(v[j * head_dim + d0]), a);
      _mm512_storeu_ps(g[x].acct + d0 * kT, a);
    }
  }
}

template <int G>
void LanesImpl(const LaneGroup* g, const float* k, const float* v, size_t head_dim) {
  alignas(64) float sbuf[G][kT][kT];  // scores, then weights: [group][position][lane]
  LaneScoresF32<G>(g, k, head_dim, sbuf);
  LaneSoftmaxAccum<G>(g, sbuf, v, head_dim);
}

template <int G>
void LanesQ8Impl(const LaneGroup* g, const uint8_t* const* krows, const float* v, size_t head_dim) {
  alignas(64) float sbuf[G][kT][kT];
  LaneScoresQ8<G>(g, krows, head_dim, sbuf);
  LaneSoftmaxAccum<G>(g, sbuf, v, head_dim);
}

// Three groups a call where that leaves no single one (a K/V head of a
// GQA model with three query heads and 16 rows has exactly three): each K
// and V load then feeds three FMAs. Four go as two pairs.
void AttendLanes(const LaneGroup* groups, size_t n, const float* k, const float* v, size_t head_dim) {
  size_t i = 0;
  for (; n - i >= 3 && n - i != 4; i += 3) LanesImpl<3>(groups + i, k, v, head_dim);
  for (; i + 2 <= n; i += 2) LanesImpl<2>(groups + i, k, v, head_dim);
  if (i < n) LanesImpl<1>(groups + i, k, v, head_dim);
}

// One K/V head's 16 rows of a tile as stored (kv_rows_simd.h) and their
// 16-lane loads, widened to F32 with the bits of f16_to_f32 / q8_0_to_f32.
template <KvDtype T>
struct HeadRows : KvHeadRows<T> {
  using KvHeadRows<T>::KvHeadRows;
  // Elements [d, d + 16) of row j (a Q8_0 run never crosses a block: d % 16 == 0).
  __m512 Hex(int j, size_t d) const {
    if constexpr (T == KvDtype::kF32) return _mm512_loadu_ps(this->F32(j) + d);
    if constexpr (T == KvDtype::kF16) {
      return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(this->F16(j) + d)));
    }
    // The scale widened where it is used (kv_rows_simd.h): gathering a
    // tile's scales first cost more than the broadcasts.
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(this->Q8At(j, d)));
    const __m512 scale = _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(this->ScaleBits(j, d))));
    return _mm512_mul_ps(scale, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
  }
  // Elements [d, d + n) (n < 16; F32 and F16 only, whose heads may end mid-vector), zeros after.
  __m512 HexTail(int j, size_t d, __mmask16 mask) const {
    if constexpr (T == KvDtype::kF16) {
      return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, this->F16(j) + d));
    }
    return _mm512_maskz_loadu_ps(mask, this->F32(j) + d);
  }
};

// A head's K rows to kt [head_dim][16], widened on the way: 16 x 16 blocks
// transposed in registers, the last head_dim % 16 columns element by element.
template <KvDtype T>
void TransposeTile(const HeadRows<T>& k, size_t head_dim, float* kt) {
  size_t d0 = 0;
  for (; d0 + 16 <= head_dim; d0 += 16) {
    __m512 r[16], t[16];
    for (int j = 0; j < 16; ++j) r[j] = k.Hex(j, d0);
    for (int j = 0; j < 16; j += 2) {  // pairs of rows interleaved by element
      t[j] = _mm512_unpacklo_ps(r[j], r[j + 1]);
      t[j + 1] = _mm512_unpackhi_ps(r[j], r[j + 1]);
    }
    for (int j = 0; j < 16; j += 4) {  // then by pairs of elements
      r[j] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[j]), _mm512_castps_pd(t[j + 2])));
      r[j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[j]), _mm512_castps_pd(t[j + 2])));
      r[j + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[j + 1]), _mm512_castps_pd(t[j + 3])));
      r[j + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[j + 1]), _mm512_castps_pd(t[j + 3])));
    }
    // r[4b + e] now holds, per 128-bit lane L, rows 4b..4b+3 of element
    // 4L + e. Gather the four 128-bit lanes of each element across b.
    for (int e = 0; e < 4; ++e) {
      const __m512 a0 = _mm512_shuffle_f32x4(r[e], r[4 + e], 0x88);       // b0 L0, L2 | b1 L0, L2
      const __m512 a1 = _mm512_shuffle_f32x4(r[e], r[4 + e], 0xDD);       // b0 L1, L3 | b1 L1, L3
      const __m512 a2 = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], 0x88);  // b2, b3 likewise
      const __m512 a3 = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], 0xDD);
      t[e] = _mm512_shuffle_f32x4(a0, a2, 0x88);       // L0: b0 b1 b2 b3
      t[4 + e] = _mm512_shuffle_f32x4(a1, a3, 0x88);   // L1
      t[8 + e] = _mm512_shuffle_f32x4(a0, a2, 0xDD);   // L2
      t[12 + e] = _mm512_shuffle_f32x4(a1, a3, 0xDD);  // L3
    }
    for (int e = 0; e < 16; ++e) _mm512_storeu_ps(kt + (d0 + e) * kT, t[e]);
  }
  for (; d0 < head_dim; ++d0) {
    for (int j = 0; j < kT; ++j) kt[d0 * kT + j] = k.Elem(j, d0);
  }
}

// 8-bit K rows to kt8 [head_dim / 4][16] dwords and their scales to ksc
// [head_dim / 32][16] (row j in lane j): a block's 32 bytes of each row are
// 8 dwords (four elements each); rows j and j + 8 share a register, an 8 x
// 8 dword transposition in each 256-bit half and one two-source permutation
// give, per dword, the 16 rows in the lanes. Each byte is biased to
// unsigned (+128) for vpdpbusd (ColScoresQ8).
void TransposeTileQ8(const HeadRows<KvDtype::kQ8_0>& k, size_t head_dim, int32_t* kt8, float* ksc) {
  const __m512i lo_idx = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);  // lanes 0 and 2 of each source
  const __m512i hi_idx = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);  // lanes 1 and 3
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  static_assert(sizeof(const uint8_t*) == sizeof(long long));
  const __m512i rows_lo = _mm512_loadu_si512(k.row), rows_hi = _mm512_loadu_si512(k.row + 8);
  for (size_t b = 0; b < head_dim / kKvQ8Block; ++b) {
    const size_t d0 = b * kKvQ8Block;
    __m512i r[8], t[8];
    for (int j = 0; j < 8; ++j) {
      const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k.Q8At(j, d0)));
      const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k.Q8At(j + 8, d0)));
      r[j] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
    for (int j = 0; j < 8; j += 2) {  // rows j, j + 1 interleaved by dword
      t[j] = _mm512_unpacklo_epi32(r[j], r[j + 1]);
      t[j + 1] = _mm512_unpackhi_epi32(r[j], r[j + 1]);
    }
    // s[4g + w], per 128-bit lane L: rows 4g..4g+3 (and 8 more in lanes 2, 3)
    // of dword w (lanes 0, 2) or w + 4 (lanes 1, 3).
    __m512i s[8];
    for (int g = 0; g < 2; ++g) {
      const __m512i* u = t + 4 * g;
      s[4 * g] = _mm512_unpacklo_epi64(u[0], u[2]);
      s[4 * g + 1] = _mm512_unpackhi_epi64(u[0], u[2]);
      s[4 * g + 2] = _mm512_unpacklo_epi64(u[1], u[3]);
      s[4 * g + 3] = _mm512_unpackhi_epi64(u[1], u[3]);
    }
    // The 16 rows' scales of the block: a dword gathered from each block's
    // start (the F16 scale in its low half), narrowed, widened to F32.
    const __m512i at = _mm512_set1_epi64(static_cast<long long>(b * kKvQ8BlockBytes));
    const __m256i s_lo = _mm512_i64gather_epi32(_mm512_add_epi64(rows_lo, at), nullptr, 1);
    const __m256i s_hi = _mm512_i64gather_epi32(_mm512_add_epi64(rows_hi, at), nullptr, 1);
    _mm512_storeu_ps(ksc + b * kT,
                     _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_inserti64x4(_mm512_castsi256_si512(s_lo), s_hi, 1))));
    for (int w = 0; w < 8; ++w) {
      const __m512i x = _mm512_permutex2var_epi64(s[w % 4], w < 4 ? lo_idx : hi_idx, s[4 + w % 4]);
      _mm512_storeu_si512(kt8 + (b * 8 + static_cast<size_t>(w)) * kT, _mm512_xor_si512(x, bias));
    }
  }
}

// 8-bit K scores (QueryQ8, dot.h) of n queries (n <= 16), the positions in
// the lanes: per block an integer dot by vpdpbusd (biased K bytes times the
// query's dword broadcast, from -128 x its byte sum), then the fused chain
// over the blocks. q: the queries; kt8[i], ksc[i]: query i's K/V head's
// transposed tile and scales. Queries of one head share each K load when
// the caller passes them as one group (H heads of G queries).
template <int H, int G>
void ColScoresQ8(const QueryQ8& q, const int32_t* const* kt8, const float* const* ksc, size_t head_dim, __m512* s) {
  constexpr int N = H * G;
  const size_t nb = head_dim / kKvQ8Block;
  __m512 a[N];
  for (int i = 0; i < N; ++i) a[i] = _mm512_setzero_ps();
  for (size_t b = 0; b < nb; ++b) {
    __m512i acc[N];
    for (int i = 0; i < N; ++i) acc[i] = _mm512_set1_epi32(-128 * q.sum[static_cast<size_t>(i) * nb + b]);
    for (size_t w = 0; w < kKvQ8Block / 4; ++w) {
      for (int h = 0; h < H; ++h) {
        __m512i kv = _mm512_loadu_si512(kt8[h * G] + (b * 8 + w) * kT);
        asm("" : "+v"(kv));  // one load per head, not one per query
        for (int g = 0; g < G; ++g) {
          const int i = h * G + g;
          int32_t qw;
          std::memcpy(&qw, q.qs + static_cast<size_t>(i) * head_dim + b * kKvQ8Block + 4 * w, sizeof qw);
          acc[i] = _mm512_dpbusd_epi32(acc[i], kv, _mm512_set1_epi32(qw));
        }
      }
    }
    for (int i = 0; i < N; ++i) {
      const __m512 scale = _mm512_mul_ps(_mm512_loadu_ps(ksc[i] + b * kT), _mm512_set1_ps(q.d[static_cast<size_t>(i) * nb + b]));
      a[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[i]), scale, a[i]);
    }
  }
  for (int i = 0; i < N; ++i) s[i] = a[i];
}

template <int G, size_t... I>
void Q8Call(size_t heads, const QueryQ8& q, const int32_t* const* kt8, const float* const* ksc, size_t head_dim,
            __m512* s, std::index_sequence<I...>) {
  using Fn = void (*)(const QueryQ8&, const int32_t* const*, const float* const*, size_t, __m512*);
  static constexpr Fn kFns[] = {&ColScoresQ8<static_cast<int>(I) + 1, G>...};
  kFns[heads - 1](q, kt8, ksc, head_dim, s);
}

// N queries' scores at once (N <= 16): independent fused chains over d,
// each with the positions in the lanes (the same chain as attend_lanes').
// Decode has one query per head, and a chain per query is latency-bound
// (64 dependent FMAs for head_dim 64): the more queries in one pass, the
// closer to the FMA ports' throughput. qs[i]: query i's elements; kts[i]:
// its K/V head's transposed tile.
template <int N>
void ColScores(const float* const* qs, const float* const* kts, size_t head_dim, __m512* s) {
  __m512 a[N];
  for (int i = 0; i < N; ++i) a[i] = _mm512_setzero_ps();
  for (size_t d = 0; d < head_dim; ++d) {
    for (int i = 0; i < N; ++i) a[i] = _mm512_fmadd_ps(_mm512_set1_ps(qs[i][d]), _mm512_loadu_ps(kts[i] + d * kT), a[i]);
  }
  for (int i = 0; i < N; ++i) s[i] = a[i];
}

template <size_t... I>
void ColScoresUpTo16(const float* const* qs, const float* const* kts, size_t n, size_t head_dim, __m512* s,
                     std::index_sequence<I...>) {
  using Fn = void (*)(const float* const*, const float* const*, size_t, __m512*);
  static constexpr Fn kFns[] = {&ColScores<static_cast<int>(I) + 1>...};
  kFns[n - 1](qs, kts, head_dim, s);
}

// H K/V heads of G queries each (H * G <= 16): the same chains as
// ColScores, each K load shared by its head's G queries (ColScores loads
// it once per query: at 9 queries of 3 heads the loads, not the FMAs, set
// the pace). q: the H * G queries in order; kt: the H heads' transposed tiles.
template <int H, int G>
void ColScoresGrouped(const float* q, const float* kt, size_t head_dim, __m512* s) {
  __m512 a[H * G];
  for (int i = 0; i < H * G; ++i) a[i] = _mm512_setzero_ps();
  for (size_t d = 0; d < head_dim; ++d) {
    for (int h = 0; h < H; ++h) {
      __m512 k = _mm512_loadu_ps(kt + static_cast<size_t>(h) * kT * head_dim + d * kT);
      // In a register: left to itself GCC folds the load into each FMA,
      // one load per query again.
      asm("" : "+v"(k));
      for (int g = 0; g < G; ++g) {
        a[h * G + g] = _mm512_fmadd_ps(_mm512_set1_ps(q[static_cast<size_t>(h * G + g) * head_dim + d]), k, a[h * G + g]);
      }
    }
  }
  for (int i = 0; i < H * G; ++i) s[i] = a[i];
}

template <int G, size_t... I>
void GroupedCall(size_t heads, const float* q, const float* kt, size_t head_dim, __m512* s, std::index_sequence<I...>) {
  using Fn = void (*)(const float*, const float*, size_t, __m512*);
  static constexpr Fn kFns[] = {&ColScoresGrouped<static_cast<int>(I) + 1, G>...};
  kFns[heads - 1](q, kt, head_dim, s);
}
// heads (<= 16 / group) K/V heads of group (<= 4) queries each.
void Grouped(size_t group, size_t heads, const float* q, const float* kt, size_t head_dim, __m512* s) {
  switch (group) {
    case 1: GroupedCall<1>(heads, q, kt, head_dim, s, std::make_index_sequence<16>{}); break;
    case 2: GroupedCall<2>(heads, q, kt, head_dim, s, std::make_index_sequence<8>{}); break;
    case 3: GroupedCall<3>(heads, q, kt, head_dim, s, std::make_index_sequence<5>{}); break;
    default: GroupedCall<4>(heads, q, kt, head_dim, s, std::make_index_sequence<4>{}); break;
  }
}

// Lane i of the result: v[i]'s 16 lanes reduced by op (add: TreeSum's sum,
// in its order) for 16 vectors at once: each step pairs lanes as TreeSum
// does (j + j+8, j + j+4, j + j+2, j + j+1), two to four vectors a
// register, so 15 shuffle pairs and one permutation replace 16 reductions.
template <class Op>
__m512 TransposedReduce(const __m512* v, Op op) {
  __m512 r1[8], r2[4], r3[2];
  for (int i = 0; i < 8; ++i) {  // vector 2i in lanes 0..7, 2i + 1 in 8..15: j + j+8
    r1[i] = op(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44), _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
  }
  for (int i = 0; i < 4; ++i) {  // 128-bit lane L: vector 4i + L; j + j+4
    r2[i] = op(_mm512_shuffle_f32x4(r1[2 * i], r1[2 * i + 1], 0x88), _mm512_shuffle_f32x4(r1[2 * i], r1[2 * i + 1], 0xDD));
  }
  for (int i = 0; i < 2; ++i) {  // lane L: vector 8i + L twice, then 8i + 4 + L twice; j + j+2
    r3[i] = op(_mm512_shuffle_ps(r2[2 * i], r2[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
               _mm512_shuffle_ps(r2[2 * i], r2[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // Element 4L + e: vector 4e + L; j + j+1, then each vector to its lane.
  const __m512 r4 = op(_mm512_shuffle_ps(r3[0], r3[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(r3[0], r3[1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), r4);
}

// The online-softmax step of n queries (n <= 16) over the tile's scores
// s[i] (positions outside `seen` are -inf): m[i], l[i] updated, the weights
// into p[i], the factors the accumulators are rescaled by into c[i]. Per
// query the scalar twin's operations; the per-query values (maximum,
// factor, sum) computed with the queries in the lanes.
void ColSoftmax(const __m512* s, size_t n, __mmask16 seen, float* m, float* l, float (*p)[kT], float* c) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __mmask16 live = static_cast<__mmask16>((1u << n) - 1u);
  __m512 v[16];
  for (size_t i = 0; i < 16; ++i) v[i] = i < n ? _mm512_mask_blend_ps(seen, ninf, s[i]) : ninf;
  const __m512 tile_max = TransposedReduce(v, [](__m512 a, __m512 b) { return _mm512_max_ps(a, b); });
  const __m512 m_old = _mm512_maskz_loadu_ps(live, m);
  const __m512 mx = _mm512_max_ps(tile_max, m_old);  // tile_max > m ? tile_max : m
  alignas(64) float mxs[16];
  _mm512_store_ps(mxs, mx);
  for (size_t i = 0; i < 16; ++i) {
    if (i < n) {
      v[i] = Exp16(_mm512_sub_ps(v[i], _mm512_set1_ps(mxs[i])));
      _mm512_store_ps(p[i], v[i]);
    } else {
      v[i] = _mm512_setzero_ps();
    }
  }
  const __m512 sum = TransposedReduce(v, [](__m512 a, __m512 b) { return _mm512_add_ps(a, b); });
  const __m512 cv = Exp16(_mm512_sub_ps(m_old, mx));
  _mm512_mask_storeu_ps(l, live, _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(live, l), cv), sum));
  _mm512_mask_storeu_ps(m, live, mx);
  _mm512_mask_storeu_ps(c, live, cv);
}

// acc_i[d..d + 16D) = acc_i * c_i, then the fused chain over the 16
// positions of p_i[j] * v[j][d] (the scalar twin's order per element), for N
// queries of one K/V head: each V load shared by the N queries, N x D
// independent chains.
template <int N, int D, KvDtype T>
void ColAccumBlock(const float (*p)[kT], const float* c, const HeadRows<T>& v, size_t head_dim, size_t d, float* acc) {
  __m512 x[N][D];
  for (int i = 0; i < N; ++i) {
    for (int t = 0; t < D; ++t) x[i][t] = _mm512_mul_ps(_mm512_loadu_ps(acc + i * head_dim + d + 16 * t), _mm512_set1_ps(c[i]));
  }
  for (int j = 0; j < kT; ++j) {
    for (int t = 0; t < D; ++t) {
      const __m512 vb = v.Hex(j, d + 16 * t);
      for (int i = 0; i < N; ++i) x[i][t] = _mm512_fmadd_ps(_mm512_set1_ps(p[i][j]), vb, x[i][t]);
    }
  }
  for (int i = 0; i < N; ++i) {
    for (int t = 0; t < D; ++t) _mm512_storeu_ps(acc + i * head_dim + d + 16 * t, x[i][t]);
  }
}

template <int N, KvDtype T>
void ColAccum(const float (*p)[kT], const float* c, const HeadRows<T>& v, size_t head_dim, float* acc) {
  size_t d = 0;
  for (; d + 64 <= head_dim; d += 64) ColAccumBlock<N, 4>(p, c, v, head_dim, d, acc);
  for (; d + 16 <= head_dim; d += 16) ColAccumBlock<N, 1>(p, c, v, head_dim, d, acc);
  if (d == head_dim) return;
  const __mmask16 tail = static_cast<__mmask16>((1u << (head_dim - d)) - 1u);
  for (int i = 0; i < N; ++i) {
    float* a = acc + i * head_dim + d;
    __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, a), _mm512_set1_ps(c[i]));
    for (int j = 0; j < kT; ++j) {
      if constexpr (T == KvDtype::kQ8_0) continue;  // whole blocks: no tail
      else x = _mm512_fmadd_ps(_mm512_set1_ps(p[i][j]), v.HexTail(j, d, tail), x);
    }
    _mm512_mask_storeu_ps(a, tail, x);
  }
}

template <KvDtype T>
void AttendCols(const float* q, const QueryQ8& q8, size_t nq, size_t group, const KvTile& kv, size_t head_dim,
                size_t first, size_t nv, float* kt_scratch, float* m, float* l, float* acc) {
  const size_t heads = (nq + group - 1) / group, nb = head_dim / kKvQ8Block;
  // 8-bit K: head g's bytes at kt8 + g * 4 * head_dim dwords, its scales at
  // ksc + g * 16 * nb (16 * head_dim floats a head in all: within its share).
  int32_t* kt8 = reinterpret_cast<int32_t*>(kt_scratch);
  float* ksc = kt_scratch + heads * 4 * head_dim;
  for (size_t g = 0; g < heads; ++g) {
    const HeadRows<T> kr(kv.k, g * kv.head_bytes);
    if constexpr (T == KvDtype::kQ8_0) TransposeTileQ8(kr, head_dim, kt8 + g * 4 * head_dim, ksc + g * kT * nb);
    else TransposeTile(kr, head_dim, kt_scratch + g * kT * head_dim);
  }
  const __mmask16 seen = static_cast<__mmask16>(((1u << nv) - 1u) & ~((1u << first) - 1u));
  alignas(64) float p[16][kT];
  float c[16];
  // Passes of whole K/V heads where a head has at most 4 queries (a pass's
  // queries change no query's bits).
  const bool grouped = group <= 4;
  const size_t pass = grouped ? 16 / group * group : 16;
  for (size_t q0 = 0; q0 < nq; q0 += pass) {
    const size_t n = nq - q0 < pass ? nq - q0 : pass;
    __m512 s[16];
    if constexpr (T == KvDtype::kQ8_0) {
      const QueryQ8 qn{q8.qs + q0 * head_dim, q8.d + q0 * nb, q8.sum + q0 * nb};
      const int32_t* kts[16];
      const float* kscs[16];
      for (size_t i = 0; i < n; ++i) {
        kts[i] = kt8 + (q0 + i) / group * 4 * head_dim;
        kscs[i] = ksc + (q0 + i) / group * kT * nb;
      }
      if (grouped && n % group == 0) {
        switch (group) {
          case 1: Q8Call<1>(n, qn, kts, kscs, head_dim, s, std::make_index_sequence<16>{}); break;
          case 2: Q8Call<2>(n / 2, qn, kts, kscs, head_dim, s, std::make_index_sequence<8>{}); break;
          case 3: Q8Call<3>(n / 3, qn, kts, kscs, head_dim, s, std::make_index_sequence<5>{}); break;
          default: Q8Call<4>(n / 4, qn, kts, kscs, head_dim, s, std::make_index_sequence<4>{}); break;
        }
      } else {  // one query a "head": no shared loads
        Q8Call<1>(n, qn, kts, kscs, head_dim, s, std::make_index_sequence<16>{});
      }
    } else if (grouped && n % group == 0) {
      Grouped(group, n / group, q + q0 * head_dim, kt_scratch + q0 / group * kT * head_dim, head_dim, s);
    } else {
      const float* qs[16];
      const float* kts[16];
      for (size_t i = 0; i < n; ++i) {
        qs[i] = q + (q0 + i) * head_dim;
        kts[i] = kt_scratch + (q0 + i) / group * kT * head_dim;
      }
      ColScoresUpTo16(qs, kts, n, head_dim, s, std::make_index_sequence<16>{});
    }
    ColSoftmax(s, n, seen, m + q0, l + q0, p, c);
    // Runs of queries that share a K/V head, up to four at a time.
    for (size_t i = 0; i < n;) {
      const size_t head = (q0 + i) / group;
      const size_t run = std::min<size_t>(std::min(n, (head + 1) * group - q0) - i, 4);
      const HeadRows<T> vh(kv.v, head * kv.head_bytes);
      float* ai = acc + (q0 + i) * head_dim;
      switch (run) {
        case 1: ColAccum<1, T>(p + i, c + i, vh, head_dim, ai); break;
        case 2: ColAccum<2, T>(p + i, c + i, vh, head_dim, ai); break;
        case 3: ColAccum<3, T>(p + i, c + i, vh, head_dim, ai); break;
        default: ColAccum<4, T>(p + i, c + i, vh, head_dim, ai); break;
      }
      i += run;
    }
  }
}

}  // namespace

void Avx512AttendLanes(const LaneGroup* groups, size_t n, const float* k, const float* v, size_t head_dim) {
  AttendLanes(groups, n, k, v, head_dim);
}

void Avx512AttendCols(const float* q, const QueryQ8& q8, size_t nq, size_t group, const KvTile& kv, size_t head_dim,
                      size_t first, size_t nv, float* scratch, float* m, float* l, float* acc) {
  switch (kv.dtype) {
    case KvDtype::kF32: AttendCols<KvDtype::kF32>(q, q8, nq, group, kv, head_dim, first, nv, scratch, m, l, acc); break;
    case KvDtype::kF16: AttendCols<KvDtype::kF16>(q, q8, nq, group, kv, head_dim, first, nv, scratch, m, l, acc); break;
    case KvDtype::kQ8_0: AttendCols<KvDtype::kQ8_0>(q, q8, nq, group, kv, head_dim, first, nv, scratch, m, l, acc); break;
  }
}

void Avx512AttendLanesQ8(const LaneGroup* groups, size_t n, const uint8_t* const* krows, const float* v,
                         size_t head_dim) {
  size_t i = 0;
  for (; i + 2 <= n; i += 2) LanesQ8Impl<2>(groups + i, krows, v, head_dim);
  if (i < n) LanesQ8Impl<1>(groups + i, krows, v, head_dim);
}

}  // namespace pc
