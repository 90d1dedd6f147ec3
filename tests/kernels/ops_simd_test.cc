// The RowOps tables (norms, adds, RoPE, the Q8A quantizer) against the
// scalar functions, bit for bit: row counts around the eight-row groups and
// their pairs, sizes around the vector width, in place and misaligned.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "kernels/dot.h"
#include "kernels/ops_simd.h"
#include "test_support.h"

namespace pc {
namespace {

using test::RandomFloats;

std::vector<const RowOps*> SimdTables() {
  std::vector<const RowOps*> out;
  for (Isa isa : SupportedIsas()) {
    const RowOps* ops = &RowOpsFor(isa);
    if (ops != &ScalarRowOps() && (out.empty() || out.back() != ops)) out.push_back(ops);
  }
  return out;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(RowOps, SimdTableOnEveryAvx2Machine) {
  // Where the CPU has AVX2 a SIMD table must be the one in force (a
  // dispatch that fell back to the scalar table would pass every test
  // below and leave the passes slow).
  if (!IsaSupported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2 on this machine: only the scalar table";
  ASSERT_FALSE(SimdTables().empty());
  EXPECT_STRNE(RowOpsFor(Isa::kAvx2).name, "scalar");
}

TEST(RowOps, RmsNormRowsBitsEqualScalarForEveryRowCount) {
  uint32_t seed = 11;
  for (const RowOps* ops : SimdTables()) {
    for (size_t n : {1, 7, 8, 9, 64, 100, 576, 1003}) {
      const std::vector<float> w = RandomFloats(n, seed++, 1.0f);
      for (size_t rows = 1; rows <= 35; rows += (rows < 18 ? 1 : 4)) {
        std::vector<float> x = RandomFloats(rows * n + 1, seed++, 1.0f);
        // Rows of very different magnitudes: lanes mixed up would show.
        for (size_t r = 0; r < rows; ++r) {
          for (size_t i = 0; i < n; ++i) x[1 + r * n + i] *= std::ldexp(1.0f, static_cast<int>(r * 5 % 19) - 9);
        }
        std::vector<float> want(rows * n + 1), got(rows * n + 1), in_place = x;
        RmsNormRows(x.data() + 1, w.data(), want.data() + 1, rows, n, 1e-6f);  // misaligned by one float
        ops->rms_norm_rows(x.data() + 1, w.data(), got.data() + 1, rows, n, 1e-6f);
        ops->rms_norm_rows(in_place.data() + 1, w.data(), in_place.data() + 1, rows, n, 1e-6f);
        in_place[0] = want[0];
        ASSERT_TRUE(SameBits(got, want)) << ops->name << " n=" << n << " rows=" << rows;
        ASSERT_TRUE(SameBits(in_place, want)) << ops->name << " in place n=" << n << " rows=" << rows;
      }
    }
  }
}

TEST(RowOps, AddBitsEqualScalar) {
  for (const RowOps* ops : SimdTables()) {
    for (size_t n : {0, 1, 7, 8, 9, 15, 16, 17, 576, 4099}) {
      const std::vector<float> x = RandomFloats(n + 3, 3, 2.0f);
      std::vector<float> want = RandomFloats(n + 3, 4, 2.0f), got = want;
      AddInPlace(want.data() + 3, x.data() + 1, n);
      ops->add(got.data() + 3, x.data() + 1, n);
      ASSERT_TRUE(SameBits(got, want)) << ops->name << " n=" << n;
    }
  }
}

TEST(RowOps, RopeBitsEqualScalarInBothStyles) {
  uint32_t seed = 21;
  for (const RowOps* ops : SimdTables()) {
    for (bool neox : {false, true}) {
      // Head sizes with full and partial rotation (phi-style rope_dim <
      // head_dim) and pair counts that leave a scalar tail.
      for (auto [head_dim, rope_dim] : {std::pair<size_t, size_t>{64, 64}, {128, 128}, {96, 32}, {80, 80}, {16, 12},
                                        {256, 64}, {6, 6}}) {
        RopeParams p;
        p.head_dim = head_dim;
        p.rope_dim = rope_dim;
        p.neox = neox;
        p.freq_base = 500000.0f;
        for (int32_t pos : {0, 1, 17, 4095, 130000}) {
          std::vector<float> cs(rope_dim);
          RopeAngles(pos, p, cs.data());
          const size_t heads = 5;
          std::vector<float> want = RandomFloats(heads * head_dim, seed++, 3.0f), got = want;
          RopeWith(want.data(), heads, cs.data(), p);
          ops->rope(got.data(), heads, cs.data(), p);
          ASSERT_TRUE(SameBits(got, want)) << ops->name << " neox=" << neox << " head_dim=" << head_dim
                                           << " rope_dim=" << rope_dim << " pos=" << pos;
        }
      }
    }
  }
}

TEST(RowOps, Q8AQuantizerEqualsScalarBlockForBlock) {
  uint32_t seed = 31;
  for (const RowOps* ops : SimdTables()) {
    for (size_t n : {32, 64, 576, 1536, 4096}) {
      std::vector<float> x = RandomFloats(n, seed++, 4.0f);
      // A zero block, exact halves (ties to even) and a block of one value.
      std::fill(x.begin(), x.begin() + 32, 0.0f);
      if (n >= 64) {
        for (size_t i = 32; i < 64; ++i) x[i] = (static_cast<float>(i % 7) - 3.0f) * 0.5f;
      }
      if (n >= 96) std::fill(x.begin() + 64, x.begin() + 96, -2.5f);
      std::vector<BlockQ8A> want(n / 32), got(n / 32);
      QuantizeRowQ8A(x.data(), want.data(), n);
      ops->quantize_q8a(x.data(), got.data(), n);
      for (size_t b = 0; b < n / 32; ++b) {
        ASSERT_EQ(0, std::memcmp(&got[b].d, &want[b].d, sizeof(float))) << ops->name << " n=" << n << " block " << b;
        ASSERT_EQ(got[b].sum, want[b].sum) << ops->name << " n=" << n << " block " << b;
        ASSERT_EQ(0, std::memcmp(got[b].qs, want[b].qs, 32)) << ops->name << " n=" << n << " block " << b;
      }
    }
  }
}

// Where a row holds a NaN or an infinity (a broken file's activations: the
// fuzz tests feed random tensor bytes) the SIMD quantizer must give what
// the forward pass gave before it existed, the table's Q8_0 quantizer and
// Q8_0ToQ8A: its sums bounded by the saturated bytes (an unbounded sum
// overflowed in the matmul kernels' integer arithmetic).
TEST(RowOps, Q8AQuantizerOfNonFiniteRowsEqualsTheTwoStepPath) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (Isa isa : SupportedIsas()) {
    const RowOps& ops = RowOpsFor(isa);
    const DotKernels& k = DotKernelsFor(isa);
    if (&ops == &ScalarRowOps()) continue;
    for (float bad : {nan, inf, -inf}) {
      for (size_t at : {0, 5, 31, 33}) {
        std::vector<float> x = RandomFloats(64, 41, 3.0f);
        x[at] = bad;
        if (at == 5) x[7] = -bad;  // two of them, either sign
        std::vector<BlockQ8_0> q8(2);
        std::vector<BlockQ8A> want(2), got(2);
        k.quantize_q8_0(x.data(), q8.data(), 64);
        Q8_0ToQ8A(q8.data(), want.data(), 2);
        ops.quantize_q8a(x.data(), got.data(), 64);
        for (size_t b = 0; b < 2; ++b) {
          ASSERT_EQ(0, std::memcmp(&got[b].d, &want[b].d, sizeof(float))) << ops.name << " at " << at << " block " << b;
          ASSERT_EQ(got[b].sum, want[b].sum) << ops.name << " at " << at << " block " << b;
          ASSERT_EQ(0, std::memcmp(got[b].qs, want[b].qs, 32)) << ops.name << " at " << at << " block " << b;
          ASSERT_LE(std::abs(got[b].sum), 32 * 128);
        }
      }
    }
  }
}

}  // namespace
}  // namespace pc
