// The tile kernels (attention tiles, exp sums, quantized matmul tiles) of
// every SIMD table against the scalar table over many sizes and misaligned
// inputs, and the attention kernels' invariance: a row's bits do not depend
// on its batch or on how spans were split across threads.
#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <tuple>

#include "base/fp16.h"
#include "kernels/attention.h"
#include "kernels/dot.h"
#include "kernels/ggml_compat.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "runtime/thread_pool.h"
#include "test_support.h"

namespace pc {
namespace {

using test::RandomFloats;

std::vector<const DotKernels*> SimdTables() {
  std::vector<const DotKernels*> out;
  if (IsaSupported(Isa::kAvx2) && Avx2DotKernels() != nullptr) out.push_back(Avx2DotKernels());
  if (IsaSupported(Isa::kAvxVnni) && AvxVnniDotKernels() != nullptr) out.push_back(AvxVnniDotKernels());
  if (IsaSupported(Isa::kAvx512) && Avx512DotKernels() != nullptr) out.push_back(Avx512DotKernels());
  return out;
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// F32 K/V tiles laid out [heads][16][head_dim] as attend_cols' rows: row j
// at k + j * head_dim, head g head_bytes = 16 * head_dim floats further.
KvTile HeadMajorTile(const float* k, const float* v, size_t head_dim) {
  KvTile t;
  for (size_t j = 0; j < kLaneTile; ++j) {
    t.k[j] = reinterpret_cast<const uint8_t*>(k + j * head_dim);
    t.v[j] = reinterpret_cast<const uint8_t*>(v + j * head_dim);
  }
  t.head_bytes = kLaneTile * head_dim * sizeof(float);
  t.dtype = KvDtype::kF32;
  return t;
}

// The lane kernels of every table that has them (the scalar twin included):
// 16 queries of one K/V head in lanes (attend_lanes), and the same queries
// one row at a time with K transposed (attend_cols), both against the
// scalar attend_lanes, bit for bit, over head sizes, visible ranges [first,
// nv) (empty ones leave a lane untouched; first > 0 is a window's start) and
// running states that do and do not rescale.
TEST(TileKernels, LaneAndColumnAttentionEqualTheScalarTwinBitForBit) {
  const DotKernels& ref = ScalarDotKernels();
  ASSERT_NE(ref.attend_lanes, nullptr);
  std::vector<const DotKernels*> tables{&ref};
  for (const DotKernels* k : SimdTables()) {
    if (k->attend_lanes != nullptr) tables.push_back(k);
  }
  EXPECT_EQ(tables.size(), SimdTables().size() + 1) << "every SIMD table has lane kernels";
  const size_t group = 4;  // queries per K/V head in the column calls
  for (size_t hd : {1u, 3u, 8u, 16u, 24u, 40u, 64u, 72u, 128u, 136u}) {
    const auto k = RandomFloats(kLaneTile * hd, 20, 2.0f), v = RandomFloats(kLaneTile * hd, 21);
    const auto q = RandomFloats(kLaneTile * hd, 22);  // q[i * hd + d]
    std::vector<float> qt(kLaneTile * hd);
    for (size_t i = 0; i < kLaneTile; ++i) {
      for (size_t d = 0; d < hd; ++d) qt[d * kLaneTile + i] = q[i * hd + d];
    }
    int32_t nv[kLaneTile], first[kLaneTile];
    for (size_t i = 0; i < kLaneTile; ++i) {
      nv[i] = static_cast<int32_t>((i * 5 + hd) % 17);  // 0..16
      first[i] = i % 3 == 0 ? static_cast<int32_t>((i * 7 + hd) % 13) : 0;  // some past nv: empty
    }
    nv[3] = 16;
    for (float old_max : {-std::numeric_limits<float>::infinity(), -3.0f, 40.0f}) {
      const auto acc0 = RandomFloats(kLaneTile * hd, 23);
      std::vector<float> m0(kLaneTile, old_max), l0(kLaneTile, std::isinf(old_max) ? 0.0f : 2.5f);
      std::vector<float> want_acct = acc0, want_m = m0, want_l = l0;
      if (std::isinf(old_max)) std::fill(want_acct.begin(), want_acct.end(), 0.0f);
      const std::vector<float> start_acct = want_acct;
      const LaneGroup want{qt.data(), first, nv, want_m.data(), want_l.data(), want_acct.data()};
      ref.attend_lanes(&want, 1, k.data(), v.data(), hd);
      for (const DotKernels* t : tables) {
        // Several groups in one call (taken in pairs or threes): group x holds the
        // queries with its lanes rotated by 5x, and must give what the scalar
        // twin gives for that group alone.
        for (size_t n_groups : {1u, 2u, 3u, 4u, 5u, 6u, 7u}) {
          struct Group {
            std::vector<float> qt, m, l, acct;
            std::vector<int32_t> first, nv;
            LaneGroup View() { return {qt.data(), first.data(), nv.data(), m.data(), l.data(), acct.data()}; }
          };
          std::vector<Group> got(n_groups), want_x(n_groups);
          for (size_t x = 0; x < n_groups; ++x) {
            Group& gx = got[x];
            gx.qt.resize(qt.size());
            gx.acct.resize(start_acct.size());
            gx.m.resize(kLaneTile);
            gx.l.resize(kLaneTile);
            gx.nv.resize(kLaneTile);
            gx.first.resize(kLaneTile);
            for (size_t i = 0; i < kLaneTile; ++i) {
              const size_t src = (i + 5 * x) % kLaneTile;
              for (size_t d = 0; d < hd; ++d) {
                gx.qt[d * kLaneTile + i] = qt[d * kLaneTile + src];
                gx.acct[d * kLaneTile + i] = start_acct[d * kLaneTile + src];
              }
              gx.m[i] = m0[src];
              gx.l[i] = l0[src];
              gx.nv[i] = nv[src];
              gx.first[i] = first[src];
            }
            want_x[x] = gx;
            const LaneGroup one = want_x[x].View();
            ref.attend_lanes(&one, 1, k.data(), v.data(), hd);
          }
          std::vector<LaneGroup> views;
          for (Group& gx : got) views.push_back(gx.View());
          t->attend_lanes(views.data(), n_groups, k.data(), v.data(), hd);
          for (size_t x = 0; x < n_groups; ++x) {
            for (size_t i = 0; i < kLaneTile; ++i) {
              ASSERT_TRUE(SameBits(got[x].m[i], want_x[x].m[i]) && SameBits(got[x].l[i], want_x[x].l[i]))
                  << t->name << " hd=" << hd << " lane " << i << " group " << x << " of " << n_groups;
            }
            for (size_t e = 0; e < got[x].acct.size(); ++e) {
              ASSERT_TRUE(SameBits(got[x].acct[e], want_x[x].acct[e])) << t->name << " hd=" << hd << " group " << x;
            }
          }
          // Group 0 is the unrotated one: the scalar result computed above.
          for (size_t i = 0; i < kLaneTile; ++i) ASSERT_TRUE(SameBits(got[0].m[i], want_m[i]) && SameBits(got[0].l[i], want_l[i]));
          for (size_t e = 0; e < want_acct.size(); ++e) ASSERT_TRUE(SameBits(got[0].acct[e], want_acct[e])) << t->name;
        }
        // The column form: queries with the same visible count in one call,
        // K/V heads side by side (this tile for every head).
        std::vector<float> kk, vv;
        for (size_t g = 0; g < kLaneTile / group; ++g) {
          kk.insert(kk.end(), k.begin(), k.end());
          vv.insert(vv.end(), v.begin(), v.end());
        }
        std::vector<float> scratch(2 * kk.size());
        for (size_t i = 0; i < kLaneTile; ++i) {
          if (nv[i] <= first[i]) continue;
          std::vector<float> acc(hd);
          for (size_t d = 0; d < hd; ++d) acc[d] = start_acct[d * kLaneTile + i];
          float mi = m0[i], li = l0[i];
          // Query i alone, as query i % group of a call whose other queries
          // are copies of it: its K/V head is (i % group) / group = 0.
          std::vector<float> qs(group * hd), accs(group * hd), ms(group, mi), ls(group, li);
          for (size_t c = 0; c < group; ++c) {
            std::copy(q.begin() + i * hd, q.begin() + (i + 1) * hd, qs.begin() + c * hd);
            std::copy(acc.begin(), acc.end(), accs.begin() + c * hd);
          }
          t->attend_cols(qs.data(), QueryQ8{}, group, group, HeadMajorTile(kk.data(), vv.data(), hd), hd, static_cast<size_t>(first[i]),
                         static_cast<size_t>(nv[i]), scratch.data(), ms.data(), ls.data(), accs.data());
          for (size_t c = 0; c < group; ++c) {
            ASSERT_TRUE(SameBits(ms[c], want_m[i]) && SameBits(ls[c], want_l[i])) << t->name << " cols hd=" << hd;
            for (size_t d = 0; d < hd; ++d) {
              ASSERT_TRUE(SameBits(accs[c * hd + d], want_acct[d * kLaneTile + i])) << t->name << " cols hd=" << hd;
            }
          }
        }
      }
      // Lanes with nothing visible keep their state.
      for (size_t i = 0; i < kLaneTile; ++i) {
        if (nv[i] > first[i]) continue;
        EXPECT_TRUE(SameBits(want_m[i], m0[i]) && SameBits(want_l[i], l0[i]));
        for (size_t d = 0; d < hd; ++d) EXPECT_TRUE(SameBits(want_acct[d * kLaneTile + i], start_acct[d * kLaneTile + i]));
      }
    }
  }
}

// The lane kernels' softmax against the plain definition (double precision)
// for one query over one tile from an empty state.
TEST(TileKernels, LaneAttentionComputesTheSoftmaxAverage) {
  const size_t hd = 24;
  const auto k = RandomFloats(kLaneTile * hd, 30, 2.0f), v = RandomFloats(kLaneTile * hd, 31), q = RandomFloats(hd, 32);
  for (const DotKernels* t : {&ScalarDotKernels(), &ActiveDotKernels()}) {
    if (t->attend_cols == nullptr) continue;
    for (auto [first, nv] : {std::pair<size_t, size_t>{0, 1}, {0, 7}, {0, 16}, {5, 16}, {3, 9}}) {
      std::vector<float> scratch(2 * kLaneTile * hd), acc(hd, 0.0f);
      float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
      t->attend_cols(q.data(), QueryQ8{}, 1, 1, HeadMajorTile(k.data(), v.data(), hd), hd, first, nv, scratch.data(), &m, &l, acc.data());
      std::vector<double> s(nv);
      double mx = -1e300, sum = 0;
      for (size_t j = first; j < nv; ++j) {
        for (size_t d = 0; d < hd; ++d) s[j] += static_cast<double>(q[d]) * k[j * hd + d];
        mx = std::max(mx, s[j]);
      }
      for (size_t j = first; j < nv; ++j) sum += std::exp(s[j] - mx);
      EXPECT_NEAR(m, mx, 1e-5);
      EXPECT_NEAR(l, sum, 1e-5 * sum);
      for (size_t d = 0; d < hd; ++d) {
        double want = 0;
        for (size_t j = first; j < nv; ++j) want += std::exp(s[j] - mx) / sum * v[j * hd + d];
        EXPECT_NEAR(acc[d] / l, want, 1e-5) << t->name << " nv=" << nv;
      }
    }
  }
}

// A decode row's column call: every query head of a row at once (more than
// a pass's 16, several K/V heads, groups that a pass splits), against the
// scalar twin bit for bit, from running states that rescale.
TEST(TileKernels, ColumnAttentionOverManyHeadsEqualsTheScalarTwin) {
  const DotKernels& ref = ScalarDotKernels();
  for (const DotKernels* t : SimdTables()) {
    for (size_t hd : {16u, 24u, 64u, 80u, 96u, 136u, 256u}) {
      for (auto [nq, group] : {std::pair<size_t, size_t>{9, 3}, {1, 1}, {17, 17}, {20, 5}, {24, 8}, {32, 4}, {40, 1}}) {
        const size_t heads = (nq + group - 1) / group;
        const auto q = RandomFloats(nq * hd, 40), k = RandomFloats(heads * kLaneTile * hd, 41, 2.0f);
        const auto v = RandomFloats(heads * kLaneTile * hd, 42), acc0 = RandomFloats(nq * hd, 43);
        for (auto [first, nv] : {std::pair<size_t, size_t>{0, 16}, {0, 5}, {3, 12}}) {
          std::vector<float> want_acc = acc0, got_acc = acc0, want_m(nq), want_l(nq, 1.5f), got_l(nq, 1.5f);
          for (size_t i = 0; i < nq; ++i) want_m[i] = static_cast<float>(i % 5) - 2.0f;
          std::vector<float> got_m = want_m, scratch(2 * heads * kLaneTile * hd);
          const KvTile tile = HeadMajorTile(k.data(), v.data(), hd);
          ref.attend_cols(q.data(), QueryQ8{}, nq, group, tile, hd, first, nv, scratch.data(), want_m.data(), want_l.data(),
                          want_acc.data());
          t->attend_cols(q.data(), QueryQ8{}, nq, group, tile, hd, first, nv, scratch.data(), got_m.data(), got_l.data(),
                         got_acc.data());
          for (size_t i = 0; i < nq; ++i) {
            ASSERT_TRUE(SameBits(got_m[i], want_m[i]) && SameBits(got_l[i], want_l[i]))
                << t->name << " hd=" << hd << " nq=" << nq << " group=" << group << " query " << i;
          }
          for (size_t e = 0; e < got_acc.size(); ++e) {
            ASSERT_TRUE(SameBits(got_acc[e], want_acc[e])) << t->name << " hd=" << hd << " nq=" << nq << " element " << e;
          }
        }
      }
    }
  }
}

// The column kernels read F16 rows as the cache stores them (row by row,
// every K/V head side by side) and widen them as they go: every table, the
// scalar twin included, gives the bits of the same call on the rows
// widened first (f16_to_f32) and laid out head-major. (8-bit K has
// integer scores of its own: EightBitKScoresAreExactIntegerDots.)
TEST(TileKernels, ColumnAttentionReadsF16RowsAsTheirWidenedCopies) {
  const DotKernels& ref = ScalarDotKernels();
  std::vector<const DotKernels*> tables{&ref};
  for (const DotKernels* k : SimdTables()) tables.push_back(k);
  for (KvDtype dtype : {KvDtype::kF16}) {
    for (size_t hd : {32u, 40u, 64u, 96u, 128u, 256u}) {
      if (dtype == KvDtype::kQ8_0 && hd % 32 != 0) continue;
      for (auto [nq, group] : {std::pair<size_t, size_t>{9, 3}, {1, 1}, {20, 5}, {32, 4}}) {
        const size_t heads = (nq + group - 1) / group, kv_dim = heads * hd, row_bytes = KvBytes(dtype, kv_dim);
        // Raw rows (positions 0..15, 15 a padding row of zeros), then their widened head-major copies.
        std::vector<uint8_t> kraw(kLaneTile * row_bytes), vraw(kraw.size());
        const auto kf = RandomFloats(kLaneTile * kv_dim, 50, 2.0f), vf = RandomFloats(kLaneTile * kv_dim, 51);
        for (size_t j = 0; j + 1 < kLaneTile; ++j) {
          for (auto [src, dst] : {std::pair{&kf, &kraw}, {&vf, &vraw}}) {
            uint8_t* row = dst->data() + j * row_bytes;
            if (dtype == KvDtype::kF16) {
              for (size_t e = 0; e < kv_dim; ++e) reinterpret_cast<uint16_t*>(row)[e] = Fp32ToFp16((*src)[j * kv_dim + e]);
            } else {
              QuantizeRowQ8_0(src->data() + j * kv_dim, reinterpret_cast<BlockQ8_0*>(row), kv_dim);
            }
          }
        }
        std::vector<float> kw(heads * kLaneTile * hd), vw(kw.size());
        for (size_t j = 0; j < kLaneTile; ++j) {
          for (size_t g = 0; g < heads; ++g) {
            const size_t off = KvBytes(dtype, g * hd);
            float* kd = kw.data() + (g * kLaneTile + j) * hd;
            float* vd = vw.data() + (g * kLaneTile + j) * hd;
            if (dtype == KvDtype::kF16) {
              ref.f16_to_f32(reinterpret_cast<const uint16_t*>(kraw.data() + j * row_bytes + off), kd, hd);
              ref.f16_to_f32(reinterpret_cast<const uint16_t*>(vraw.data() + j * row_bytes + off), vd, hd);
            } else {
              ref.q8_0_to_f32(kraw.data() + j * row_bytes + off, kd, hd);
              ref.q8_0_to_f32(vraw.data() + j * row_bytes + off, vd, hd);
            }
          }
        }
        KvTile raw;
        for (size_t j = 0; j < kLaneTile; ++j) raw.k[j] = kraw.data() + j * row_bytes, raw.v[j] = vraw.data() + j * row_bytes;
        raw.head_bytes = KvBytes(dtype, hd);
        raw.dtype = dtype;
        const auto q = RandomFloats(nq * hd, 52), acc0 = RandomFloats(nq * hd, 53);
        for (auto [first, nv] : {std::pair<size_t, size_t>{0, 16}, {0, 5}, {3, 12}}) {
          std::vector<float> want_acc = acc0, want_m(nq), want_l(nq, 1.5f), scratch(2 * heads * kLaneTile * hd);
          for (size_t i = 0; i < nq; ++i) want_m[i] = static_cast<float>(i % 5) - 2.0f;
          const std::vector<float> m0 = want_m;
          ref.attend_cols(q.data(), QueryQ8{}, nq, group, HeadMajorTile(kw.data(), vw.data(), hd), hd, first, nv, scratch.data(),
                          want_m.data(), want_l.data(), want_acc.data());
          for (const DotKernels* t : tables) {
            std::vector<float> got_acc = acc0, got_m = m0, got_l(nq, 1.5f);
            t->attend_cols(q.data(), QueryQ8{}, nq, group, raw, hd, first, nv, scratch.data(), got_m.data(), got_l.data(),
                           got_acc.data());
            for (size_t i = 0; i < nq; ++i) {
              ASSERT_TRUE(SameBits(got_m[i], want_m[i]) && SameBits(got_l[i], want_l[i]))
                  << t->name << " " << KvDtypeName(dtype) << " hd=" << hd << " nq=" << nq << " query " << i;
            }
            for (size_t e = 0; e < got_acc.size(); ++e) {
              ASSERT_TRUE(SameBits(got_acc[e], want_acc[e])) << t->name << " " << KvDtypeName(dtype) << " hd=" << hd
                                                             << " nq=" << nq << " element " << e;
            }
          }
        }
      }
    }
  }
}

// 8-bit K/V rows of `heads` K/V heads for a tile (position 15 a zero row,
// as past a tile's end), Q8_0 as the cache stores them.
struct Q8Tile {
  size_t row_bytes;
  std::vector<uint8_t> k, v;
  std::vector<float> kw, vw;  // widened, [position][heads * head_dim]
  Q8Tile(size_t heads, size_t hd, uint64_t seed) : row_bytes(KvBytes(KvDtype::kQ8_0, heads * hd)) {
    const size_t dim = heads * hd;
    k.assign(kLaneTile * row_bytes, 0);
    v.assign(k.size(), 0);
    const auto kf = RandomFloats(kLaneTile * dim, seed, 2.0f), vf = RandomFloats(kLaneTile * dim, seed + 1);
    for (size_t j = 0; j + 1 < kLaneTile; ++j) {
      QuantizeRowQ8_0(kf.data() + j * dim, reinterpret_cast<BlockQ8_0*>(k.data() + j * row_bytes), dim);
      QuantizeRowQ8_0(vf.data() + j * dim, reinterpret_cast<BlockQ8_0*>(v.data() + j * row_bytes), dim);
    }
    // Bytes our quantizer never writes but a tier or file may hand back
    // (-128): row 3's first K block all of it, row 7's K bytes alternating
    // -128 and 127 (the kernels' byte products must stay exact for them).
    auto* r3 = reinterpret_cast<BlockQ8_0*>(k.data() + 3 * row_bytes);
    std::fill(std::begin(r3->qs), std::end(r3->qs), int8_t{-128});
    auto* r7 = reinterpret_cast<BlockQ8_0*>(k.data() + 7 * row_bytes);
    for (size_t b = 0; b < dim / 32; ++b) {
      for (size_t e = 0; e < 32; ++e) r7[b].qs[e] = static_cast<int8_t>(e % 2 == 0 ? -128 : 127);
    }
    kw.resize(kLaneTile * dim);
    vw.resize(kw.size());
    for (size_t j = 0; j < kLaneTile; ++j) {
      ScalarDotKernels().q8_0_to_f32(k.data() + j * row_bytes, kw.data() + j * dim, dim);
      ScalarDotKernels().q8_0_to_f32(v.data() + j * row_bytes, vw.data() + j * dim, dim);
    }
  }
  KvTile Tile(size_t hd) const {
    KvTile t;
    for (size_t j = 0; j < kLaneTile; ++j) t.k[j] = k.data() + j * row_bytes, t.v[j] = v.data() + j * row_bytes;
    t.head_bytes = KvBytes(KvDtype::kQ8_0, hd);
    t.dtype = KvDtype::kQ8_0;
    return t;
  }
};

// Queries quantized as QueryQ8 holds them (dot.h).
struct Q8Queries {
  std::vector<int8_t> qs;
  std::vector<float> d;
  std::vector<int32_t> sum;
  Q8Queries(const std::vector<float>& q, size_t hd) {
    const size_t nq = q.size() / hd, nb = hd / 32;
    std::vector<BlockQ8_0> b(nq * nb);
    ScalarDotKernels().quantize_q8_0(q.data(), b.data(), q.size());
    for (size_t i = 0; i < nq * nb; ++i) {
      d.push_back(Fp16ToFp32(b[i].d));
      int32_t total = 0;
      for (int8_t x : b[i].qs) qs.push_back(x), total += x;
      sum.push_back(total);
    }
  }
  QueryQ8 At(size_t i, size_t hd) const { return {qs.data() + i * hd, d.data() + i * (hd / 32), sum.data() + i * (hd / 32)}; }
};

// 8-bit K: a score is the exact integer dot of the query's and the row's
// bytes per block, scaled by both scales and chained over the blocks
// (dot.h's QueryQ8). From an empty state a call's m is the largest visible
// score, so each kernel's scores are checked exactly against that
// definition computed here; the rest against the double-precision softmax
// average; and every table's column and lane kernels give the scalar
// twin's bits (so a prefill's rows equal a decode's).
TEST(TileKernels, EightBitKScoresAreExactIntegerDots) {
  const DotKernels& ref = ScalarDotKernels();
  std::vector<const DotKernels*> tables{&ref};
  for (const DotKernels* k : SimdTables()) tables.push_back(k);
  for (size_t hd : {32u, 64u, 96u, 128u, 256u}) {
    for (auto [nq, group] : {std::pair<size_t, size_t>{9, 3}, {1, 1}, {20, 5}, {32, 4}, {16, 16}}) {
      const size_t heads = (nq + group - 1) / group, nb = hd / 32, per_head = group;
      const Q8Tile tile(heads, hd, 60 + hd);
      auto q = RandomFloats(nq * hd, 62);
      // Query 0's first pair at the block's largest magnitude (bytes 127),
      // against row 3's -128s: a pair of products at its bound.
      q[0] = q[1] = 4.0f;
      const Q8Queries q8(q, hd);
      // The definition: score of query i and row j.
      auto score = [&](size_t i, size_t j) {
        const uint8_t* row = tile.k.data() + j * tile.row_bytes + KvBytes(KvDtype::kQ8_0, i / per_head * hd);
        float s = 0;
        for (size_t b = 0; b < nb; ++b) {
          const auto* blk = reinterpret_cast<const BlockQ8_0*>(row + b * 34);
          int32_t dot = 0;
          for (size_t e = 0; e < 32; ++e) dot += int32_t{q8.qs[i * hd + b * 32 + e]} * blk->qs[e];
          s = std::fma(static_cast<float>(dot), q8.d[i * nb + b] * Fp16ToFp32(blk->d), s);
        }
        return s;
      };
      for (auto [first, nv] : {std::pair<size_t, size_t>{0, 16}, {0, 5}, {3, 12}}) {
        const float ninf = -std::numeric_limits<float>::infinity();
        std::vector<float> want_m(nq, ninf), want_l(nq, 0.0f), want_acc(nq * hd, 0.0f), scratch(2 * heads * kLaneTile * hd);
        const QueryQ8 all{q8.qs.data(), q8.d.data(), q8.sum.data()};
        ref.attend_cols(q.data(), all, nq, group, tile.Tile(hd), hd, first, nv, scratch.data(), want_m.data(),
                        want_l.data(), want_acc.data());
        for (size_t i = 0; i < nq; ++i) {
          float mx = ninf;
          std::vector<double> s(nv);
          for (size_t j = first; j < nv; ++j) mx = std::max(mx, score(i, j)), s[j] = score(i, j);
          ASSERT_TRUE(SameBits(want_m[i], mx)) << "hd=" << hd << " query " << i << ": " << want_m[i] << " vs " << mx;
          double sum = 0;
          for (size_t j = first; j < nv; ++j) sum += std::exp(s[j] - mx);
          ASSERT_NEAR(want_l[i], sum, 1e-5 * sum);
          for (size_t d = 0; d < hd; ++d) {
            double avg = 0;
            const size_t col = i / group * hd + d;
            for (size_t j = first; j < nv; ++j) avg += std::exp(s[j] - mx) * tile.vw[j * heads * hd + col];
            ASSERT_NEAR(want_acc[i * hd + d], avg, 1e-4 * (1 + std::fabs(avg)));
          }
        }
        for (const DotKernels* t : tables) {
          std::vector<float> got_acc = RandomFloats(nq * hd, 63), got_m(nq), got_l(nq, 1.5f);
          for (size_t i = 0; i < nq; ++i) got_m[i] = static_cast<float>(i % 5) - 2.0f;  // states that rescale
          std::vector<float> ref_acc = got_acc, ref_m = got_m, ref_l = got_l;
          ref.attend_cols(q.data(), all, nq, group, tile.Tile(hd), hd, first, nv, scratch.data(), ref_m.data(),
                          ref_l.data(), ref_acc.data());
          t->attend_cols(q.data(), all, nq, group, tile.Tile(hd), hd, first, nv, scratch.data(), got_m.data(),
                         got_l.data(), got_acc.data());
          for (size_t i = 0; i < nq; ++i) {
            ASSERT_TRUE(SameBits(got_m[i], ref_m[i]) && SameBits(got_l[i], ref_l[i]))
                << t->name << " hd=" << hd << " nq=" << nq << " query " << i;
          }
          for (size_t e = 0; e < got_acc.size(); ++e) {
            ASSERT_TRUE(SameBits(got_acc[e], ref_acc[e])) << t->name << " hd=" << hd << " nq=" << nq << " element " << e;
          }
          // The lane form: each K/V head's queries in lanes (two groups a
          // call where there are two), V widened; the column results' bits.
          for (size_t g = 0; g < heads; ++g) {
            const size_t lo = g * group, n = std::min(nq, lo + group) - lo;
            std::vector<int32_t> qt8(kLaneTile * hd / 4, 0), qsum(kLaneTile * nb, 0), fv(kLaneTile, 0), nvv(kLaneTile, 0);
            std::vector<float> qd(kLaneTile * nb, 0.0f), acct(kLaneTile * hd, 0.0f), m(kLaneTile, ninf), l(kLaneTile, 0.0f);
            for (size_t i = 0; i < n && i < kLaneTile; ++i) {
              for (size_t w = 0; w < hd / 4; ++w) std::memcpy(&qt8[w * kLaneTile + i], &q8.qs[(lo + i) * hd + 4 * w], 4);
              for (size_t b = 0; b < nb; ++b) qd[b * kLaneTile + i] = q8.d[(lo + i) * nb + b], qsum[b * kLaneTile + i] = q8.sum[(lo + i) * nb + b];
              fv[i] = static_cast<int32_t>(first), nvv[i] = static_cast<int32_t>(nv);
            }
            LaneGroup lg{nullptr, fv.data(), nvv.data(), m.data(), l.data(), acct.data(), qt8.data(), qd.data(), qsum.data()};
            LaneGroup pair[2] = {lg, lg};
            std::vector<float> acct2 = acct, m2 = m, l2 = l;
            pair[1].acct = acct2.data(), pair[1].m = m2.data(), pair[1].l = l2.data();
            const uint8_t* krows[kLaneTile];
            std::vector<float> vh(kLaneTile * hd);
            for (size_t j = 0; j < kLaneTile; ++j) {
              krows[j] = tile.Tile(hd).k[j] + g * tile.Tile(hd).head_bytes;
              std::copy_n(tile.vw.begin() + j * heads * hd + g * hd, hd, vh.begin() + j * hd);
            }
            t->attend_lanes_q8(pair, 2, krows, vh.data(), hd);
            for (size_t i = 0; i < n && i < kLaneTile; ++i) {
              for (const auto& [mm, ll, aa] : {std::tuple{&m, &l, &acct}, {&m2, &l2, &acct2}}) {
                ASSERT_TRUE(SameBits((*mm)[i], want_m[lo + i]) && SameBits((*ll)[i], want_l[lo + i]))
                    << t->name << " lanes hd=" << hd << " query " << lo + i;
                for (size_t d = 0; d < hd; ++d) {
                  ASSERT_TRUE(SameBits((*aa)[d * kLaneTile + i], want_acc[(lo + i) * hd + d])) << t->name << " lanes hd=" << hd;
                }
              }
            }
          }
        }
      }
    }
  }
}

const size_t kHeadDims[] = {1, 3, 8, 16, 24, 40, 64, 72, 128, 136};
const size_t kCounts[] = {1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 31, 32, 33};

TEST(TileKernels, ScoresAccumAndFusedTileMatchScalar) {
  const DotKernels& ref = ScalarDotKernels();
  for (const DotKernels* k : SimdTables()) {
    for (size_t hd : kHeadDims) {
      for (size_t n : kCounts) {
        const size_t off = (hd + n) % 3;  // misaligned by whole floats
        const auto q = RandomFloats(hd + off, 1), kt = RandomFloats(n * hd + off, 2), vt = RandomFloats(n * hd + off, 3);
        std::vector<float> s1(n), s2(n);
        k->tile_scores(q.data() + off, kt.data() + off, hd, n, s1.data());
        ref.tile_scores(q.data() + off, kt.data() + off, hd, n, s2.data());
        for (size_t j = 0; j < n; ++j) EXPECT_NEAR(s1[j], s2[j], 1e-5 * (hd + 1)) << "scores hd=" << hd << " n=" << n;
        auto a1 = RandomFloats(hd + off, 4), a2 = a1;
        const auto p = RandomFloats(n, 5);
        k->tile_accum(p.data(), vt.data() + off, hd, n, a1.data() + off);
        ref.tile_accum(p.data(), vt.data() + off, hd, n, a2.data() + off);
        for (size_t d = 0; d < hd + off; ++d) EXPECT_NEAR(a1[d], a2[d], 1e-5 * (n + 1)) << "accum hd=" << hd << " n=" << n;
        // The fused step from a running state, once with a larger old max
        // (no rescale) and once with a smaller one (rescale).
        for (float old_max : {-1.0f, 50.0f}) {
          std::vector<float> acc1 = RandomFloats(hd, 6), acc2 = acc1, t1(n), t2(n);
          float m1 = old_max, m2 = old_max, l1 = 2.5f, l2 = 2.5f;
          k->attend_tile(q.data() + off, kt.data() + off, vt.data() + off, hd, n, t1.data(), &m1, &l1, acc1.data());
          ref.attend_tile(q.data() + off, kt.data() + off, vt.data() + off, hd, n, t2.data(), &m2, &l2, acc2.data());
          EXPECT_NEAR(m1, m2, 1e-5 * (hd + 1));
          EXPECT_NEAR(l1, l2, 1e-4 * l2) << "attend_tile hd=" << hd << " n=" << n;
          for (size_t d = 0; d < hd; ++d) EXPECT_NEAR(acc1[d], acc2[d], 1e-4 * (1 + std::fabs(acc2[d])));
        }
      }
    }
  }
}

TEST(TileKernels, ExpSumAndHalfConversionMatchScalar) {
  const DotKernels& ref = ScalarDotKernels();
  for (const DotKernels* k : SimdTables()) {
    for (size_t n : {0u, 1u, 7u, 8u, 9u, 16u, 33u, 100u}) {
      auto x1 = RandomFloats(n + 1, 7, 20.0f), x2 = x1;  // exponents down to -100: underflow to 0
      const float m = 30.0f;
      const float sum1 = k->exp_sum(x1.data() + 1, n, m), sum2 = ref.exp_sum(x2.data() + 1, n, m);
      EXPECT_NEAR(sum1, sum2, 1e-6 * (1 + sum2)) << "n=" << n;
      for (size_t j = 1; j <= n; ++j) EXPECT_NEAR(x1[j], x2[j], 2e-7 * (1 + x2[j]));
      std::vector<uint16_t> h(n + 1);
      for (size_t i = 0; i <= n; ++i) h[i] = static_cast<uint16_t>(i * 2654435761u >> 16);  // every exponent
      std::vector<float> f1(n), f2(n);
      k->f16_to_f32(h.data() + 1, f1.data(), n);
      ref.f16_to_f32(h.data() + 1, f2.data(), n);
      for (size_t i = 0; i < n; ++i) {  // exact, NaN payloads aside (hardware quiets signalling NaNs)
        if (std::isnan(f2[i])) {
          EXPECT_TRUE(std::isnan(f1[i]));
        } else {
          EXPECT_EQ(std::memcmp(&f1[i], &f2[i], sizeof(float)), 0) << "half " << h[i + 1];
        }
      }
    }
  }
}

// A gated activation of each SIMD table against the scalar table's, with
// gates far out on both sides (the result tends to g and to -0) and zero.
void ExpectGateMatchesScalar(void (*DotKernels::*fn)(const float*, const float*, float*, size_t), uint32_t seed) {
  const DotKernels& ref = ScalarDotKernels();
  for (const DotKernels* k : SimdTables()) {
    for (size_t n : {0u, 1u, 7u, 8u, 9u, 15u, 16u, 17u, 31u, 100u, 1536u}) {
      auto g = RandomFloats(n + 1, seed, 6.0f), u = RandomFloats(n + 1, seed + 1);
      if (n > 3) {
        g[1] = 100.0f;
        g[2] = -100.0f;
        g[3] = 0.0f;
      }
      std::vector<float> a(n), b(n);
      (k->*fn)(g.data() + 1, u.data() + 1, a.data(), n);
      (ref.*fn)(g.data() + 1, u.data() + 1, b.data(), n);
      for (size_t i = 0; i < n; ++i) EXPECT_NEAR(a[i], b[i], 1e-6 * (1 + std::fabs(b[i]))) << "n=" << n << " i=" << i;
    }
  }
}

TEST(TileKernels, SiluMulMatchesScalar) { ExpectGateMatchesScalar(&DotKernels::silu_mul, 15); }

// Every SIMD table's gated activations take the same operations per lane
// (ExpLane's, one division, one product), whatever their width and tail
// handling: the same bits as the first SIMD table's (AVX2) at sizes 1-70.
TEST(TileKernels, GatedActivationsHaveTheSameBitsAtEveryLevel) {
  const std::vector<const DotKernels*> tables = SimdTables();
  if (tables.size() < 2) GTEST_SKIP() << "fewer than two SIMD levels on this CPU";
  for (auto fn : {&DotKernels::silu_mul, &DotKernels::gelu_mul}) {
    for (size_t n = 1; n <= 70; ++n) {  // n = 0 (nothing written): SiluMulMatchesScalar
      auto g = RandomFloats(n + 1, 31 + static_cast<uint32_t>(n), 12.0f), u = RandomFloats(n + 1, 7);
      if (n > 3) {
        g[1] = 100.0f;
        g[2] = -100.0f;
        g[3] = 0.0f;
      }
      std::vector<float> want(n);
      (tables[0]->*fn)(g.data() + 1, u.data() + 1, want.data(), n);
      for (const DotKernels* k : tables) {
        std::vector<float> got(n, 1.0f);
        (k->*fn)(g.data() + 1, u.data() + 1, got.data(), n);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), n * sizeof(float))) << k->name << " n=" << n;
      }
    }
  }
}

// GeGLU's tanh GELU in the sigmoid form, against the scalar tanh form.
TEST(TileKernels, GeluMulMatchesScalar) { ExpectGateMatchesScalar(&DotKernels::gelu_mul, 17); }

TEST(TileKernels, ActivationQuantizerIsBitExact) {
  for (const DotKernels* k : SimdTables()) {
    for (size_t nb : {0u, 1u, 2u, 7u, 18u}) {
      auto x = RandomFloats(nb * kQuantBlock + 1, 14, 3.0f);
      for (size_t i = 1; i < x.size(); i += 11) x[i] = std::round(x[i] * 2) / 2;  // ties at the grid
      if (nb > 1) std::fill(x.begin() + 1, x.begin() + 1 + kQuantBlock, 0.0f);  // an all-zero block
      if (nb > 2) {  // max 127: scale 1, so k + 0.5 are exact ties (even wins)
        for (size_t i = 0; i < kQuantBlock; ++i) x[1 + 2 * kQuantBlock + i] = static_cast<float>(i % 9) - 4.5f;
        x[1 + 2 * kQuantBlock] = 127.0f;
      }
      std::vector<BlockQ8_0> a(nb + 1), b(nb + 1);  // never empty: memcmp takes no null pointers
      k->quantize_q8_0(x.data() + 1, a.data(), nb * kQuantBlock);
      GgmlQuantizeRowQ8_0(x.data() + 1, b.data(), nb * kQuantBlock);
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), nb * sizeof(BlockQ8_0))) << "blocks " << nb;
    }
  }
}

// The register-tiled float matmul gives, for every output, exactly the bits
// of that table's single dot (so a batch's tiling never changes a token's
// result), and agrees with the scalar table.
TEST(TileKernels, FloatMatmulTilesEqualTheirDotsAndMatchScalar) {
  for (const DotKernels* k : SimdTables()) {
    for (TensorType wt : {TensorType::kF32, TensorType::kF16, TensorType::kBF16}) {
      for (size_t rows : {1u, 3u, 4u, 5u, 17u}) {
        for (size_t n_tok : {1u, 2u, 3u, 5u}) {
          const size_t cols = 85 + rows, wb = RowBytes(wt, cols), xb = RowBytes(wt, cols);
          const auto wf = RandomFloats(rows * cols, 8), xf = RandomFloats(n_tok * cols, 9, 2.0f);
          std::vector<uint8_t> w(rows * wb + 4), x(n_tok * xb + 4);
          // Rows off vector boundaries, at the element's natural alignment.
          const size_t off = wt == TensorType::kF32 ? 4 : 2;
          for (size_t r = 0; r < rows; ++r) QuantizeRow(wt, wf.data() + r * cols, w.data() + off + r * wb, cols);
          for (size_t t = 0; t < n_tok; ++t) QuantizeRow(wt, xf.data() + t * cols, x.data() + off + t * xb, cols);
          const WeightMatrix m{wt, w.data() + off, rows, cols};
          std::vector<float> y(n_tok * rows);
          MatMulRows(*k, nullptr, m, x.data() + off, xb, n_tok, y.data(), rows, 0, rows);
          for (size_t t = 0; t < n_tok; ++t) {
            for (size_t r = 0; r < rows; ++r) {
              const void* wr = w.data() + off + r * wb;
              const void* xt = x.data() + off + t * xb;
              const float dot = DotRow(*k, wt, wr, xt, cols), scalar = DotRow(ScalarDotKernels(), wt, wr, xt, cols);
              EXPECT_EQ(y[t * rows + r], dot) << TensorTypeName(wt) << " rows=" << rows << " tokens=" << n_tok;
              EXPECT_NEAR(dot, scalar, 1e-4 * (1 + std::fabs(scalar)));
            }
          }
        }
      }
    }
  }
}

// A sequence of n_pos positions in scattered blocks; F16 K/V.
struct PagedKv {
  size_t n_head = 6, n_kv = 2, hd = 16, block = 16;
  std::vector<int32_t> table;
  std::vector<uint16_t> k, v;
  explicit PagedKv(size_t n_pos, size_t block_size = 16, size_t head_dim = 16) : hd(head_dim), block(block_size) {
    const size_t blocks = (n_pos + block - 1) / block;
    for (size_t b = 0; b < blocks; ++b) table.push_back(static_cast<int32_t>((b * 7) % blocks));
    std::set<int32_t> distinct(table.begin(), table.end());
    if (distinct.size() != blocks) {  // 7 shares a factor with blocks: plain order
      for (size_t b = 0; b < blocks; ++b) table[b] = static_cast<int32_t>(blocks - 1 - b);
    }
    const auto kf = RandomFloats(blocks * block * n_kv * hd, 10), vf = RandomFloats(kf.size(), 11);
    for (size_t i = 0; i < kf.size(); ++i) {
      k.push_back(Fp32ToFp16(kf[i] * 2.0f));
      v.push_back(Fp32ToFp16(vf[i]));
    }
  }
  KvLayerView View() const { return {k.data(), v.data(), KvDtype::kF16, block, n_kv * hd, table}; }
  AttnHeads Heads() const { return {n_head, n_kv, hd}; }
};

// The block table at several block sizes: one tile per block (16), several
// tiles per block (48), tiles that span blocks (5).
class AttentionBlocks : public ::testing::TestWithParam<size_t> {};
INSTANTIATE_TEST_SUITE_P(BlockSizes, AttentionBlocks, ::testing::Values(size_t{16}, size_t{48}, size_t{5}));

TEST_P(AttentionBlocks, MatchDirectComputationAcrossSpans) {
  const size_t n_pos = 2 * kAttnSpan + 37;
  const PagedKv kv(n_pos, GetParam());
  const AttnHeads h = kv.Heads();
  const auto q = RandomFloats(h.n_head * h.head_dim, 12);
  const int32_t pos = static_cast<int32_t>(n_pos - 1);
  std::vector<float> out(q.size());
  const AttnRows rows{q.data(), q.size(), &pos, out.data(), out.size()};
  for (const DotKernels* k : {&ScalarDotKernels(), &ActiveDotKernels()}) {
    std::vector<float> scratch(AttendScratchFloats(1, h));
    AttendRows(*k, kv.View(), rows, 0, 1, h, scratch.data());
    for (size_t head = 0; head < h.n_head; ++head) {
      std::vector<float> want(h.head_dim);
      AttendHead(ScalarDotKernels(), q.data() + head * h.head_dim, kv.View(), n_pos - 1, head / h.group(), h.head_dim, want.data());
      for (size_t d = 0; d < h.head_dim; ++d) EXPECT_NEAR(out[head * h.head_dim + d], want[d], 2e-5) << k->name << " head " << head;
    }
  }
}

// With a window of 700 (longer than a span: a row's first spans see
// nothing) and sinks, too.
TEST(AttentionSpans, RowResultIsIndependentOfBatchAndOfSplitting) {
  const size_t n_pos = 3 * kAttnSpan + 5;
  const PagedKv kv(n_pos);
  const AttnHeads h = kv.Heads();
  const size_t num_rows = 16, width = h.n_head * h.head_dim;
  const auto q = RandomFloats(num_rows * width, 13);
  const auto sinks = RandomFloats(h.n_head, 14, 3.0f);
  std::vector<int32_t> pos(num_rows);
  for (size_t r = 0; r < num_rows; ++r) pos[r] = static_cast<int32_t>(n_pos - num_rows + r);
  const DotKernels& k = ActiveDotKernels();
  for (size_t window : {size_t{0}, size_t{700}}) {
    const float* sink = window == 0 ? nullptr : sinks.data();
    // All rows together on one thread.
    std::vector<float> together(num_rows * width), scratch(AttendScratchFloats(num_rows, h));
    AttendRows(k, kv.View(), {q.data(), width, pos.data(), together.data(), width, window, sink}, 0, num_rows, h,
               scratch.data());
    for (size_t r = 0; r < num_rows; r += 5) {
      // Row r alone, its spans computed separately (as split-KV threads do)
      // and merged in order.
      const size_t spans = AttnSpanCount({q.data(), width, pos.data(), nullptr, 0}, r, r + 1);
      ASSERT_GE(spans, 3u);
      std::vector<float> parts(spans * AttnStateFloats(h.n_head, h.head_dim)), alone(num_rows * width);
      const AttnRows rows{q.data(), width, pos.data(), alone.data(), width, window, sink};
      auto state = [&](size_t sp) { return AttnStateAt(parts.data() + sp * AttnStateFloats(h.n_head, h.head_dim), h.n_head, h.head_dim); };
      for (size_t sp = spans; sp-- > 0;) AttendSpan(k, kv.View(), rows, r, r + 1, h, sp, scratch.data(), state(sp));
      for (size_t sp = 1; sp < spans; ++sp) MergeAttnState(state(0), state(sp), h.n_head, h.head_dim);
      FinishAttnState(state(0), rows, r, r + 1, h);
      EXPECT_EQ(0, std::memcmp(&alone[r * width], &together[r * width], width * sizeof(float))) << "row " << r;
    }
  }
}

// A call over some K/V heads (the forward pass splits a short prompt's
// attention by head across threads) writes only those heads' outputs, and
// they equal the call over every head bit for bit: rows enough for the lane
// kernels (25 rows, 75 queries per K/V head) and too few (2 rows, one at a
// time), across spans, with a window and sinks, F16 and 8-bit K/V, at the
// scalar and the active table.
// Merging two spans' states and finishing them (four floats at a time,
// then a scalar tail) give the formula's bits for every head size:
// m = max(ma, mb), a = a * exp(ma - m) + b * exp(mb - m) (ExpPoly, two
// roundings), l likewise; a state with l = 0 is nothing seen (taken as it
// is, or skipped); then out = acc * (1 / l).
TEST(AttentionSpans, MergeAndFinishMatchTheirFormula) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  for (size_t hd : {size_t{1}, size_t{7}, size_t{64}, size_t{80}, size_t{130}}) {
    const AttnHeads h{2, 1, hd};
    const size_t rows = 3, nq = rows * h.n_head;
    std::vector<float> a(AttnStateFloats(nq, hd)), b(a.size());
    for (float& x : a) x = u(rng);
    for (float& x : b) x = u(rng);
    AttnState sa = AttnStateAt(a.data(), nq, hd), sb = AttnStateAt(b.data(), nq, hd);
    for (size_t q = 0; q < nq; ++q) sa.l[q] = 1.0f + std::fabs(sa.l[q]), sb.l[q] = 1.0f + std::fabs(sb.l[q]);
    sa.l[1] = 0.0f;  // nothing seen yet: takes b's
    sb.l[2] = 0.0f;  // b saw none of this query's positions: a stays
    std::vector<float> want = a;
    const AttnState sw = AttnStateAt(want.data(), nq, hd);
    for (size_t q = 0; q < nq; ++q) {
      if (sb.l[q] == 0.0f) continue;
      if (sa.l[q] == 0.0f) {
        for (size_t d = 0; d < hd; ++d) sw.acc[q * hd + d] = sb.acc[q * hd + d];
        sw.l[q] = sb.l[q], sw.m[q] = sb.m[q];
        continue;
      }
      const float m = std::max(sa.m[q], sb.m[q]), ca = ExpPoly(sa.m[q] - m), cb = ExpPoly(sb.m[q] - m);
      for (size_t d = 0; d < hd; ++d) {
        const float x = sa.acc[q * hd + d] * ca, y = sb.acc[q * hd + d] * cb;
        sw.acc[q * hd + d] = x + y;
      }
      const float lx = sa.l[q] * ca, ly = sb.l[q] * cb;
      sw.l[q] = lx + ly, sw.m[q] = m;
    }
    MergeAttnStateHeads(sa, sb, rows, h, {});
    ASSERT_EQ(0, std::memcmp(a.data(), want.data(), a.size() * sizeof(float))) << hd;
    std::vector<float> out(nq * hd, -1.0f), q(nq * hd);
    std::vector<int32_t> pos(rows, 5);
    const AttnRows ar{q.data(), h.n_head * hd, pos.data(), out.data(), h.n_head * hd};
    FinishAttnState(sa, ar, 0, rows, h);
    for (size_t i = 0; i < nq; ++i) {
      const float inv = 1.0f / sa.l[i];
      for (size_t d = 0; d < hd; ++d) ASSERT_EQ(out[i * hd + d], sa.acc[i * hd + d] * inv) << hd << " " << i << " " << d;
    }
  }
}

TEST(AttentionSpans, HeadsSplitAcrossCallsEqualOneCall) {
  const size_t n_pos = 2 * kAttnSpan + 37;
  const PagedKv kv(n_pos, 16, 32);  // 8-bit K/V blocks are 32 elements
  const AttnHeads h = kv.Heads();
  ASSERT_EQ(h.n_kv_head, 2u);
  const size_t width = h.n_head * h.head_dim;
  std::vector<BlockQ8_0> kq(kv.k.size() / 32), vq(kq.size());
  {
    std::vector<float> kf(kv.k.size()), vf(kv.v.size());
    for (size_t i = 0; i < kf.size(); ++i) kf[i] = Fp16ToFp32(kv.k[i]), vf[i] = Fp16ToFp32(kv.v[i]);
    QuantizeRowQ8_0(kf.data(), kq.data(), kf.size());
    QuantizeRowQ8_0(vf.data(), vq.data(), vf.size());
  }
  const KvLayerView f16 = kv.View();
  const KvLayerView q8{kq.data(), vq.data(), KvDtype::kQ8_0, f16.block_size, f16.kv_dim, kv.table};
  const auto sinks = RandomFloats(h.n_head, 18, 3.0f);
  for (size_t num_rows : {size_t{25}, size_t{2}}) {
    const auto q = RandomFloats(num_rows * width, 17);
    std::vector<int32_t> pos(num_rows);
    for (size_t r = 0; r < num_rows; ++r) pos[r] = static_cast<int32_t>(n_pos - num_rows + r);
    for (const KvLayerView* view : {&f16, &q8}) {
      for (size_t window : {size_t{0}, size_t{700}}) {
        for (const DotKernels* k : {&ScalarDotKernels(), &ActiveDotKernels()}) {
          const float* sink = window == 0 ? nullptr : sinks.data();
          std::vector<float> all(num_rows * width), scratch(AttendScratchFloats(num_rows, h));
          AttendRows(*k, *view, {q.data(), width, pos.data(), all.data(), width, window, sink}, 0, num_rows, h,
                     scratch.data());
          std::vector<float> split(num_rows * width, 12345.0f);
          const AttnRows rows{q.data(), width, pos.data(), split.data(), width, window, sink};
          AttendRows(*k, *view, rows, 0, num_rows, h, scratch.data(), KvHeadRange{1, 2});
          for (size_t r = 0; r < num_rows; ++r) {  // head group 0 untouched so far
            for (size_t i = 0; i < h.group() * h.head_dim; ++i) ASSERT_EQ(split[r * width + i], 12345.0f);
          }
          AttendRows(*k, *view, rows, 0, num_rows, h, scratch.data(), KvHeadRange{0, 1});
          EXPECT_EQ(0, std::memcmp(all.data(), split.data(), all.size() * sizeof(float)))
              << k->name << " rows " << num_rows << " window " << window << (view == &q8 ? " q8" : " f16");
        }
      }
    }
  }
}

TEST(AttentionSpans, LaneRowsFillWholeLaneGroups) {
  for (size_t group : {1, 2, 3, 4, 6, 7, 8, 16, 32}) {
    const AttnHeads h{group * 2, 2, 64};
    const size_t rows = AttnLaneRows(h);
    EXPECT_EQ(rows * group % kLaneTile, 0u) << group;
    for (size_t fewer = 1; fewer < rows; ++fewer) EXPECT_NE(fewer * group % kLaneTile, 0u) << group << " " << fewer;
  }
}

// What a split-KV plan prices a span by: the positions its rows read there.
// Rows at 500 .. 521: span 0 whole, span 1 up to 521; with a window of 100
// span 0 from the tile holding 401 (400) on; a span past the rows: none.
TEST(AttentionSpans, SpanPositionsAreWhatTheRowsRead) {
  std::vector<int32_t> pos(22);
  for (size_t r = 0; r < pos.size(); ++r) pos[r] = static_cast<int32_t>(500 + r);
  AttnRows rows{nullptr, 0, pos.data(), nullptr, 0};
  EXPECT_EQ(AttnSpanPositions(rows, 0, 22, 0), 512u);
  EXPECT_EQ(AttnSpanPositions(rows, 0, 22, 1), 10u);
  EXPECT_EQ(AttnSpanPositions(rows, 0, 12, 1), 0u);  // rows 500 .. 511
  EXPECT_EQ(AttnSpanPositions(rows, 0, 22, 2), 0u);
  rows.window = 100;
  EXPECT_EQ(AttnSpanPositions(rows, 0, 22, 0), 112u);
  EXPECT_EQ(AttnSpanPositions(rows, 21, 22, 0), 96u);  // row 521 sees 422 on: from tile 416
  EXPECT_EQ(AttnSpanPositions(rows, 21, 22, 1), 10u);
}

// Windows and sinks in the tiled path (serve's numerics for gemma's windowed
// layers and gpt-oss) against the definition in double precision: rows
// before, at and past the window's length, windows shorter than a tile and
// longer than a span, at every table.
TEST(AttentionSpans, WindowsAndSinksMatchTheDefinition) {
  const size_t n_pos = 2 * kAttnSpan + 37;
  const PagedKv kv(n_pos, 48);
  const AttnHeads h = kv.Heads();
  const size_t width = h.n_head * h.head_dim;
  const std::vector<int32_t> pos = {0, 3, 15, 16, 17, 40, 600, 1000, static_cast<int32_t>(n_pos - 1)};
  const auto q = RandomFloats(pos.size() * width, 15);
  const auto sinks = RandomFloats(h.n_head, 16, 3.0f);
  auto f16 = [](uint16_t x) { return static_cast<double>(Fp16ToFp32(x)); };
  for (size_t window : {size_t{1}, size_t{7}, size_t{16}, size_t{40}, size_t{700}}) {
    for (bool with_sinks : {false, true}) {
      for (const DotKernels* k : {&ScalarDotKernels(), &ActiveDotKernels()}) {
        std::vector<float> out(pos.size() * width), scratch(AttendScratchFloats(pos.size(), h));
        const AttnRows rows{q.data(), width, pos.data(), out.data(), width, window, with_sinks ? sinks.data() : nullptr};
        AttendRows(*k, kv.View(), rows, 0, pos.size(), h, scratch.data());
        for (size_t r = 0; r < pos.size(); ++r) {
          const size_t p1 = static_cast<size_t>(pos[r]), lo = p1 + 1 > window ? p1 + 1 - window : 0;
          for (size_t head = 0; head < h.n_head; ++head) {
            const size_t g = head / h.group();
            std::vector<double> s;
            double mx = with_sinks ? sinks[head] : -1e300;
            for (size_t p = lo; p <= p1; ++p) {
              const size_t row = static_cast<size_t>(kv.table[p / kv.block]) * kv.block + p % kv.block;
              double d = 0;
              for (size_t i = 0; i < h.head_dim; ++i) d += q[r * width + head * h.head_dim + i] * f16(kv.k[(row * h.n_kv_head + g) * h.head_dim + i]);
              s.push_back(d * h.Scale());
              mx = std::max(mx, s.back());
            }
            double sum = with_sinks ? std::exp(sinks[head] - mx) : 0;
            for (double& x : s) sum += (x = std::exp(x - mx));
            for (size_t i = 0; i < h.head_dim; ++i) {
              double want = 0;
              for (size_t p = lo; p <= p1; ++p) {
                const size_t row = static_cast<size_t>(kv.table[p / kv.block]) * kv.block + p % kv.block;
                want += s[p - lo] / sum * f16(kv.v[(row * h.n_kv_head + g) * h.head_dim + i]);
              }
              ASSERT_NEAR(out[r * width + head * h.head_dim + i], want, 2e-5)
                  << k->name << " window " << window << " sinks " << with_sinks << " pos " << p1 << " head " << head;
            }
          }
        }
      }
    }
  }
}

// 8-bit K/V (--kv-type q8_0): every table widens Q8_0 blocks to the same
// bits as the scalar twin; the tiled path (several rows, positions across
// spans and blocks) gives the same bits in every table, for rows run
// together in lanes (prefill) or one at a time (decode), and stays within
// the query's quantization of attention over an F32 store holding the
// widened values; the per-head path (windows, soft-caps) equals it bit for
// bit.
TEST(TileKernels, EightBitKvWidensAndAttendsAsItsValues) {
  for (const DotKernels* k : SimdTables()) {
    for (size_t n : {32u, 64u, 96u, 128u, 256u, 1024u}) {
      const auto x = RandomFloats(n, 31, 3.0f);
      std::vector<BlockQ8_0> q(n / 32);
      QuantizeRow(TensorType::kQ8_0, x.data(), q.data(), n);
      std::vector<float> a(n), b(n);
      k->q8_0_to_f32(q.data(), a.data(), n);
      ScalarDotKernels().q8_0_to_f32(q.data(), b.data(), n);
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), n * sizeof(float))) << k->name << " n=" << n;
      for (size_t i = 0; i < n; ++i) {  // within one step of the block's scale
        float amax = 0;
        for (size_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j) amax = std::max(amax, std::fabs(x[j]));
        EXPECT_NEAR(a[i], x[i], amax / 127) << i;
      }
    }
  }
  const size_t n_head = 4, n_kv = 2, hd = 64, dim = n_kv * hd, n_pos = kAttnSpan + 45, block = 16;
  const size_t blocks = (n_pos + block - 1) / block;
  std::vector<int32_t> table(blocks);
  for (size_t b = 0; b < blocks; ++b) table[b] = static_cast<int32_t>(blocks - 1 - b);
  const auto kf = RandomFloats(blocks * block * dim, 32, 2.0f), vf = RandomFloats(kf.size(), 33);
  std::vector<uint8_t> k8(blocks * block * KvBytes(KvDtype::kQ8_0, dim)), v8(k8.size());
  std::vector<float> k32(kf.size()), v32(kf.size());
  for (size_t row = 0; row < blocks * block; ++row) {
    const size_t at = row * KvBytes(KvDtype::kQ8_0, dim);
    QuantizeRow(TensorType::kQ8_0, &kf[row * dim], &k8[at], dim);
    QuantizeRow(TensorType::kQ8_0, &vf[row * dim], &v8[at], dim);
    ScalarDotKernels().q8_0_to_f32(&k8[at], &k32[row * dim], dim);
    ScalarDotKernels().q8_0_to_f32(&v8[at], &v32[row * dim], dim);
  }
  const KvLayerView q8{k8.data(), v8.data(), KvDtype::kQ8_0, block, dim, table};
  const KvLayerView f32{k32.data(), v32.data(), KvDtype::kF32, block, dim, table};
  const AttnHeads h{n_head, n_kv, hd};
  const size_t rows = 5, width = n_head * hd;
  const auto q = RandomFloats(rows * width, 34);
  std::vector<int32_t> pos(rows);
  for (size_t r = 0; r < rows; ++r) pos[r] = static_cast<int32_t>(n_pos - 1 - 7 * r);
  std::vector<float> first_table;
  for (const DotKernels* k : {&ScalarDotKernels(), &ActiveDotKernels()}) {
    std::vector<float> a(rows * width), b(rows * width), c(rows * width), scratch(AttendScratchFloats(rows, h));
    AttendRows(*k, q8, {q.data(), width, pos.data(), a.data(), width}, 0, rows, h, scratch.data());
    AttendRows(*k, f32, {q.data(), width, pos.data(), b.data(), width}, 0, rows, h, scratch.data());
    ASSERT_GE(rows * n_head / n_kv, 8u) << "the rows together take the lane kernels";
    for (size_t r = 0; r < rows; ++r) AttendRows(*k, q8, {q.data(), width, pos.data(), c.data(), width}, r, r + 1, h, scratch.data());
    EXPECT_EQ(0, std::memcmp(a.data(), c.data(), a.size() * sizeof(float))) << k->name << ": lanes and columns";
    if (first_table.empty()) first_table = a;
    EXPECT_EQ(0, std::memcmp(a.data(), first_table.data(), a.size() * sizeof(float))) << k->name << ": every table";
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 0.02) << k->name << ": tiled, element " << i;
    const AttnExtras x{100, 0, 30.0f};
    for (size_t head = 0; head < n_head; ++head) {
      std::vector<float> c(hd), d(hd);
      AttendHeadExtras(*k, q.data() + head * hd, q8, n_pos - 1, head / 2, hd, x, c.data());
      AttendHeadExtras(*k, q.data() + head * hd, f32, n_pos - 1, head / 2, hd, x, d.data());
      EXPECT_EQ(0, std::memcmp(c.data(), d.data(), hd * sizeof(float))) << k->name << ": per head " << head;
    }
  }
}

}  // namespace
}  // namespace pc
