// The reference engine's arithmetic (kernels/ggml_compat.h): each function
// computes the right value, and in the order that makes it bit-comparable.
#include "kernels/ggml_compat.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "base/fp16.h"
#include "kernels/quant.h"
#include "test_support.h"

namespace pc {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

double DirectDot(const float* a, const float* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

TEST(GgmlCompat, Reduce16IsPairwiseByHalves) {
  // Lanes 0 and 8 cancel in the first halving; a left-to-right sum would
  // absorb the ones into 1e8 and return 6 (or 8), not 14.
  float lanes[16];
  for (float& l : lanes) l = 1.0f;
  lanes[0] = 1e8f;
  lanes[8] = -1e8f;
  EXPECT_EQ(GgmlReduce16(lanes), 14.0f);
}

TEST(GgmlCompat, DotsAgreeWithDirectSumAtEverySize) {
  for (size_t n : {0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 172, 257, 1000}) {
    const auto a = Random(n, 1 + n), b = Random(n, 1000 + n);
    const double want = DirectDot(a.data(), b.data(), n);
    const double tol = 1e-5 * (1.0 + std::sqrt(static_cast<double>(n)));
    EXPECT_NEAR(GgmlDotF32Vec(a.data(), b.data(), n), want, tol) << n;
    std::vector<uint16_t> a16(n), b16(n);
    std::vector<float> ar(n), br(n);
    for (size_t i = 0; i < n; ++i) {
      a16[i] = Fp32ToFp16(a[i]);
      b16[i] = Fp32ToFp16(b[i]);
      ar[i] = Fp16ToFp32(a16[i]);
      br[i] = Fp16ToFp32(b16[i]);
    }
    const double want16 = DirectDot(ar.data(), br.data(), n);
    // Steps of 128 accumulate in F16 (11-bit significands): about 2^-11 of
    // the magnitudes summed per step, more in the tree.
    double abs_sum = 0;
    for (size_t i = 0; i < n; ++i) abs_sum += std::fabs(static_cast<double>(ar[i]) * br[i]);
    const double tol16 = n >= 128 ? 4e-3 * abs_sum : tol;
    EXPECT_NEAR(GgmlDotF16Vec(a16.data(), b16.data(), n), want16, tol16) << n;
    if (n % 16 == 0) {
      EXPECT_NEAR(GgmlDotF32Gemm(a.data(), b.data(), n), want, tol) << n;
      EXPECT_NEAR(GgmlDotF16Gemm(a16.data(), b16.data(), n), want16, tol) << n;
    }
  }
}

TEST(GgmlCompat, VectorAndGemmOrdersDifferSomewhere) {
  // The two orders are both right and not the same: over many rows at least
  // one result differs in the last bit (otherwise the split would not matter).
  int num_differ = 0;
  for (uint32_t seed = 0; seed < 200; ++seed) {
    const auto a = Random(64, seed), b = Random(64, seed + 7777);
    num_differ += GgmlDotF32Vec(a.data(), b.data(), 64) != GgmlDotF32Gemm(a.data(), b.data(), 64);
  }
  EXPECT_GT(num_differ, 0);
}

TEST(GgmlCompat, F16VectorDotAccumulatesInF16FromStepsOf128) {
  // Every product is (1 + 2^-10)^2 = 1 + 2^-9 + 2^-20, exact in float. The
  // AVX512-FP16 build's 128-element step rounds it to 1 + 2^-9 in each F16
  // lane, so the 128 lanes sum to exactly 128.25; the AVX2 build's float
  // accumulators keep the 2^-20 parts. (The target is set: the default one
  // follows the CPU.)
  const GgmlTarget before = ActiveGgmlTarget();
  const double product = 1.0 + 0x1p-9 + 0x1p-20;
  std::vector<uint16_t> v(128, Fp32ToFp16(1.0f + 0x1p-10f));
  SetGgmlTarget(GgmlTarget::kAvx512Fp16);
  EXPECT_EQ(GgmlDotF16Vec(v.data(), v.data(), 128), 128.25f);
  // Under 128 elements all products form the tail, summed in double.
  EXPECT_EQ(GgmlDotF16Vec(v.data(), v.data(), 127), static_cast<float>(127 * product));
  SetGgmlTarget(GgmlTarget::kAvx2);
  EXPECT_EQ(GgmlDotF16Vec(v.data(), v.data(), 128), static_cast<float>(128 * product));
  SetGgmlTarget(before);
}

TEST(GgmlCompat, QuantizedDotsAgreeWithDequantizedSum) {
  for (size_t nb : {1, 2, 3, 8, 9}) {
    const size_t n = nb * kQuantBlock;
    const auto w = Random(n, 5 + nb), x = Random(n, 50 + nb);
    std::vector<BlockQ8_0> w8(nb), x8(nb);
    std::vector<BlockQ4_0> w4(nb);
    QuantizeRow(TensorType::kQ8_0, w.data(), w8.data(), n);
    QuantizeRow(TensorType::kQ4_0, w.data(), w4.data(), n);
    GgmlQuantizeRowQ8_0(x.data(), x8.data(), n);
    std::vector<float> wd8(n), wd4(n), xd(n);
    DequantizeRow(TensorType::kQ8_0, w8.data(), wd8.data(), n);
    DequantizeRow(TensorType::kQ4_0, w4.data(), wd4.data(), n);
    DequantizeRow(TensorType::kQ8_0, x8.data(), xd.data(), n);
    EXPECT_NEAR(GgmlDotQ8_0(w8.data(), x8.data(), nb), DirectDot(wd8.data(), xd.data(), n), 1e-4 * n) << nb;
    EXPECT_NEAR(GgmlDotQ4_0(w4.data(), x8.data(), nb), DirectDot(wd4.data(), xd.data(), n), 1e-4 * n) << nb;
  }
}

TEST(GgmlCompat, Q6_KDotAgreesWithDequantizedSum) {
  // Random Q6_K bytes are valid blocks; the scale is set to a sane F16.
  std::mt19937 rng(99);
  for (size_t nb : {1, 3}) {
    std::vector<BlockQ6_K> w(nb);
    for (BlockQ6_K& b : w) {
      for (auto& v : b.ql) v = static_cast<uint8_t>(rng());
      for (auto& v : b.qh) v = static_cast<uint8_t>(rng());
      for (auto& v : b.scales) v = static_cast<int8_t>(static_cast<int>(rng() % 64) - 32);
      b.d = Fp32ToFp16(0.01f);
    }
    const size_t n = nb * kSuperBlock;
    const auto x = Random(n, 300 + nb);
    std::vector<BlockQ8_K> xq(nb);
    GgmlQuantizeRowQ8_K(x.data(), xq.data(), n);
    std::vector<float> wd(n), xd(n);
    DequantizeRow(TensorType::kQ6_K, w.data(), wd.data(), n);
    for (size_t i = 0; i < n; ++i) xd[i] = xq[i / kSuperBlock].d * xq[i / kSuperBlock].qs[i % kSuperBlock];
    const double want = DirectDot(wd.data(), xd.data(), n);
    EXPECT_NEAR(GgmlDotQ6_K(w.data(), xq.data(), nb), want, 1e-4 * (1 + std::fabs(want))) << nb;
    // The activation quantizer: the signed extreme maps to -127 exactly and
    // every value is within half a step.
    for (size_t i = 0; i < n; ++i) EXPECT_LE(std::fabs(xd[i] - x[i]), 0.5f * std::fabs(xq[i / kSuperBlock].d) * 1.0001f);
  }
}

// The F16 vector dot's arithmetic restated the slow obvious way: each F16
// operation as the exact result in double, rounded to float with round to
// odd, then to F16 (no double rounding). Every table must give its bits.
float RoundToF16ViaDouble(double v) {
  float f = static_cast<float>(v);
  if (static_cast<double>(f) != v) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    if ((bits & 1) == 0) f = std::nextafter(f, v > f ? HUGE_VALF : -HUGE_VALF);
  }
  return Fp16ToFp32(Fp32ToFp16(f));
}
float F16VecDotViaDouble(const uint16_t* w, const uint16_t* x, size_t n) {
  float acc[4][32] = {};
  const size_t n_main = n - n % 128;
  for (size_t i = 0; i < n_main; i += 128) {
    for (size_t j = 0; j < 4; ++j) {
      for (size_t l = 0; l < 32; ++l) {
        const size_t e = i + 32 * j + l;
        acc[j][l] = RoundToF16ViaDouble(static_cast<double>(Fp16ToFp32(w[e])) * Fp16ToFp32(x[e]) + acc[j][l]);
      }
    }
  }
  for (size_t l = 0; l < 32; ++l) {
    acc[0][l] = RoundToF16ViaDouble(static_cast<double>(acc[0][l]) + acc[2][l]);
    acc[1][l] = RoundToF16ViaDouble(static_cast<double>(acc[1][l]) + acc[3][l]);
  }
  for (size_t l = 0; l < 32; ++l) acc[0][l] = RoundToF16ViaDouble(static_cast<double>(acc[0][l]) + acc[1][l]);
  for (size_t width = 16; width >= 1; width /= 2) {
    for (size_t l = 0; l < width; ++l) acc[0][l] = RoundToF16ViaDouble(static_cast<double>(acc[0][l]) + acc[0][l + width]);
  }
  double sum = acc[0][0];
  for (size_t i = n_main; i < n; ++i) sum += static_cast<double>(Fp16ToFp32(w[i]) * Fp16ToFp32(x[i]));
  return static_cast<float>(sum);
}

TEST(GgmlCompat, F16VectorDotOfEveryTableEqualsItsArithmeticInDouble) {
  constexpr GgmlTarget kFp16 = GgmlTarget::kAvx512Fp16;
  std::vector<const GgmlCompatKernels*> tables = {&GgmlCompatKernelsFor(Isa::kScalar, kFp16)};
  if (BestSupportedIsa() >= Isa::kAvx2 && GgmlCompatAvx2Kernels(kFp16) != nullptr) {
    tables.push_back(GgmlCompatAvx2Kernels(kFp16));
  }
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> exponent(-14, 7);
  size_t checked = 0;
  for (size_t n : {0, 1, 127, 128, 129, 256, 300, 1024}) {
    for (int trial = 0; trial < 40; ++trial) {
      // Magnitudes from F16 subnormal products to near overflow, mixed signs.
      std::vector<uint16_t> w(n), x(n);
      for (size_t i = 0; i < n; ++i) {
        const float m = std::ldexp(1.0f + static_cast<float>(rng() % 1024) / 1024.0f, exponent(rng));
        w[i] = Fp32ToFp16((rng() & 1) ? m : -m);
        x[i] = Fp32ToFp16(std::ldexp(static_cast<float>(rng() % 2048) / 1024.0f - 1.0f, exponent(rng) / 2));
      }
      const float want = F16VecDotViaDouble(w.data(), x.data(), n);
      for (const GgmlCompatKernels* k : tables) {
        const float got = k->f16_vec(w.data(), x.data(), n);
        ASSERT_TRUE(got == want || (std::isnan(got) && std::isnan(want))) << k->name << " n " << n << " trial " << trial;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 300u);
}

// Every instruction-set build of the reference-order loops gives the same
// bits as the portable one, at many sizes and misaligned inputs.
TEST(GgmlCompat, SimdTablesAreBitIdenticalToPortable) {
  if (BestSupportedIsa() < Isa::kAvx2 || GgmlCompatAvx2Kernels() == nullptr) {
    GTEST_SKIP() << "no SIMD build of the reference-order loops on this machine";
  }
  for (GgmlTarget target : {GgmlTarget::kAvx512Fp16, GgmlTarget::kAvx512, GgmlTarget::kAvx2}) {
    const GgmlCompatKernels& ref = GgmlCompatKernelsFor(Isa::kScalar, target);
    const GgmlCompatKernels* k = GgmlCompatAvx2Kernels(target);
    EXPECT_EQ(k->gemm_multiple, ref.gemm_multiple);
    for (size_t n : {0, 16, 32, 48, 64, 128, 176, 256, 1024}) {
      for (size_t off : {0, 1, 3}) {
        const auto a = Random(n + off, 7 + n), b = Random(n + off, 70 + n);
        EXPECT_EQ(k->f32_vec(a.data() + off, b.data() + off, n), ref.f32_vec(a.data() + off, b.data() + off, n));
        EXPECT_EQ(k->f32_gemm(a.data() + off, b.data() + off, n), ref.f32_gemm(a.data() + off, b.data() + off, n));
        std::vector<uint16_t> a16(n + off), b16(n + off);
        for (size_t i = 0; i < n + off; ++i) {
          a16[i] = Fp32ToFp16(a[i]);
          b16[i] = Fp32ToFp16(b[i]);
        }
        EXPECT_EQ(k->f16_gemm(a16.data() + off, b16.data() + off, n), ref.f16_gemm(a16.data() + off, b16.data() + off, n));
        EXPECT_EQ(k->f16_vec(a16.data() + off, b16.data() + off, n), ref.f16_vec(a16.data() + off, b16.data() + off, n));
      }
    }
    for (size_t nb : {0, 1, 2, 7, 8, 33}) {
      const size_t n = nb * kQuantBlock;
      const auto w = Random(n, 17 + nb), x = Random(n, 170 + nb);
      std::vector<BlockQ8_0> w8(nb + 1), x8(nb + 1);
      std::vector<BlockQ4_0> w4(nb + 1);
      QuantizeRow(TensorType::kQ8_0, w.data(), w8.data() + 1, n);  // +1 block: not 32-byte aligned
      QuantizeRow(TensorType::kQ4_0, w.data(), w4.data() + 1, n);
      GgmlQuantizeRowQ8_0(x.data(), x8.data() + 1, n);
      EXPECT_EQ(k->q8_0(w8.data() + 1, x8.data() + 1, nb), ref.q8_0(w8.data() + 1, x8.data() + 1, nb)) << nb;
      EXPECT_EQ(k->q4_0(w4.data() + 1, x8.data() + 1, nb), ref.q4_0(w4.data() + 1, x8.data() + 1, nb)) << nb;
      std::vector<BlockMXFP4> wm(nb + 1);
      QuantizeRow(TensorType::kMXFP4, w.data(), wm.data() + 1, n);
      EXPECT_EQ(k->mxfp4(wm.data() + 1, x8.data() + 1, nb), ref.mxfp4(wm.data() + 1, x8.data() + 1, nb)) << nb;
      EXPECT_EQ(k->q4_0_repacked(w4.data() + 1, x8.data() + 1, nb), ref.q4_0_repacked(w4.data() + 1, x8.data() + 1, nb));
      EXPECT_EQ(k->mxfp4_repacked(wm.data() + 1, x8.data() + 1, nb), ref.mxfp4_repacked(wm.data() + 1, x8.data() + 1, nb));
    }
  }
}

// The reference repacks Q4_0 and MXFP4 matrices whose row count is a
// multiple of 8 (its CPU repack on x86), and then every output is a chain
// over blocks of fma(exact block sum, d_w * d_x, acc): written out here
// from the blocks' dequantized integers, and not the vector-dot order (which
// sums 8 lanes and adds them in a tree), on most of these rows.
TEST(GgmlCompat, RepackedRowsSumBlockByBlock) {
  EXPECT_TRUE(GgmlRepacksRows(TensorType::kQ4_0, 64));
  EXPECT_TRUE(GgmlRepacksRows(TensorType::kMXFP4, 2880));
  EXPECT_FALSE(GgmlRepacksRows(TensorType::kQ4_0, 12));
  EXPECT_FALSE(GgmlRepacksRows(TensorType::kQ8_0, 64));
  EXPECT_FALSE(GgmlRepacksRows(TensorType::kQ6_K, 64));
  const size_t nb = 24, n = nb * kQuantBlock;
  int differs = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const auto w = Random(n, 300 + seed), x = Random(n, 400 + seed);
    std::vector<BlockQ8_0> x8(nb);
    std::vector<BlockQ4_0> w4(nb);
    std::vector<BlockMXFP4> wm(nb);
    GgmlQuantizeRowQ8_0(x.data(), x8.data(), n);
    QuantizeRow(TensorType::kQ4_0, w.data(), w4.data(), n);
    QuantizeRow(TensorType::kMXFP4, w.data(), wm.data(), n);
    float want4 = 0, wantm = 0;
    for (size_t b = 0; b < nb; ++b) {
      int32_t s4 = 0, sm = 0;
      for (size_t i = 0; i < kQuantBlock / 2; ++i) {
        s4 += ((w4[b].qs[i] & 15) - 8) * x8[b].qs[i] + ((w4[b].qs[i] >> 4) - 8) * x8[b].qs[i + 16];
        sm += kMxfp4Values[wm[b].qs[i] & 15] * x8[b].qs[i] + kMxfp4Values[wm[b].qs[i] >> 4] * x8[b].qs[i + 16];
      }
      const float dx = Fp16ToFp32(x8[b].d);
      want4 = std::fma(static_cast<float>(s4), Fp16ToFp32(w4[b].d) * dx, want4);
      wantm = std::fma(static_cast<float>(sm), Bf16ToFp32(E8m0HalfToBf16(wm[b].e)) * dx, wantm);
    }
    EXPECT_EQ(GgmlDotQ4_0Repacked(w4.data(), x8.data(), nb), want4) << seed;
    EXPECT_EQ(GgmlDotMxfp4Repacked(wm.data(), x8.data(), nb), wantm) << seed;
    differs += GgmlDotQ4_0(w4.data(), x8.data(), nb) != want4;
    differs += GgmlDotMxfp4(wm.data(), x8.data(), nb) != wantm;
  }
  EXPECT_GT(differs, 10);  // the two orders are not the same sums
  // MXFP4's scales are powers of two, so with small block sums the product
  // is exact and fused or not gives the same bits: block sums of 15 bits
  // (one-signed values) make it inexact, and there the fused multiply-add
  // must hold.
  std::mt19937 rng(5);
  int inexact = 0;
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<BlockMXFP4> wm(nb);
    std::vector<BlockQ8_0> x8(nb);
    float want = 0, unfused = 0;
    for (size_t b = 0; b < nb; ++b) {
      wm[b].e = static_cast<uint8_t>(120 + rng() % 8);
      for (auto& q : wm[b].qs) q = static_cast<uint8_t>((rng() % 8) | (rng() % 8) << 4);  // positive grid values
      x8[b].d = Fp32ToFp16(0.001f + 0.01f * static_cast<float>(rng() % 1000) / 1000.0f);
      int32_t sum = 0;
      for (size_t i = 0; i < kQuantBlock; ++i) {
        x8[b].qs[i] = static_cast<int8_t>(64 + rng() % 64);
        const uint8_t byte = wm[b].qs[i % 16];
        sum += kMxfp4Values[i < 16 ? byte & 15 : byte >> 4] * x8[b].qs[i];
      }
      const float d = Bf16ToFp32(E8m0HalfToBf16(wm[b].e)) * Fp16ToFp32(x8[b].d);
      want = std::fma(static_cast<float>(sum), d, want);
      const volatile float product = static_cast<float>(sum) * d;  // rounded: not contracted into an fma
      unfused += product;
    }
    EXPECT_EQ(GgmlDotMxfp4Repacked(wm.data(), x8.data(), nb), want) << trial;
    inexact += unfused != want;
  }
  EXPECT_GT(inexact, 5);
}

// The targets' orders as documented: the AVX-512 build's F16 dot is its F32
// order on widened values (but for the leftover's sum); the AVX2 build's loops are 8 lanes wide (its GEMM
// order needs the inner size a multiple of 8, and a sum of 8 terms in its
// horizontal order); each within a few roundings of the exact dot.
TEST(GgmlCompat, TargetsDifferOnlyInTheirOrders) {
  const GgmlCompatKernels& fp16 = GgmlCompatKernelsFor(Isa::kScalar, GgmlTarget::kAvx512Fp16);
  const GgmlCompatKernels& avx512 = GgmlCompatKernelsFor(Isa::kScalar, GgmlTarget::kAvx512);
  const GgmlCompatKernels& avx2 = GgmlCompatKernelsFor(Isa::kScalar, GgmlTarget::kAvx2);
  EXPECT_EQ(avx512.gemm_multiple, 16u);
  EXPECT_EQ(avx2.gemm_multiple, 8u);
  size_t differ = 0;
  for (size_t n : {8, 24, 64, 136, 256, 1000}) {
    const auto a = Random(n, 5 + n), b = Random(n, 50 + n);
    std::vector<uint16_t> a16(n), b16(n);
    std::vector<float> aw(n), bw(n);
    double exact = 0, mag = 0;
    for (size_t i = 0; i < n; ++i) {
      a16[i] = Fp32ToFp16(a[i]);
      b16[i] = Fp32ToFp16(b[i]);
      aw[i] = Fp16ToFp32(a16[i]);
      bw[i] = Fp16ToFp32(b16[i]);
      exact += static_cast<double>(aw[i]) * bw[i];
      mag += std::fabs(static_cast<double>(aw[i]) * bw[i]);
    }
    if (n % 64 == 0) {  // no leftover (summed in double for F16 rows, in float for F32)
      EXPECT_EQ(avx512.f16_vec(a16.data(), b16.data(), n), fp16.f32_vec(aw.data(), bw.data(), n)) << n;
    }
    for (const GgmlCompatKernels* k : {&avx512, &avx2}) {
      EXPECT_NEAR(k->f16_vec(a16.data(), b16.data(), n), exact, 1e-6 * mag) << k->name << " " << n;
      EXPECT_NEAR(k->f32_vec(a.data(), b.data(), n), std::inner_product(a.begin(), a.end(), b.begin(), 0.0), 1e-5 * (1.0 + mag));
      if (n % k->gemm_multiple == 0) {
        EXPECT_NEAR(k->f16_gemm(a16.data(), b16.data(), n), exact, 1e-6 * mag) << k->name;
      }
    }
    differ += avx2.f16_vec(a16.data(), b16.data(), n) != avx512.f16_vec(a16.data(), b16.data(), n);
  }
  {  // eight terms: (l0 + l4) + (l2 + l6) + ((l1 + l5) + (l3 + l7)) for the AVX2 GEMM order
    const float big = 0x1p24f;
    const float a8[8] = {big, 1, 1, 1, -big, 1, 1, 1}, ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    EXPECT_EQ(avx2.f32_gemm(a8, ones, 8), 6.0f);
  }
  EXPECT_GT(differ, 0u) << "the two builds' orders never differed: is the AVX2 order in use?";
}

// MXFP4 in the reference's order: the same exact block sums as QuantDot,
// added in another order (one block: the same bits).
TEST(GgmlCompat, Mxfp4DotIsTheBlockSumsInTheReferenceOrder) {
  for (size_t nb : {1, 2, 3, 6, 9}) {
    const size_t n = nb * kQuantBlock;
    const auto w = Random(n, 23 + nb), x = Random(n, 230 + nb);
    std::vector<BlockMXFP4> wm(nb);
    QuantizeRow(TensorType::kMXFP4, w.data(), wm.data(), n);
    std::vector<BlockQ8_0> x8(nb);
    std::vector<BlockQ8A> xa(nb);
    GgmlQuantizeRowQ8_0(x.data(), x8.data(), n);
    Q8_0ToQ8A(x8.data(), xa.data(), nb);
    const float ours = QuantDot(TensorType::kMXFP4, wm.data(), xa.data(), n);
    const float ggml = GgmlDotMxfp4(wm.data(), x8.data(), nb);
    if (nb == 1) {
      EXPECT_EQ(ggml, ours);
    } else {
      EXPECT_NEAR(ggml, ours, 1e-5f * (1.0f + std::fabs(ours))) << nb;
    }
  }
}

TEST(GgmlCompat, ActivationQuantizerRoundsTiesToEven) {
  // max|x| = 127 makes the scale exactly 1, so x.5 values are ties.
  std::vector<float> x(kQuantBlock, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = 3.5f;
  x[3] = -2.5f;
  x[4] = 0.49f;
  BlockQ8_0 q;
  GgmlQuantizeRowQ8_0(x.data(), &q, kQuantBlock);
  EXPECT_EQ(Fp16ToFp32(q.d), 1.0f);
  EXPECT_EQ(q.qs[0], 127);
  EXPECT_EQ(q.qs[1], 2);
  EXPECT_EQ(q.qs[2], 4);
  EXPECT_EQ(q.qs[3], -2);
  EXPECT_EQ(q.qs[4], 0);
  // The file-format quantizer rounds the same ties away from zero.
  BlockQ8_0 f;
  QuantizeRow(TensorType::kQ8_0, x.data(), &f, kQuantBlock);
  EXPECT_EQ(f.qs[1], 3);
  EXPECT_EQ(f.qs[3], -3);
}

// Both builds' forms of the approximation, which round differently.
TEST(GgmlCompat, ExpApproximationIsWithinTwoUlps) {
  const GgmlTarget before = ActiveGgmlTarget();
  size_t differ = 0;
  for (float x = -87.0f; x < 87.0f; x += 0.00731f) {
    SetGgmlTarget(GgmlTarget::kAvx2);
    const float e2 = GgmlExpApprox(x);
    SetGgmlTarget(GgmlTarget::kAvx512);
    const float e512 = GgmlExpApprox(x);
    differ += e2 != e512;
    for (float e : {e2, e512}) EXPECT_LT(std::fabs(e / std::exp(x) - 1.0f), 2.5e-7f) << x;
  }
  EXPECT_GT(differ, 0u);
  for (GgmlTarget t : {GgmlTarget::kAvx2, GgmlTarget::kAvx512}) {
    SetGgmlTarget(t);
    EXPECT_EQ(GgmlExpApprox(0.0f), 1.0f);
    EXPECT_EQ(GgmlExpApprox(-200.0f), std::exp(-200.0f));  // outside: libm
  }
  SetGgmlTarget(before);
}

TEST(GgmlCompat, SiluApproximatesVectorPartAndUsesLibmForTheTail) {
  const size_t rows = 3, len = 37;  // 32 approximated, 5 by libm per row
  const auto gate = Random(rows * len, 11), up = Random(rows * len, 12);
  std::vector<float> out(rows * len);
  GgmlSiluMul(gate.data(), up.data(), out.data(), rows, len);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t i = 0; i < len; ++i) {
      const size_t k = r * len + i;
      const float libm = gate[k] / (1.0f + std::exp(-gate[k])) * up[k];
      if (i >= 32) {
        EXPECT_EQ(out[k], libm) << r << "," << i;
      } else {
        EXPECT_NEAR(out[k], libm, 1e-6f * (1.0f + std::fabs(libm))) << r << "," << i;
      }
    }
  }
}

}  // namespace
}  // namespace pc

namespace pc {
namespace {

// The reference's soft_max (the routers of its mixtures of experts): whole
// vectors of the target's width through the approximate exp, the rest
// through libm's, every value multiplied by the float reciprocal of the
// double sum, not divided by it.
TEST(GgmlCompat, SoftMaxRowIsTheReferences) {
  const GgmlTarget saved = ActiveGgmlTarget();
  size_t reciprocal_differs = 0;
  for (GgmlTarget t : {GgmlTarget::kAvx2, GgmlTarget::kAvx512}) {
    SetGgmlTarget(t);
    const size_t lanes = GgmlVectorLanes();
    for (size_t n : {size_t{3}, size_t{8}, size_t{19}, size_t{32}, size_t{128}}) {
      for (uint32_t seed = 1; seed <= 20; ++seed) {
        std::vector<float> x = Random(n, seed * 7 + static_cast<uint32_t>(n));
        for (float& v : x) v *= 4.0f;
        std::vector<float> y(n);
        GgmlSoftMaxRow(x.data(), y.data(), n);
        const float max = *std::max_element(x.begin(), x.end());
        double sum = 0, exact_sum = 0;
        std::vector<float> e(n);
        for (size_t i = 0; i < n; ++i) {
          e[i] = i < n - n % lanes ? GgmlExpApprox(x[i] - max) : std::exp(x[i] - max);
          exact_sum += std::exp(static_cast<double>(x[i]) - max);
        }
        for (size_t i = 0; i + lanes <= n; i += lanes) sum += GgmlReduceLanes(&e[i]);
        for (size_t i = n - n % lanes; i < n; ++i) sum += e[i];
        double total = 0;
        for (size_t i = 0; i < n; ++i) {
          EXPECT_NEAR(y[i], std::exp(static_cast<double>(x[i]) - max) / exact_sum, 1e-6) << n << " " << i;
          total += y[i];
          if (n < lanes) {
            EXPECT_EQ(y[i], std::exp(x[i] - max) * static_cast<float>(1.0 / sum)) << n << " " << i;
          }
          reciprocal_differs += y[i] != static_cast<float>(e[i] / sum);
        }
        EXPECT_NEAR(total, 1.0, 1e-5) << n;
      }
    }
  }
  SetGgmlTarget(saved);
  EXPECT_GT(reciprocal_differs, 0u) << "multiplying by the reciprocal never differed from dividing";
}

}  // namespace
}  // namespace pc
