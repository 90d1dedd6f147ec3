// AVX2 attention tiles: attend_lanes, attend_cols and attend_lanes_q8 of
// dot.h for the avx2 and avxvnni tables (the avx512 table replaces them
// with its own). A tile's 16 lanes are two 8-float halves; the register
// blocks are sized for 16 YMM registers (at most 12 accumulators, their
// operands and a broadcast). Per query the operations are those of the
// scalar twin in dot.cc, in its order, so every level gives the same bits.
// Included only by attention_avx2.cc (-mavx2 -mfma -mf16c) and
// attention_avxvnni.cc (the same plus -mavxvnni), each of which first
// declares pc::(anonymous)::kVnni: whether 8-bit K's integer dots use the
// VEX vpdpbusd (one instruction per four products a lane) or the AVX2
// sign/maddubs/madd sequence; the integers, and so the scores, are the
// same. Everything here has internal linkage; each file runs only after
// ActiveIsa() confirmed its flags. No inline helper shared with other files
// is instantiated here except exp_avx2.h's, which only AVX2-flagged files
// include.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "kernels/dot.h"
#include "kernels/kv_rows_simd.h"
#include "kernels/exp_avx2.h"

namespace pc {
namespace {

using avx2::Exp8;
constexpr int kT = static_cast<int>(kLaneTile);

// Scores of P positions from j0: sbuf[j][lane] = fused chain over d of
// q[d][lane] * k[j][d], 2P accumulators over d.
template <int P>
inline void LaneScoresBlock(const LaneGroup& g, const float* k, size_t head_dim, int j0, float (*sbuf)[kT]) {
  __m256 s[P][2];
  for (auto& sj : s) sj[0] = sj[1] = _mm256_setzero_ps();
  for (size_t d = 0; d < head_dim; ++d) {
    const __m256 q0 = _mm256_loadu_ps(g.qt + d * kT), q1 = _mm256_loadu_ps(g.qt + d * kT + 8);
    for (int j = 0; j < P; ++j) {
      const __m256 kb = _mm256_broadcast_ss(k + (j0 + j) * head_dim + d);
      s[j][0] = _mm256_fmadd_ps(q0, kb, s[j][0]);
      s[j][1] = _mm256_fmadd_ps(q1, kb, s[j][1]);
    }
  }
  for (int j = 0; j < P; ++j) {
    _mm256_store_ps(sbuf[j0 + j], s[j][0]);
    _mm256_store_ps(sbuf[j0 + j] + 8, s[j][1]);
  }
}

// Scores of one lane group: six positions (12 accumulators: with 8, two FMA
// pipes of latency 4 have no slack) twice, then four. With LaneAccum's six
// dimensions: kernels_bench BM_Attend/avx2/4000/256/0 79.5 -> 85 GFLOP/s
// on the Zen 5 guest (six alternating runs each; no spills in the loops).
void LaneScores(const LaneGroup& g, const float* k, size_t head_dim, float (*sbuf)[kT]) {
  static_assert(kT == 16);
  LaneScoresBlock<6>(g, k, head_dim, 0, sbuf);
  LaneScoresBlock<6>(g, k, head_dim, 6, sbuf);
  LaneScoresBlock<4>(g, k, head_dim, 12, sbuf);
}

// Sum of the 4-element products of a's unsigned and b's signed bytes in
// each dword, added to acc. Exact where it is used: without VNNI a is
// |k| <= 128 and b's bytes |q| <= 127, so a pair of products fits in 16
// bits; vpdpbusd is exact for any bytes.
inline __m256i DotBytes(__m256i acc, __m256i a, __m256i b) {
  if constexpr (kVnni) return _mm256_dpbusd_avx_epi32(acc, a, b);
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1)));
}

// With VNNI, K's bytes biased to unsigned (k xor 0x80 = k + 128) multiply
// the query's signed bytes; each dot then carries 128 x the query block's
// byte sum, so it starts from minus that: 8 lanes of -128 * sum[i].
inline __m256i BiasStart(const int32_t* sum) {
  return _mm256_sub_epi32(_mm256_setzero_si256(),
                          _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sum)), 7));
}

// 8-bit K (QueryQ8, dot.h): the same scores from the group's bytes, four
// elements a lane: each K row's dword broadcast; |k| times the query's
// bytes with k's signs (exact products, vpmaddubsw's pairs within 16
// bits), or with VNNI k + 128 times the query's bytes (BiasStart), then
// the fused chain over the blocks; two positions per pass.
void LaneScoresQ8(const LaneGroup& g, const uint8_t* const* krows, size_t head_dim, float (*sbuf)[kT]) {
  const size_t nb = head_dim / kKvQ8Block;
  for (int j0 = 0; j0 < kT; j0 += 2) {
    __m256 s[2][2];
    for (auto& sj : s) sj[0] = sj[1] = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; ++b) {
      __m256i acc[2][2];
      for (int h = 0; h < 2; ++h) {
        const __m256i start = kVnni ? BiasStart(g.qsum + b * kT + 8 * h) : _mm256_setzero_si256();
        acc[0][h] = acc[1][h] = start;
      }
      for (size_t w = 0; w < kKvQ8Block / 4; ++w) {
        const __m256i* qw = reinterpret_cast<const __m256i*>(g.qt8 + (b * 8 + w) * kT);
        const __m256i q0 = _mm256_loadu_si256(qw), q1 = _mm256_loadu_si256(qw + 1);
        for (int j = 0; j < 2; ++j) {
          uint32_t kw;
          std::memcpy(&kw, krows[j0 + j] + b * kKvQ8BlockBytes + 2 + 4 * w, sizeof kw);
          if constexpr (kVnni) {
            const __m256i ku = _mm256_set1_epi32(static_cast<int32_t>(kw ^ 0x80808080u));
            acc[j][0] = DotBytes(acc[j][0], ku, q0);
            acc[j][1] = DotBytes(acc[j][1], ku, q1);
          } else {
            const __m256i kb = _mm256_set1_epi32(static_cast<int32_t>(kw)), ka = _mm256_abs_epi8(kb);
            acc[j][0] = DotBytes(acc[j][0], ka, _mm256_sign_epi8(q0, kb));
            acc[j][1] = DotBytes(acc[j][1], ka, _mm256_sign_epi8(q1, kb));
          }
        }
      }
      for (int j = 0; j < 2; ++j) {
        uint16_t bits;
        std::memcpy(&bits, krows[j0 + j] + b * kKvQ8BlockBytes, sizeof bits);
        const __m256 dk = _mm256_set1_ps(_cvtsh_ss(bits));
        for (int h = 0; h < 2; ++h) {
          const __m256 scale = _mm256_mul_ps(_mm256_loadu_ps(g.qd + b * kT + 8 * h), dk);
          s[j][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[j][h]), scale, s[j][h]);
        }
      }
    }
    for (int j = 0; j < 2; ++j) {
      _mm256_store_ps(sbuf[j0 + j], s[j][0]);
      _mm256_store_ps(sbuf[j0 + j] + 8, s[j][1]);
    }
  }
}

// The online-softmax step of one half (lanes h*8 ..): invisible positions to
// -inf, the new maximum, weights into sbuf, m and l updated; returns the
// rescale factor c (1 in lanes that see nothing here).
__m256 LaneSoftmax(const LaneGroup& g, int h, float (*sbuf)[kT]) {
  const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  const __m256i nvv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.nv + 8 * h));
  const __m256i fv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.first + 8 * h));
  const __m256 active = _mm256_castsi256_ps(_mm256_cmpgt_epi32(nvv, fv));
  const __m256 m_old = _mm256_loadu_ps(g.m + 8 * h);
  __m256 mx = m_old;
  // Every lane sees the whole tile (the common case, before the diagonal):
  // no position to mask.
  const __m256i whole = _mm256_or_si256(fv, _mm256_xor_si256(nvv, _mm256_set1_epi32(kT)));
  if (_mm256_testz_si256(whole, whole)) {
    for (int j = 0; j < kT; ++j) mx = _mm256_max_ps(mx, _mm256_load_ps(sbuf[j] + 8 * h));
  } else {
    for (int j = 0; j < kT; ++j) {
      const __m256i jv = _mm256_set1_epi32(j);
      const __m256 seen = _mm256_castsi256_ps(_mm256_andnot_si256(_mm256_cmpgt_epi32(fv, jv), _mm256_cmpgt_epi32(nvv, jv)));
      const __m256 sj = _mm256_blendv_ps(ninf, _mm256_load_ps(sbuf[j] + 8 * h), seen);
      _mm256_store_ps(sbuf[j] + 8 * h, sj);
      mx = _mm256_max_ps(mx, sj);
    }
  }
  // Lanes without positions here: weights 0 (their scores are -inf), c = 1.
  const __m256 sub = _mm256_and_ps(active, mx);
  const __m256 c = _mm256_blendv_ps(_mm256_set1_ps(1.0f), Exp8(_mm256_sub_ps(m_old, mx)), active);
  _mm256_storeu_ps(g.m + 8 * h, _mm256_blendv_ps(m_old, mx, active));
  __m256 u[8];
  for (int j = 0; j < 8; ++j) {
    const __m256 p0 = Exp8(_mm256_sub_ps(_mm256_load_ps(sbuf[j] + 8 * h), sub));
    const __m256 p8 = Exp8(_mm256_sub_ps(_mm256_load_ps(sbuf[j + 8] + 8 * h), sub));
    _mm256_store_ps(sbuf[j] + 8 * h, p0);
    _mm256_store_ps(sbuf[j + 8] + 8 * h, p8);
    u[j] = _mm256_add_ps(p0, p8);
  }
  __m256 w[4];
  for (int j = 0; j < 4; ++j) w[j] = _mm256_add_ps(u[j], u[j + 4]);
  const __m256 y = _mm256_add_ps(_mm256_add_ps(w[0], w[2]), _mm256_add_ps(w[1], w[3]));
  _mm256_storeu_ps(g.l + 8 * h, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(g.l + 8 * h), c), y));
  return c;
}

// Dimensions d0 .. d0 + D - 1 of LaneAccum: 2D accumulators over the 16
// positions.
template <int D>
inline void LaneAccumBlock(const LaneGroup& g, const float (*p)[kT], const __m256* c, const float* v, size_t head_dim,
                           size_t d0) {
  __m256 a[D][2];
  for (int t = 0; t < D; ++t) {
    for (int h = 0; h < 2; ++h) a[t][h] = _mm256_mul_ps(_mm256_loadu_ps(g.acct + (d0 + t) * kT + 8 * h), c[h]);
  }
  for (int j = 0; j < kT; ++j) {
    const __m256 p0 = _mm256_load_ps(p[j]), p1 = _mm256_load_ps(p[j] + 8);
    const float* vj = v + j * head_dim + d0;
    for (int t = 0; t < D; ++t) {
      const __m256 vb = _mm256_broadcast_ss(vj + t);
      a[t][0] = _mm256_fmadd_ps(p0, vb, a[t][0]);
      a[t][1] = _mm256_fmadd_ps(p1, vb, a[t][1]);
    }
  }
  for (int t = 0; t < D; ++t) {
    for (int h = 0; h < 2; ++h) _mm256_storeu_ps(g.acct + (d0 + t) * kT + 8 * h, a[t][h]);
  }
}

// acct[d][lanes] = acct * c, then the fused chain over the 16 positions of
// p_j * v[j][d]: six dimensions (12 accumulators) at a time, then four,
// then one. (Skipping the rescale where c is 1 in every lane measured no
// faster.)
void LaneAccum(const LaneGroup& g, const float (*p)[kT], const __m256* c, const float* v, size_t head_dim) {
  size_t d0 = 0;
  for (; d0 + 6 <= head_dim; d0 += 6) LaneAccumBlock<6>(g, p, c, v, head_dim, d0);
  for (; d0 + 4 <= head_dim; d0 += 4) LaneAccumBlock<4>(g, p, c, v, head_dim, d0);
  for (; d0 < head_dim; ++d0) LaneAccumBlock<1>(g, p, c, v, head_dim, d0);
}

// One K/V head's 16 rows of a tile as stored (kv_rows_simd.h) and their
// 8-lane loads, widened to F32 with the bits of f16_to_f32 / q8_0_to_f32.
template <KvDtype T>
struct HeadRows : KvHeadRows<T> {
  using KvHeadRows<T>::KvHeadRows;
  // Elements [d, d + 8) of row j (F32 and F16).
  __m256 Oct(int j, size_t d) const {
    if constexpr (T == KvDtype::kF32) return _mm256_loadu_ps(this->F32(j) + d);
    static_assert(T != KvDtype::kQ8_0, "Q8_0 rows are read 16 elements at a time (Hex)");
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(this->F16(j) + d)));
  }
  // Elements [d, d + 16) of row j as two halves (Q8_0: one scale, widened
  // where the row is read, for both: a run of 16 never crosses a block).
  void Hex(int j, size_t d, __m256* lo, __m256* hi) const {
    if constexpr (T == KvDtype::kQ8_0) {
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(this->Q8At(j, d)));
      const __m256 sc = _mm256_set1_ps(this->Scale(j, d));
      *lo = _mm256_mul_ps(sc, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
      *hi = _mm256_mul_ps(sc, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(q, q))));
    } else {
      *lo = Oct(j, d);
      *hi = Oct(j, d + 8);
    }
  }
  // Elements [d, d + 4) of row a, then of row b (F32 and F16; Q8_0 tiles
  // are transposed from whole blocks, TransposeTileQ8).
  __m256 Quads(int a, int b, size_t d) const {
    if constexpr (T == KvDtype::kF32) {
      const float* ra = this->F32(a) + d;
      const float* rb = this->F32(b) + d;
      return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(ra)), _mm_loadu_ps(rb), 1);
    } else {
      static_assert(T == KvDtype::kF16);
      int64_t x, y;
      std::memcpy(&x, this->F16(a) + d, 8);
      std::memcpy(&y, this->F16(b) + d, 8);
      return _mm256_cvtph_ps(_mm_set_epi64x(y, x));
    }
  }
};

// A head's K rows to kt [head_dim][16] in 8 x 8 blocks, widened on the way:
// each register holds four elements of row r and of row r + 4 (the
// lane-crossing step done by the loads), then two in-lane shuffle steps;
// the last head_dim % 8 columns element by element.
// (F16 from whole rows measured no faster than the pairs.) Q8_0 tiles go
// through TransposeTileQ8.
template <KvDtype T>
void TransposeTile(const HeadRows<T>& k, size_t head_dim, float* kt) {
  size_t d0 = 0;
  for (; d0 + 8 <= head_dim; d0 += 8) {
    for (int r0 = 0; r0 < kT; r0 += 8) {
      for (int e0 = 0; e0 < 8; e0 += 4) {
        __m256 r[4];
        for (int j = 0; j < 4; ++j) r[j] = k.Quads(r0 + j, r0 + j + 4, d0 + e0);
        const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
        const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
        float* out = kt + (d0 + e0) * kT + r0;
        _mm256_storeu_ps(out, _mm256_shuffle_ps(t0, t2, 0x44));
        _mm256_storeu_ps(out + kT, _mm256_shuffle_ps(t0, t2, 0xEE));
        _mm256_storeu_ps(out + 2 * kT, _mm256_shuffle_ps(t1, t3, 0x44));
        _mm256_storeu_ps(out + 3 * kT, _mm256_shuffle_ps(t1, t3, 0xEE));
      }
    }
  }
  for (; d0 < head_dim; ++d0) {
    for (int j = 0; j < kT; ++j) kt[d0 * kT + j] = k.Elem(j, d0);
  }
}

// The F16 scales at byte `at` of the 16 rows, widened: out[j] row j's. The
// halves packed four to a 64-bit word in general registers, then two
// conversions (inserting them into a vector one by one, or gathering them,
// measured slower: the scales were a seventh of a decode tile's time).
void BlockScales(const uint8_t* const* row, size_t at, float* out) {
  uint64_t w[4];
  for (int i = 0; i < 4; ++i) {
    uint64_t x = 0;
    for (int e = 0; e < 4; ++e) {
      uint16_t h;
      std::memcpy(&h, row[4 * i + e] + at, sizeof h);
      x |= static_cast<uint64_t>(h) << (16 * e);
    }
    w[i] = x;
  }
  _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_set_epi64x(static_cast<long long>(w[1]), static_cast<long long>(w[0]))));
  _mm256_storeu_ps(out + 8, _mm256_cvtph_ps(_mm_set_epi64x(static_cast<long long>(w[3]), static_cast<long long>(w[2]))));
}

// 8-bit K rows to kt8 [head_dim / 4][16] dwords (four elements of row j in
// dword j) and their scales to ksc [head_dim / 32][16]: each row's block
// of 32 bytes as 8 dwords, 8 x 8 dword transpositions per 8 rows.
void TransposeTileQ8(const HeadRows<KvDtype::kQ8_0>& k, size_t head_dim, int32_t* kt8, float* ksc) {
  for (size_t d0 = 0; d0 < head_dim; d0 += kKvQ8Block) {
    const size_t b = d0 / kKvQ8Block;
    BlockScales(k.row, b * kKvQ8BlockBytes, ksc + b * kT);
    for (int r0 = 0; r0 < kT; r0 += 8) {
      __m256i r[8], t[8], u[8];
      for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k.Q8At(r0 + j, d0)));
      for (int j = 0; j < 8; j += 2) {
        t[j] = _mm256_unpacklo_epi32(r[j], r[j + 1]);
        t[j + 1] = _mm256_unpackhi_epi32(r[j], r[j + 1]);
      }
      // u[4g + w], per 128-bit lane L: rows r0 + 4g.. + 3 of dword w + 4L.
      for (int g = 0; g < 8; g += 4) {
        u[g] = _mm256_unpacklo_epi64(t[g], t[g + 2]);
        u[g + 1] = _mm256_unpackhi_epi64(t[g], t[g + 2]);
        u[g + 2] = _mm256_unpacklo_epi64(t[g + 1], t[g + 3]);
        u[g + 3] = _mm256_unpackhi_epi64(t[g + 1], t[g + 3]);
      }
      auto out = [&](int w) { return reinterpret_cast<__m256i*>(kt8 + (b * 8 + static_cast<size_t>(w)) * kT + r0); };
      for (int w = 0; w < 4; ++w) {
        _mm256_storeu_si256(out(w), _mm256_permute2x128_si256(u[w], u[4 + w], 0x20));
        _mm256_storeu_si256(out(w + 4), _mm256_permute2x128_si256(u[w], u[4 + w], 0x31));
      }
    }
  }
}

// 8-bit K scores (QueryQ8, dot.h) of N <= 2 queries of one K/V head, the
// positions in the lanes (two halves): per block the integer dots (|k| and
// the broadcast query dword with k's signs, or k + 128 and the query's
// dword from BiasStart's sum, DotBytes), then the fused chain
// over the blocks. q: the queries; kt8, ksc: the head's transposed tile.
template <int N>
void ColScoresQ8(const QueryQ8& q, const int32_t* kt8, const float* ksc, size_t head_dim, __m256 (*s)[2]) {
  static_assert(N >= 1 && N <= 2);
  const size_t nb = head_dim / kKvQ8Block;
  __m256 a[N][2];
  for (int i = 0; i < N; ++i) a[i][0] = a[i][1] = _mm256_setzero_ps();
  for (size_t b = 0; b < nb; ++b) {
    __m256i acc[N][2];
    for (int i = 0; i < N; ++i) {
      const int32_t start = kVnni ? -128 * q.sum[static_cast<size_t>(i) * nb + b] : 0;
      acc[i][0] = acc[i][1] = _mm256_set1_epi32(start);
    }
    for (size_t w = 0; w < kKvQ8Block / 4; ++w) {
      const __m256i* kw = reinterpret_cast<const __m256i*>(kt8 + (b * 8 + w) * kT);
      const __m256i x0 = _mm256_loadu_si256(kw), x1 = _mm256_loadu_si256(kw + 1);
      // Without VNNI |k| (k's signs go to the query's bytes), with it k + 128.
      const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
      const __m256i a0 = kVnni ? _mm256_xor_si256(x0, bias) : _mm256_abs_epi8(x0);
      const __m256i a1 = kVnni ? _mm256_xor_si256(x1, bias) : _mm256_abs_epi8(x1);
      for (int i = 0; i < N; ++i) {
        int32_t qw;
        std::memcpy(&qw, q.qs + static_cast<size_t>(i) * head_dim + b * kKvQ8Block + 4 * w, sizeof qw);
        const __m256i qb = _mm256_set1_epi32(qw);
        acc[i][0] = DotBytes(acc[i][0], a0, kVnni ? qb : _mm256_sign_epi8(qb, x0));
        acc[i][1] = DotBytes(acc[i][1], a1, kVnni ? qb : _mm256_sign_epi8(qb, x1));
      }
    }
    for (int i = 0; i < N; ++i) {
      const __m256 qd = _mm256_set1_ps(q.d[static_cast<size_t>(i) * nb + b]);
      for (int h = 0; h < 2; ++h) {
        const __m256 scale = _mm256_mul_ps(_mm256_loadu_ps(ksc + b * kT + 8 * h), qd);
        a[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[i][h]), scale, a[i][h]);
      }
    }
  }
  for (int i = 0; i < N; ++i) s[i][0] = a[i][0], s[i][1] = a[i][1];
}

// N queries of one K/V head (N <= 4): their scores, independent fused
// chains over d with the positions in the lanes (two halves each), every kt
// load shared by the N queries. The accumulators are named registers: as an
// array indexed in loops GCC 12 kept them in memory as well, a store per
// FMA, and the loop ran at the store port's pace (Zen 3: 2.5x slower).
template <int N>
void ColScores(const float* q, const float* kt, size_t head_dim, __m256 (*s)[2]) {
  static_assert(N >= 1 && N <= 4);
  const __m256 z = _mm256_setzero_ps();
  __m256 a0 = z, a1 = z, b0 = z, b1 = z, c0 = z, c1 = z, e0 = z, e1 = z;
  for (size_t d = 0; d < head_dim; ++d) {
    const __m256 k0 = _mm256_loadu_ps(kt + d * kT), k1 = _mm256_loadu_ps(kt + d * kT + 8);
    auto step = [&](int i, __m256& x0, __m256& x1) {
      const __m256 qb = _mm256_broadcast_ss(q + i * head_dim + d);
      x0 = _mm256_fmadd_ps(qb, k0, x0);
      x1 = _mm256_fmadd_ps(qb, k1, x1);
    };
    step(0, a0, a1);
    if constexpr (N > 1) step(1, b0, b1);
    if constexpr (N > 2) step(2, c0, c1);
    if constexpr (N > 3) step(3, e0, e1);
  }
  const __m256 all[4][2] = {{a0, a1}, {b0, b1}, {c0, c1}, {e0, e1}};
  for (int i = 0; i < N; ++i) {
    s[i][0] = all[i][0];
    s[i][1] = all[i][1];
  }
}

// 4 x 4 transposition of a..d (each 4 floats): lane k of out[i] = element i of the k-th input.
inline void Transpose4(__m128 a, __m128 b, __m128 c, __m128 d, __m128* out) {
  const __m128 t0 = _mm_unpacklo_ps(a, b), t1 = _mm_unpackhi_ps(a, b);
  const __m128 t2 = _mm_unpacklo_ps(c, d), t3 = _mm_unpackhi_ps(c, d);
  out[0] = _mm_movelh_ps(t0, t2);
  out[1] = _mm_movehl_ps(t2, t0);
  out[2] = _mm_movelh_ps(t1, t3);
  out[3] = _mm_movehl_ps(t3, t1);
}

// The online-softmax step of N <= 4 queries over their scores s (two
// halves each): weights into p[i], m and l updated, the rescale factors
// into c. One lane per query where a query's work reduces: the maxima
// (exact in any order), the factors in one Exp8, and the sums of the
// weights transposed so that each query's tree keeps dot.h's order.
template <int N>
void ColSoftmaxN(__m256 (*s)[2], size_t first, size_t nv, float* m, float* l, float (*p)[kT], float* c) {
  const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  const __m256i nvv = _mm256_set1_epi32(static_cast<int>(nv)), fv = _mm256_set1_epi32(static_cast<int>(first));
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256 seen[2];
  for (int h = 0; h < 2; ++h) {
    const __m256i j = _mm256_add_epi32(idx, _mm256_set1_epi32(8 * h));
    seen[h] = _mm256_castsi256_ps(_mm256_andnot_si256(_mm256_cmpgt_epi32(fv, j), _mm256_cmpgt_epi32(nvv, j)));
  }
  __m128 half[4];  // per query: the max of its 16 scores folded to 4 lanes
  for (int i = 0; i < 4; ++i) {
    if (i >= N) {
      half[i] = _mm_set1_ps(-std::numeric_limits<float>::infinity());
      continue;
    }
    for (int h = 0; h < 2; ++h) s[i][h] = _mm256_blendv_ps(ninf, s[i][h], seen[h]);
    const __m256 m8 = _mm256_max_ps(s[i][0], s[i][1]);
    half[i] = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
  }
  __m128 t[4];
  Transpose4(half[0], half[1], half[2], half[3], t);
  const __m128 tile_max = _mm_max_ps(_mm_max_ps(t[0], t[1]), _mm_max_ps(t[2], t[3]));
  alignas(16) float m_old[4] = {0, 0, 0, 0}, mx[4], cv[4];
  for (int i = 0; i < N; ++i) m_old[i] = m[i];
  const __m128 vmx = _mm_max_ps(tile_max, _mm_load_ps(m_old));  // tile_max > m ? tile_max : m
  _mm_store_ps(mx, vmx);
  _mm_store_ps(cv, _mm256_castps256_ps128(Exp8(_mm256_castps128_ps256(_mm_sub_ps(_mm_load_ps(m_old), vmx)))));
  __m128 w[4];
  for (int i = 0; i < 4; ++i) {
    if (i >= N) {
      w[i] = _mm_setzero_ps();
      continue;
    }
    const __m256 b = _mm256_set1_ps(mx[i]);
    const __m256 p0 = Exp8(_mm256_sub_ps(s[i][0], b)), p1 = Exp8(_mm256_sub_ps(s[i][1], b));
    _mm256_storeu_ps(p[i], p0);
    _mm256_storeu_ps(p[i] + 8, p1);
    const __m256 u = _mm256_add_ps(p0, p1);  // u_j = p_j + p_j+8
    w[i] = _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));  // w_j = u_j + u_j+4
  }
  Transpose4(w[0], w[1], w[2], w[3], t);
  const __m128 sum = _mm_add_ps(_mm_add_ps(t[0], t[2]), _mm_add_ps(t[1], t[3]));  // (w0 + w2) + (w1 + w3)
  alignas(16) float lv[4] = {0, 0, 0, 0}, sums[4];
  for (int i = 0; i < N; ++i) lv[i] = l[i];
  _mm_store_ps(sums, _mm_add_ps(_mm_mul_ps(_mm_load_ps(lv), _mm_load_ps(cv)), sum));
  for (int i = 0; i < N; ++i) {
    l[i] = sums[i];
    m[i] = mx[i];
    c[i] = cv[i];
  }
}

// acc_i[d] = acc_i[d] * c_i, then the fused chain over the 16 positions of
// p_i[j] * v[j][d], for N queries of one K/V head: each V load (widened as
// it is read) shared.
template <int N, KvDtype T>
void ColAccum(const float (*p)[kT], const float* c, const HeadRows<T>& v, size_t head_dim, float* acc) {
  size_t d = 0;
  for (; d + 16 <= head_dim; d += 16) {
    __m256 x[N][2];
    for (int i = 0; i < N; ++i) {
      x[i][0] = _mm256_mul_ps(_mm256_loadu_ps(acc + i * head_dim + d), _mm256_set1_ps(c[i]));
      x[i][1] = _mm256_mul_ps(_mm256_loadu_ps(acc + i * head_dim + d + 8), _mm256_set1_ps(c[i]));
    }
    for (int j = 0; j < kT; ++j) {
      __m256 v0, v1;
      v.Hex(j, d, &v0, &v1);
      for (int i = 0; i < N; ++i) {
        const __m256 pj = _mm256_broadcast_ss(p[i] + j);
        x[i][0] = _mm256_fmadd_ps(pj, v0, x[i][0]);
        x[i][1] = _mm256_fmadd_ps(pj, v1, x[i][1]);
      }
    }
    for (int i = 0; i < N; ++i) {
      _mm256_storeu_ps(acc + i * head_dim + d, x[i][0]);
      _mm256_storeu_ps(acc + i * head_dim + d + 8, x[i][1]);
    }
  }
  for (; d < head_dim; ++d) {
    for (int i = 0; i < N; ++i) {
      float a = acc[i * head_dim + d] * c[i];
      for (int j = 0; j < kT; ++j) {
        a = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(p[i][j]), _mm_set_ss(v.Elem(j, d)), _mm_set_ss(a)));
      }
      acc[i * head_dim + d] = a;
    }
  }
}

// N consecutive queries of one K/V head (kt: its K transposed, as floats
// or for 8-bit K as kt8 and ksc (TransposeTileQ8); v: its rows).
template <int N, KvDtype T>
void ColQueries(const float* q, const QueryQ8& q8, const float* kt, const HeadRows<T>& v, size_t head_dim, size_t first,
                size_t nv, float* m, float* l, float* acc) {
  __m256 s[N][2];
  if constexpr (T == KvDtype::kQ8_0) {
    const int32_t* kt8 = reinterpret_cast<const int32_t*>(kt);
    const float* ksc = kt + 4 * head_dim;
    const size_t nb = head_dim / kKvQ8Block;
    for (int i = 0; i < N; i += 2) {
      const QueryQ8 qi{q8.qs + static_cast<size_t>(i) * head_dim, q8.d + static_cast<size_t>(i) * nb,
                       q8.sum + static_cast<size_t>(i) * nb};
      if (N - i >= 2) ColScoresQ8<2>(qi, kt8, ksc, head_dim, s + i);
      else ColScoresQ8<1>(qi, kt8, ksc, head_dim, s + i);
    }
  } else {
    ColScores<N>(q, kt, head_dim, s);
  }
  alignas(32) float p[N][kT];
  float c[N];
  ColSoftmaxN<N>(s, first, nv, m, l, p, c);
  ColAccum<N, T>(p, c, v, head_dim, acc);
}

template <KvDtype T>
void AttendColsOf(const float* q, const QueryQ8& q8, size_t nq, size_t group, const KvTile& kv, size_t head_dim,
                  size_t first, size_t nv, float* kt, float* m, float* l, float* acc) {
  const size_t heads = (nq + group - 1) / group, nb = head_dim / kKvQ8Block;
  for (size_t g = 0; g < heads; ++g) {
    const HeadRows<T> kr(kv.k, g * kv.head_bytes), vr(kv.v, g * kv.head_bytes);
    if constexpr (T == KvDtype::kQ8_0) TransposeTileQ8(kr, head_dim, reinterpret_cast<int32_t*>(kt), kt + 4 * head_dim);
    else TransposeTile(kr, head_dim, kt);
    const size_t end = std::min(nq, (g + 1) * group);
    for (size_t i = g * group; i < end;) {
      const size_t n = std::min<size_t>(end - i, 4);
      const float* qi = q + i * head_dim;
      QueryQ8 q8i;
      if constexpr (T == KvDtype::kQ8_0) q8i = {q8.qs + i * head_dim, q8.d + i * nb, q8.sum + i * nb};
      float* ai = acc + i * head_dim;
      switch (n) {
        case 1: ColQueries<1, T>(qi, q8i, kt, vr, head_dim, first, nv, m + i, l + i, ai); break;
        case 2: ColQueries<2, T>(qi, q8i, kt, vr, head_dim, first, nv, m + i, l + i, ai); break;
        case 3: ColQueries<3, T>(qi, q8i, kt, vr, head_dim, first, nv, m + i, l + i, ai); break;
        default: ColQueries<4, T>(qi, q8i, kt, vr, head_dim, first, nv, m + i, l + i, ai); break;
      }
      i += n;
    }
  }
}

// Each group's scores (scores(group, sbuf)), then its softmax step and V.
template <class Scores>
void LanesWith(const LaneGroup* groups, size_t n, const float* v, size_t head_dim, Scores scores) {
  alignas(32) float sbuf[kT][kT];  // scores, then weights: [position][lane]
  for (size_t i = 0; i < n; ++i) {
    const LaneGroup& g = groups[i];
    scores(g, sbuf);
    const __m256 c[2] = {LaneSoftmax(g, 0, sbuf), LaneSoftmax(g, 1, sbuf)};
    LaneAccum(g, sbuf, c, v, head_dim);
  }
}

// The table entries (dot.h), exported under each level's name by the
// including file.
void AttendLanesImpl(const LaneGroup* groups, size_t n, const float* k, const float* v, size_t head_dim) {
  LanesWith(groups, n, v, head_dim, [&](const LaneGroup& g, float (*sbuf)[kT]) { LaneScores(g, k, head_dim, sbuf); });
}

void AttendColsImpl(const float* q, const QueryQ8& q8, size_t nq, size_t group, const KvTile& kv, size_t head_dim,
                     size_t first, size_t nv, float* scratch, float* m, float* l, float* acc) {
  switch (kv.dtype) {
    case KvDtype::kF32: AttendColsOf<KvDtype::kF32>(q, q8, nq, group, kv, head_dim, first, nv, scratch, m, l, acc); break;
    case KvDtype::kF16: AttendColsOf<KvDtype::kF16>(q, q8, nq, group, kv, head_dim, first, nv, scratch, m, l, acc); break;
    case KvDtype::kQ8_0:
      AttendColsOf<KvDtype::kQ8_0>(q, q8, nq, group, kv, head_dim, first, nv, scratch, m, l, acc);
      break;
  }
}

void AttendLanesQ8Impl(const LaneGroup* groups, size_t n, const uint8_t* const* krows, const float* v, size_t head_dim) {
  LanesWith(groups, n, v, head_dim,
            [&](const LaneGroup& g, float (*sbuf)[kT]) { LaneScoresQ8(g, krows, head_dim, sbuf); });
}

}  // namespace
}  // namespace pc
