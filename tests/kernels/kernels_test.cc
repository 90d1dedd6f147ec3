// Every SIMD kernel against its scalar reference over many sizes (0, 1, odd,
// non-multiples of the vector width and block size) and misaligned inputs.
#include <cmath>
#include <cstring>
#include <random>

#include "base/fp16.h"
#include "kernels/attention.h"
#include "kernels/ggml_compat.h"
#include "kernels/dot.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "test_support.h"

namespace pc {
namespace {

using test::RandomFloats;

std::vector<const DotKernels*> SimdTables() {
  std::vector<const DotKernels*> out;
  if (BestSupportedIsa() >= Isa::kAvx2 && Avx2DotKernels() != nullptr) out.push_back(Avx2DotKernels());
  return out;
}

const size_t kSizes[] = {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 255, 256, 257, 1000, 4099};

void ExpectClose(float got, float want, double terms, const char* what, size_t n) {
  const double tol = 1e-5 * (1.0 + std::fabs(want)) + 1e-6 * terms;
  EXPECT_NEAR(got, want, tol) << what << " n=" << n;
}

TEST(Kernels, SimdTablesPresentOnThisMachine) {
  // Documented for the logs: which SIMD tables the tests compare.
  std::printf("best ISA %s, features: %s, SIMD tables tested: %zu\n", IsaName(BestSupportedIsa()),
              CpuFeatureSummary().c_str(), SimdTables().size());
  SUCCEED();
}

TEST(Kernels, FloatDotsMatchScalarAtEverySizeAndOffset) {
  const DotKernels& ref = ScalarDotKernels();
  for (const DotKernels* k : SimdTables()) {
    for (size_t n : kSizes) {
      for (size_t off : {0u, 1u, 3u}) {  // misalign by whole elements
        auto a = RandomFloats(n + off, 1), b = RandomFloats(n + off, 2);
        ExpectClose(k->f32(a.data() + off, b.data() + off, n), ref.f32(a.data() + off, b.data() + off, n), n, "f32", n);
        std::vector<uint16_t> ah(n + off), bh(n + off), ab(n + off), bb(n + off);
        for (size_t i = 0; i < n + off; ++i) {
          ah[i] = Fp32ToFp16(a[i]); bh[i] = Fp32ToFp16(b[i]);
          ab[i] = Fp32ToBf16(a[i]); bb[i] = Fp32ToBf16(b[i]);
        }
        ExpectClose(k->f16(ah.data() + off, bh.data() + off, n), ref.f16(ah.data() + off, bh.data() + off, n), n, "f16", n);
        ExpectClose(k->bf16(ab.data() + off, bb.data() + off, n), ref.bf16(ab.data() + off, bb.data() + off, n), n, "bf16", n);
        ExpectClose(k->dot_f32_f16(a.data() + off, bh.data() + off, n), ref.dot_f32_f16(a.data() + off, bh.data() + off, n), n, "f32xf16", n);
        std::vector<float> y1 = RandomFloats(n + off, 3), y2 = y1;
        k->axpy_f32(0.37f, a.data() + off, y1.data() + off, n);
        ref.axpy_f32(0.37f, a.data() + off, y2.data() + off, n);
        for (size_t i = 0; i < n + off; ++i) EXPECT_NEAR(y1[i], y2[i], 1e-5) << "axpy_f32 n=" << n;
        y1 = RandomFloats(n + off, 4);
        y2 = y1;
        k->axpy_f16(-1.5f, bh.data() + off, y1.data() + off, n);
        ref.axpy_f16(-1.5f, bh.data() + off, y2.data() + off, n);
        for (size_t i = 0; i < n + off; ++i) EXPECT_NEAR(y1[i], y2[i], 1e-5) << "axpy_f16 n=" << n;
        std::vector<uint16_t> h1(n), h2(n);
        k->to_f16(a.data() + off, h1.data(), n);
        ref.to_f16(a.data() + off, h2.data(), n);
        EXPECT_EQ(h1, h2) << "to_f16 must round exactly like the scalar code, n=" << n;
      }
    }
  }
}

TEST(Quant, RoundTripErrorIsWithinHalfAStep) {
  for (size_t n : {32u, 64u, 320u}) {
    auto x = RandomFloats(n, 7);
    std::vector<BlockQ8_0> q8(n / 32);
    std::vector<BlockQ4_0> q4(n / 32);
    std::vector<float> y8(n), y4(n);
    QuantizeRowQ8_0(x.data(), q8.data(), n);
    QuantizeRowQ4_0(x.data(), q4.data(), n);
    DequantizeRow(TensorType::kQ8_0, q8.data(), y8.data(), n);
    DequantizeRow(TensorType::kQ4_0, q4.data(), y4.data(), n);
    for (size_t b = 0; b < n / 32; ++b) {
      float amax = 0;
      for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
      for (size_t i = 0; i < 32; ++i) {
        EXPECT_LE(std::fabs(y8[b * 32 + i] - x[b * 32 + i]), amax / 127 * 0.51 + 1e-3 * amax);
        // Q4_0 maps the signed extreme to -8, so the opposite extreme may clamp at +7: one step.
        EXPECT_LE(std::fabs(y4[b * 32 + i] - x[b * 32 + i]), amax / 8 * 1.01);
      }
    }
  }
}

TEST(Quant, Q4_0NibbleOrderIsLowHalfFirst) {
  // Element j comes from the low nibble of byte j, element j+16 from its high nibble.
  BlockQ4_0 b{};
  b.d = Fp32ToFp16(1.0f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>((j & 15) | (((15 - j) & 15) << 4));
  float y[32];
  DequantizeRow(TensorType::kQ4_0, &b, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], static_cast<float>(j - 8));
    EXPECT_EQ(y[j + 16], static_cast<float>(15 - j - 8));
  }
}

TEST(Quant, Q8_0ScaleIsMaxAbsOver127) {
  std::vector<float> x(32, 0.0f);
  x[5] = -2.54f;
  x[9] = 1.27f;
  BlockQ8_0 b;
  QuantizeRowQ8_0(x.data(), &b, 32);
  EXPECT_NEAR(Fp16ToFp32(b.d), 0.02f, 1e-5);
  EXPECT_EQ(b.qs[5], -127);
  EXPECT_EQ(b.qs[9], 64);  // 63.5 rounds away from zero
}

TEST(Fp16, ConversionIsExactForEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = Fp16ToFp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(Fp32ToFp16(f), h) << h;
  }
  EXPECT_EQ(Fp32ToFp16(65520.0f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(Fp32ToFp16(1.0f + 1.0f / 4096), 0x3c00);  // tie to even
}

// The rows variant runs four rows' sums side by side: each row's bits must
// equal RmsNorm's (one chain per row, in order), in place or not, for every
// row count around the four-row blocks and sizes from 1 to a wide model's.
TEST(Ops, RmsNormRowsEqualsRmsNormRowByRow) {
  uint32_t seed = 1;
  for (size_t n : {size_t{1}, size_t{3}, size_t{64}, size_t{128}, size_t{576}, size_t{2049}}) {
    const std::vector<float> w = RandomFloats(n, seed++, 1.0f);
    for (size_t rows : {size_t{1}, size_t{2}, size_t{3}, size_t{4}, size_t{5}, size_t{8}, size_t{11}}) {
      // Rows of very different magnitudes: a chain mixed with another row's
      // would show in the bits.
      std::vector<float> x = RandomFloats(rows * n, seed++, 1.0f);
      for (size_t r = 0; r < rows; ++r) {
        for (size_t i = 0; i < n; ++i) x[r * n + i] *= std::ldexp(1.0f, static_cast<int>(r * 7 % 23) - 11);
      }
      std::vector<float> want(rows * n), got(rows * n), in_place = x;
      for (size_t r = 0; r < rows; ++r) RmsNorm(&x[r * n], w.data(), &want[r * n], n, 1e-6f);
      RmsNormRows(x.data(), w.data(), got.data(), rows, n, 1e-6f);
      RmsNormRows(in_place.data(), w.data(), in_place.data(), rows, n, 1e-6f);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float))) << n << " " << rows;
      ASSERT_EQ(0, std::memcmp(in_place.data(), want.data(), want.size() * sizeof(float))) << n << " " << rows;
    }
  }
}

TEST(Ops, RmsNormRopeAndSoftmaxBehave) {
  std::vector<float> x = {1, 2, 3, 4}, w = {1, 1, 1, 1}, out(4);
  RmsNorm(x.data(), w.data(), out.data(), 4, 0.0f);
  const float rms = std::sqrt((1 + 4 + 9 + 16) / 4.0f);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[i], x[i] / rms, 1e-6);
  // RoPE at position 0 is the identity; rotations preserve pair norms.
  std::vector<float> v = RandomFloats(16, 9), v0 = v;
  RopeParams rp;
  rp.head_dim = rp.rope_dim = 8;
  Rope(v.data(), 2, 0, rp);
  EXPECT_EQ(v, v0);
  for (bool neox : {false, true}) {
    v = v0;
    rp.neox = neox;
    Rope(v.data(), 2, 17, rp);
    for (int h = 0; h < 2; ++h) {
      for (int i = 0; i < 4; ++i) {
        const int a = h * 8 + (neox ? i : 2 * i), b = h * 8 + (neox ? i + 4 : 2 * i + 1);
        EXPECT_NEAR(v[a] * v[a] + v[b] * v[b], v0[a] * v0[a] + v0[b] * v0[b], 1e-4);
      }
    }
  }
  // Linear scaling by 4 at position 68 is position 17; frequency divisors
  // of 2 at position 34 are position 17 too.
  rp.neox = false;
  std::vector<float> at17 = v0, scaled = v0, divided = v0;
  Rope(at17.data(), 2, 17, rp);
  rp.freq_scale = 0.25f;
  Rope(scaled.data(), 2, 68, rp);
  const float twos[4] = {2, 2, 2, 2};
  rp.freq_scale = 1;
  rp.freq_factors = twos;
  Rope(divided.data(), 2, 34, rp);
  for (size_t i = 0; i < v0.size(); ++i) {
    EXPECT_NEAR(scaled[i], at17[i], 1e-5) << i;
    EXPECT_NEAR(divided[i], at17[i], 1e-5) << i;
  }
  std::vector<float> logits = {1, 2, 3}, lp(3);
  LogSoftmax(logits.data(), lp.data(), 3);
  double s = 0;
  for (float l : lp) s += std::exp(l);
  EXPECT_NEAR(s, 1.0, 1e-6);
}

// Attention through a shuffled block table equals a plain softmax(QK^T)V.
TEST(Attention, PagedOnlineSoftmaxMatchesDirectComputation) {
  const size_t head_dim = 16, n_kv_head = 2, n_head = 4, block = 4, n_pos = 11;
  const size_t kv_dim = n_kv_head * head_dim;
  const std::vector<int32_t> table = {2, 0, 3};  // positions 0-3 in block 2, ...
  std::vector<float> k = RandomFloats(4 * block * kv_dim, 10), v = RandomFloats(4 * block * kv_dim, 11);
  const auto q = RandomFloats(n_head * head_dim, 12);
  for (KvDtype dt : {KvDtype::kF32, KvDtype::kF16}) {
    std::vector<uint16_t> kh(k.size()), vh(v.size());
    for (size_t i = 0; i < k.size(); ++i) {
      kh[i] = Fp32ToFp16(k[i]);
      vh[i] = Fp32ToFp16(v[i]);
    }
    KvLayerView view{dt == KvDtype::kF16 ? static_cast<const void*>(kh.data()) : k.data(),
                     dt == KvDtype::kF16 ? static_cast<const void*>(vh.data()) : v.data(), dt, block, kv_dim, table};
    auto row = [&](const std::vector<float>& m, size_t p, size_t g, size_t i) {
      const size_t r = table[p / block] * block + p % block;
      const float val = m[r * kv_dim + g * head_dim + i];
      return dt == KvDtype::kF16 ? Fp16ToFp32(Fp32ToFp16(val)) : val;
    };
    for (const DotKernels* kern : {&ScalarDotKernels(), &ActiveDotKernels()}) {
      std::vector<float> out(n_head * head_dim);
      AttendOne(*kern, q.data(), view, n_pos - 1, n_head, n_kv_head, head_dim, out.data());
      for (size_t h = 0; h < n_head; ++h) {
        const size_t g = h / (n_head / n_kv_head);
        std::vector<double> s(n_pos);
        double mx = -1e30, sum = 0;
        for (size_t p = 0; p < n_pos; ++p) {
          double d = 0;
          for (size_t i = 0; i < head_dim; ++i) d += q[h * head_dim + i] * row(k, p, g, i);
          s[p] = d / std::sqrt(static_cast<double>(head_dim));
          mx = std::max(mx, s[p]);
        }
        for (auto& x : s) sum += (x = std::exp(x - mx));
        for (size_t i = 0; i < head_dim; ++i) {
          double want = 0;
          for (size_t p = 0; p < n_pos; ++p) want += s[p] / sum * row(v, p, g, i);
          EXPECT_NEAR(out[h * head_dim + i], want, 1e-4) << "head " << h;
        }
        if (dt == KvDtype::kF16) {
          std::vector<float> approx(head_dim);
          AttendHeadF16Accum(q.data() + h * head_dim, view, n_pos - 1, g, head_dim, approx.data());
          for (size_t i = 0; i < head_dim; ++i) EXPECT_NEAR(approx[i], out[h * head_dim + i], 5e-3);
          AttendHeadGgmlTiled(q.data() + h * head_dim, view, n_pos - 1, g, head_dim, approx.data());
          for (size_t i = 0; i < head_dim; ++i) EXPECT_NEAR(approx[i], out[h * head_dim + i], 1e-5);
        }
      }
    }
  }
}

// The tiled emulation over several 64-position tiles (running-max rescaling
// between tiles, a partial last tile) and a table of scattered blocks: F32
// accumulation, so it agrees with the precise kernel to float rounding.
TEST(Attention, GgmlTiledEmulationMatchesPreciseAcrossTiles) {
  const size_t head_dim = 32, block = 16, n_blocks = 12;
  const std::vector<int32_t> table = {5, 1, 11, 0, 7, 3, 9, 2, 10, 4, 8, 6};
  std::vector<uint16_t> kh(n_blocks * block * head_dim), vh(kh.size());
  const auto k = RandomFloats(kh.size(), 21), v = RandomFloats(vh.size(), 22), q = RandomFloats(head_dim, 23, 3.0f);
  for (size_t i = 0; i < kh.size(); ++i) {
    kh[i] = Fp32ToFp16(k[i]);
    vh[i] = Fp32ToFp16(v[i]);
  }
  const KvLayerView view{kh.data(), vh.data(), KvDtype::kF16, block, head_dim, table};
  for (size_t pos : {0, 63, 64, 100, 191}) {
    std::vector<float> want(head_dim), got(head_dim);
    AttendHead(ScalarDotKernels(), q.data(), view, pos, 0, head_dim, want.data());
    AttendHeadGgmlTiled(q.data(), view, pos, 0, head_dim, got.data());
    for (size_t i = 0; i < head_dim; ++i) EXPECT_NEAR(got[i], want[i], 2e-5) << "pos " << pos << " dim " << i;
  }
}

// Windows and soft-caps (AttendHeadExtras, and its F16-accumulator twin)
// against the direct computation: softmax over positions (pos - window, pos]
// of cap * tanh(score / cap), scattered blocks, F32 and F16 K/V.
TEST(Attention, WindowAndSoftCapMatchDirectComputation) {
  const size_t head_dim = 32, block = 16, n_blocks = 6;
  const std::vector<int32_t> table = {3, 0, 5, 1, 4, 2};
  const auto k = RandomFloats(n_blocks * block * head_dim, 31), v = RandomFloats(k.size(), 32);
  const auto q = RandomFloats(head_dim, 33, 4.0f);  // large scores: the cap bites
  std::vector<uint16_t> kh(k.size()), vh(v.size());
  for (size_t i = 0; i < k.size(); ++i) kh[i] = Fp32ToFp16(k[i]), vh[i] = Fp32ToFp16(v[i]);
  for (KvDtype dt : {KvDtype::kF32, KvDtype::kF16}) {
    const bool f16 = dt == KvDtype::kF16;
    const KvLayerView view{f16 ? static_cast<const void*>(kh.data()) : k.data(),
                           f16 ? static_cast<const void*>(vh.data()) : v.data(), dt, block, head_dim, table};
    auto at = [&](const std::vector<float>& m, size_t p, size_t i) {
      const float x = m[(table[p / block] * block + p % block) * head_dim + i];
      return f16 ? Fp16ToFp32(Fp32ToFp16(x)) : x;
    };
    for (const AttnExtras x : {AttnExtras{0, 0, 0}, AttnExtras{7, 0, 0}, AttnExtras{0, 0.2f, 5.0f},
                               AttnExtras{16, 0.2f, 5.0f}, AttnExtras{1, 0, 0}}) {
      for (size_t pos : {0, 5, 6, 40, 95}) {
        const float scale = x.scale != 0 ? x.scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
        const size_t lo = x.window != 0 && pos + 1 > x.window ? pos + 1 - x.window : 0;
        std::vector<double> s(pos + 1, -1e300);
        double mx = -1e300, sum = 0;
        for (size_t p = lo; p <= pos; ++p) {
          double d = 0;
          for (size_t i = 0; i < head_dim; ++i) {
            const double qi = f16 ? Fp16ToFp32(Fp32ToFp16(q[i] * scale)) : q[i] * scale;
            d += qi * at(k, p, i);
          }
          s[p] = x.softcap != 0 ? x.softcap * std::tanh(d / x.softcap) : d;
          mx = std::max(mx, s[p]);
        }
        for (size_t p = lo; p <= pos; ++p) sum += (s[p] = std::exp(s[p] - mx));
        std::vector<float> got(head_dim), approx(head_dim);
        AttendHeadExtras(ActiveDotKernels(), q.data(), view, pos, 0, head_dim, x, got.data());
        if (f16) AttendHeadExtrasF16Accum(q.data(), view, pos, 0, head_dim, x, approx.data());
        for (size_t i = 0; i < head_dim; ++i) {
          double want = 0;
          for (size_t p = lo; p <= pos; ++p) want += s[p] / sum * at(v, p, i);
          EXPECT_NEAR(got[i], want, 1e-4) << "window " << x.window << " cap " << x.softcap << " pos " << pos;
          if (f16) {
            EXPECT_NEAR(approx[i], want, 5e-3) << "window " << x.window << " cap " << x.softcap << " pos " << pos;
          }
        }
      }
    }
  }
}

TEST(Ops, GeluSoftCapAndYarnFollowTheirFormulas) {
  const float gate[] = {1.0f, -2.0f, 0.0f, 12.0f, -11.0f}, up[] = {2.0f, 1.0f, 5.0f, 0.5f, 3.0f};
  float out[5], out16[5];
  GeluMul(gate, up, out, 5);
  GeluMulF16(gate, up, out16, 5);
  const double want[] = {0.841191990607477 * 2, -0.04540230591282446, 0.0, 12.0 * 0.5, -11.0 * 3 * 0.0};
  for (int i = 0; i < 5; ++i) {
    EXPECT_NEAR(out[i], want[i], 1e-5) << i;
    EXPECT_NEAR(out16[i], want[i], 2e-3 * std::fabs(want[i]) + 1e-6) << i;  // one F16 rounding each way
  }
  EXPECT_EQ(out16[3], 6.0f);  // past 10: the input itself
  EXPECT_EQ(out16[4], 0.0f);  // past -10: zero
  float caps[] = {100.0f, 3.0f, -100.0f, 0.0f};
  SoftCap(caps, 4, 30.0f);
  EXPECT_NEAR(caps[0], 29.92373902, 1e-4);
  EXPECT_NEAR(caps[1], 2.99003984, 1e-5);
  EXPECT_NEAR(caps[2], -29.92373902, 1e-4);
  EXPECT_EQ(caps[3], 0.0f);
  // 64 rotated dims trained on 1,024 positions, base 1e6: the dims where
  // the rotation count is 32 and 1 are 3.77 and 11.80 -> [3, 12].
  float low = 0, high = 0;
  YarnCorrDims(64, 1024, 1e6f, 32.0f, 1.0f, &low, &high);
  EXPECT_EQ(low, 3.0f);
  EXPECT_EQ(high, 12.0f);
  // Below the ramp the angle is the unscaled one, above it the interpolated
  // one; cos/sin scaled by 1 + 0.1 ln 4 everywhere.
  RopeParams yarn{64, 64, 1e6f, true, 0.25f, nullptr, 1.0f, 1.0f, low, high};
  RopeParams plain = yarn;
  plain.ext_factor = 0;
  float cy[64], cp[64];
  RopeAngles(1000, yarn, cy);
  RopeAngles(1000, plain, cp);
  const float mscale = 1.0f + 0.1f * std::log(4.0f);
  const float theta0 = 1000.0f, theta20 = 1000.0f * std::pow(1e6f, -40.0f / 64.0f) * 0.25f;
  EXPECT_NEAR(cy[0], std::cos(theta0) * mscale, 1e-4);   // pair 0: extrapolated
  EXPECT_NEAR(cy[40], std::cos(theta20) * mscale, 1e-4);  // pair 20: interpolated
  EXPECT_NEAR(cy[41], cp[41] * mscale, 1e-5);
}

}  // namespace
}  // namespace pc

namespace pc {
namespace {
TEST(Quant, Q8_0RoundingEqualsRoundfEverywhere) {
  // Values straddling every rounding boundary of the 8-bit grid.
  std::vector<float> x(32);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int trial = 0; trial < 2000; ++trial) {
    for (auto& v : x) v = std::nextafter(std::round(u(rng) * 126.0f) + 0.5f * (trial % 2), 0.0f) / 127.0f;
    x[0] = 1.0f;  // pins the scale to 1/127
    BlockQ8_0 b;
    QuantizeRowQ8_0(x.data(), &b, 32);
    const float d = 1.0f / 127.0f, id = 1.0f / d;
    for (int i = 0; i < 32; ++i) ASSERT_EQ(b.qs[i], static_cast<int8_t>(std::roundf(x[i] * id))) << x[i];
  }
}
}  // namespace
}  // namespace pc
