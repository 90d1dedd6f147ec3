// Every quantized weight format: its bit layout (decode/encode, the x16
// repacked layout), its arithmetic (the reference dot against a float dot),
// our quantizer, and every SIMD x16 kernel against the scalar reference dot,
// bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include <cmath>
#include <cstring>
#include <random>

#include "base/fp16.h"
#include "kernels/matmul.h"
#include "kernels/qpack_kernels.h"
#include "kernels/quant.h"
#include "test_support.h"

namespace pc {
namespace {

std::vector<TensorType> QuantTypes() { return {std::begin(kX16Types), std::end(kX16Types)}; }

std::string Name(const ::testing::TestParamInfo<TensorType>& info) { return TensorTypeName(info.param); }

// Random bytes for n elements of type t, with every fp16 scale field set to
// a modest finite value (random bits would give infinities and NaNs; E8M0
// scales to powers of two near one).
std::vector<uint8_t> RandomBlocks(TensorType t, size_t n, std::mt19937& rng) {
  const size_t bb = BlockBytes(t), nb = n / BlockElems(t);
  std::vector<uint8_t> out(nb * bb);
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  for (size_t b = 0; b < nb; ++b) {
    DecodedBlock d;
    DecodeBlock(t, out.data() + b * bb, &d);
    d.dh = Fp32ToFp16(0.001f * static_cast<float>(1 + rng() % 200));
    if (d.bf16_scale) d.dh = E8m0HalfToBf16(static_cast<uint8_t>(110 + rng() % 30));  // 2^-18 .. 2^1
    if (d.has_min) d.mh = Fp32ToFp16(0.001f * static_cast<float>(rng() % 200) * (rng() % 2 ? 1 : -1));
    if (d.has_min && d.n == 256) d.mh &= 0x7fff;  // dmin >= 0 as quantizers write it (any sign is computed alike)
    EncodeBlock(t, d, out.data() + b * bb);
  }
  return out;
}

// Activation rows for weight type t from floats, in ActivationTypeFor(t).
std::vector<uint8_t> Activations(TensorType t, const std::vector<float>& x, size_t n_tok, size_t cols) {
  const TensorType at = ActivationTypeFor(t);
  const size_t rb = RowBytes(at, cols);
  std::vector<uint8_t> out(n_tok * rb);
  for (size_t i = 0; i < n_tok; ++i) {
    if (at == TensorType::kQ8_K) QuantizeRowQ8_K(x.data() + i * cols, reinterpret_cast<BlockQ8_K*>(out.data() + i * rb), cols);
    else QuantizeRowQ8A(x.data() + i * cols, reinterpret_cast<BlockQ8A*>(out.data() + i * rb), cols);
  }
  return out;
}

class QuantFormats : public ::testing::TestWithParam<TensorType> {};
INSTANTIATE_TEST_SUITE_P(AllTypes, QuantFormats, ::testing::ValuesIn(QuantTypes()), Name);

// Decoding then encoding gives back every byte of a random block: each bit
// of the layout is read by the decoder and written back to the same place.
TEST_P(QuantFormats, DecodeEncodeRoundTripsRandomBytes) {
  const TensorType t = GetParam();
  std::mt19937 rng(1);
  for (int i = 0; i < 50; ++i) {
    std::vector<uint8_t> block(BlockBytes(t)), back(BlockBytes(t));
    for (uint8_t& b : block) b = static_cast<uint8_t>(rng());
    DecodedBlock d;
    DecodeBlock(t, block.data(), &d);
    EncodeBlock(t, d, back.data());
    if (t == TensorType::kMXFP4) {
      // Nibble 8 is -0: the same value as nibble 0, which it encodes back to.
      for (size_t j = 1; j < block.size(); ++j) {
        if ((block[j] & 15) == 8) block[j] &= 0xF0;
        if ((block[j] >> 4) == 8) block[j] &= 0x0F;
      }
    }
    ASSERT_EQ(block, back) << TensorTypeName(t) << " try " << i;
  }
}

// The reference dot equals the float dot of the dequantized rows (the
// integer form of the arithmetic is the format's meaning, offsets and
// minima with their signs), up to float rounding.
TEST_P(QuantFormats, ReferenceDotEqualsTheDotOfDequantizedRows) {
  const TensorType t = GetParam();
  std::mt19937 rng(2);
  for (size_t nb : {1u, 3u}) {
    const size_t n = nb * BlockElems(t);
    const std::vector<uint8_t> w = RandomBlocks(t, n, rng);
    const std::vector<float> xf = test::RandomFloats(n, 3, 2.0f);
    const std::vector<uint8_t> x = Activations(t, xf, 1, n);
    std::vector<float> wd(n), xd(n);
    DequantizeRow(t, w.data(), wd.data(), n);
    // The activation's own values: d * q.
    for (size_t b = 0; b < n / BlockElems(t); ++b) {
      for (size_t e = 0; e < BlockElems(t); ++e) {
        const size_t i = b * BlockElems(t) + e;
        if (ActivationTypeFor(t) == TensorType::kQ8_K) {
          const auto& xb = reinterpret_cast<const BlockQ8_K*>(x.data())[b];
          xd[i] = xb.d * xb.qs[e];
        } else {
          const auto& xb = reinterpret_cast<const BlockQ8A*>(x.data())[b];
          xd[i] = xb.d * xb.qs[e];
        }
      }
    }
    double expect = 0, mag = 0;
    for (size_t i = 0; i < n; ++i) {
      expect += static_cast<double>(wd[i]) * xd[i];
      mag += std::fabs(static_cast<double>(wd[i]) * xd[i]);
    }
    EXPECT_NEAR(QuantDot(t, w.data(), x.data(), n), expect, 1e-5 * mag + 1e-6) << TensorTypeName(t) << " nb " << nb;
  }
}

// Our quantizer: dequantized values stay close to the input (within a
// fraction of the block's range that the format's bits allow).
TEST_P(QuantFormats, QuantizerRoundTripsWithinTheFormatsStep) {
  const TensorType t = GetParam();
  const size_t n = 4 * BlockElems(t);
  const std::vector<float> x = test::RandomFloats(n, 4);
  std::vector<uint8_t> q(RowBytes(t, n));
  std::vector<float> y(n);
  QuantizeRow(t, x.data(), q.data(), n);
  DequantizeRow(t, q.data(), y.data(), n);
  const int bits = QuantFormatOf(t)->bits;
  float amax = 0;
  double err2 = 0, x2 = 0;
  for (size_t i = 0; i < n; ++i) {
    amax = std::max(amax, std::fabs(x[i]));
    err2 += (x[i] - y[i]) * (x[i] - y[i]);
    x2 += x[i] * x[i];
  }
  // Root-mean-square error relative to the signal: about 2^-bits; the
  // two-level scales of the K-quants cost a little more.
  const double rel = std::sqrt(err2 / x2), bound = 1.6 * std::ldexp(1.0, -bits + 1);
  EXPECT_LT(rel, bound) << TensorTypeName(t);
  for (size_t i = 0; i < n; ++i) ASSERT_LE(std::fabs(x[i] - y[i]), amax) << i;
}

// Repacking 16 rows and reading a row back gives its bytes; the x16 block
// size is what the layout comment says.
TEST_P(QuantFormats, X16LayoutRoundTrips) {
  const TensorType t = GetParam();
  std::mt19937 rng(5);
  const size_t nb = 3, n = nb * BlockElems(t), rb = RowBytes(t, n);
  std::vector<uint8_t> rows;
  for (int r = 0; r < 16; ++r) {
    const std::vector<uint8_t> row = RandomBlocks(t, n, rng);
    rows.insert(rows.end(), row.begin(), row.end());
  }
  const X16Layout l = X16LayoutOf(t);
  std::vector<uint8_t> packed(nb * l.bytes);
  RepackX16(t, rows.data(), rb, nb, packed.data());
  for (int r = 0; r < 16; ++r) {
    std::vector<uint8_t> back(rb);
    UnpackX16Row(t, packed.data(), nb, r, back.data());
    ASSERT_EQ(0, std::memcmp(back.data(), rows.data() + r * rb, rb)) << TensorTypeName(t) << " row " << r;
  }
  // The quants alone take exactly the file's bits (16 rows x n elements).
  const size_t quant_bytes = l.bytes - l.low;
  EXPECT_EQ(quant_bytes * 8, 16 * BlockElems(t) * static_cast<size_t>(l.bits)) << TensorTypeName(t);
}

// Every SIMD table's x16 kernel gives the reference dot's bits for every
// row, token count (1..9, 13, 17 and 25 through MatMulRows: 4-token calls
// and their remainders, pair passes of 4 to 7 tokens) and row range
// (ranges that cut a group included); weights are random bytes (every q
// value, extremes included) and activations reach +-127. With 67 rows
// every cut leaves two whole groups on one side, so the pair kernels run
// wherever a table has them.
std::vector<const X16Kernels*> X16TablesHere() {
  std::vector<const X16Kernels*> tables;
  for (Isa isa : {Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512}) {
    if (IsaSupported(isa) && X16KernelsFor(isa) != nullptr) tables.push_back(X16KernelsFor(isa));
  }
  return tables;
}

TEST_P(QuantFormats, X16KernelsEqualTheReferenceDotBitForBit) {
  const TensorType t = GetParam();
  const std::vector<const X16Kernels*> tables = X16TablesHere();
  if (tables.empty()) GTEST_SKIP() << "no SIMD level on this CPU";
  std::mt19937 rng(6);
  for (size_t nb : {1u, 2u, 5u}) {
    for (size_t rows : {16u, 35u, 67u}) {
      const size_t cols = nb * BlockElems(t), rb = RowBytes(t, cols);
      const std::vector<uint8_t> w = RandomBlocks(t, rows * cols, rng);
      const X16Layout l = X16LayoutOf(t);
      std::vector<uint8_t> packed(rows / 16 * nb * l.bytes);
      for (size_t g = 0; g < rows / 16; ++g) RepackX16(t, w.data() + g * 16 * rb, rb, nb, packed.data() + g * nb * l.bytes);
      const WeightMatrix m{t, w.data(), rows, cols, packed.data()};
      for (size_t n_tok : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u, 9u, 13u, 17u, 25u}) {
        std::vector<float> xf = test::RandomFloats(n_tok * cols, 7, 3.0f);
        for (size_t i = 0; i < xf.size(); i += 37) xf[i] = 40.0f * (i % 2 ? 1 : -1);  // extremes -> +-127
        const std::vector<uint8_t> x = Activations(t, xf, n_tok, cols);
        const size_t xb = RowBytes(ActivationTypeFor(t), cols);
        for (const X16Kernels* k : tables) {
          const size_t cut = 1 + rng() % (rows - 1);
          std::vector<float> y(n_tok * rows, -1.0f);
          MatMulRows(ScalarDotKernels(), k, m, x.data(), xb, n_tok, y.data(), rows, 0, cut);
          MatMulRows(ScalarDotKernels(), k, m, x.data(), xb, n_tok, y.data(), rows, cut, rows);
          for (size_t tok = 0; tok < n_tok; ++tok) {
            for (size_t r = 0; r < rows; ++r) {
              const float ref = QuantDot(t, w.data() + r * rb, x.data() + tok * xb, cols);
              ASSERT_EQ(y[tok * rows + r], ref) << k->name << " " << TensorTypeName(t) << " nb=" << nb << " rows=" << rows
                                                << " row=" << r << " token=" << tok << " of " << n_tok << " cut=" << cut;
            }
          }
        }
      }
      for (size_t r = 0; r < rows; ++r) {  // the embedding lookup reads the same values from the copy
        std::vector<float> from_packed(cols), from_data(cols);
        DequantizeMatrixRow(m, r, from_packed.data());
        DequantizeRow(t, w.data() + r * rb, from_data.data(), cols);
        ASSERT_EQ(from_packed, from_data) << "row " << r;
      }
    }
  }
}

// The largest integer sums a kernel adds: every stored q at its largest
// (or smallest) value and activations all +127, all -127 or alternating, so
// the 16-bit lane sums of the AVX2 level and the 32-bit sums of the others
// reach their bounds and still give the reference dot's bits.
TEST_P(QuantFormats, X16KernelsHoldAtTheLargestSums) {
  const TensorType t = GetParam();
  const std::vector<const X16Kernels*> tables = X16TablesHere();
  if (tables.empty()) GTEST_SKIP() << "no SIMD level on this CPU";
  const QuantFormat f = QuantFormatFor(t);
  // Grid formats store the grid value + 128: their largest and smallest.
  int q_max = (1 << f.bits) - 1, q_min = 0;
  if (f.grid != Grid::kNone) {
    const int8_t* v = GridValues(f.grid);
    q_max = 128 + *std::max_element(v, v + 16), q_min = 128 + *std::min_element(v, v + 16);
  }
  constexpr size_t kNb = 2, kRows = 16;
  const size_t cols = kNb * BlockElems(t), rb = RowBytes(t, cols), bb = BlockBytes(t);
  std::mt19937 rng(11);
  std::vector<uint8_t> w = RandomBlocks(t, kRows * cols, rng);
  for (size_t b = 0; b < w.size() / bb; ++b) {
    DecodedBlock d;
    DecodeBlock(t, w.data() + b * bb, &d);
    for (int e = 0; e < d.n; ++e) d.q[e] = static_cast<uint8_t>(b % 3 == 2 ? q_min : q_max);
    EncodeBlock(t, d, w.data() + b * bb);
  }
  const X16Layout l = X16LayoutOf(t);
  std::vector<uint8_t> packed(kNb * l.bytes);
  RepackX16(t, w.data(), rb, kNb, packed.data());
  const WeightMatrix m{t, w.data(), kRows, cols, packed.data()};
  constexpr size_t kTok = 3;
  std::vector<float> xf(kTok * cols);
  for (size_t i = 0; i < cols; ++i) {
    xf[i] = 1.0f, xf[cols + i] = -1.0f, xf[2 * cols + i] = i % 2 ? 1.0f : -1.0f;  // each quantizes to +-127
  }
  const std::vector<uint8_t> x = Activations(t, xf, kTok, cols);
  const size_t xb = RowBytes(ActivationTypeFor(t), cols);
  for (const X16Kernels* k : tables) {
    std::vector<float> y(kTok * kRows, -1.0f);
    MatMulRows(ScalarDotKernels(), k, m, x.data(), xb, kTok, y.data(), kRows, 0, kRows);
    for (size_t tok = 0; tok < kTok; ++tok) {
      for (size_t r = 0; r < kRows; ++r) {
        ASSERT_EQ(y[tok * kRows + r], QuantDot(t, w.data() + r * rb, x.data() + tok * xb, cols))
            << k->name << " " << TensorTypeName(t) << " row " << r << " token " << tok;
      }
    }
  }
}

TEST(Quant, MaxBlockBytesBoundsEveryType) {
  size_t largest = 0;
  for (uint32_t t = 0; t < 1024; ++t) {
    if (std::string(TensorTypeName(static_cast<TensorType>(t))) == "invalid") continue;
    largest = std::max(largest, BlockBytes(static_cast<TensorType>(t)));
  }
  EXPECT_EQ(largest, kMaxBlockBytes);
}

TEST(QuantActivations, Q8AIsTheReferenceQ8_0WithItsSum) {
  for (const DotKernels* k : {&ScalarDotKernels(), &ActiveDotKernels()}) {
    const std::vector<float> x = test::RandomFloats(5 * 32, 8, 3.0f);
    std::vector<BlockQ8_0> q(5);
    std::vector<BlockQ8A> a(5), b(5);
    k->quantize_q8_0(x.data(), q.data(), x.size());
    Q8_0ToQ8A(q.data(), a.data(), 5);
    QuantizeRowQ8A(x.data(), b.data(), x.size());
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(a[i].d, Fp16ToFp32(q[i].d));
      EXPECT_EQ(0, std::memcmp(&a[i], &b[i], sizeof(BlockQ8A))) << i;
      int sum = 0;
      for (int8_t v : a[i].qs) sum += v;
      EXPECT_EQ(a[i].sum, sum);
    }
  }
}

// Every table's Q8_K quantizer gives the scalar one's bytes: random rows,
// ties between values of equal magnitude and opposite sign (the first one
// sets the sign), halves that round to even, zero blocks, NaNs and values
// whose products land just past +-127.
TEST(QuantActivations, EveryTableQuantizesQ8_KAsTheScalarOne) {
  std::vector<float> x = test::RandomFloats(6 * 256, 10, 3.0f);
  x[5] = 4.0f, x[9] = -4.0f;                              // block 0: first of equal magnitudes wins
  x[256 + 200] = -8.0f, x[256 + 201] = 8.0f;              // block 1: the negative one first
  for (size_t i = 512; i < 768; ++i) x[i] = 0.0f;         // block 2: zeros
  for (size_t i = 768; i < 1024; ++i) x[i] = static_cast<float>(static_cast<int>(i % 255) - 127) * 0.5f;  // halves
  x[1024 + 3] = std::numeric_limits<float>::quiet_NaN();  // block 4: a NaN
  x[1280 + 7] = 127.0f, x[1280 + 8] = -126.99999f;        // block 5: products at the bound
  std::vector<const DotKernels*> tables = {&ScalarDotKernels()};
  if (IsaSupported(Isa::kAvx2) && Avx2DotKernels() != nullptr) tables.push_back(Avx2DotKernels());
  if (IsaSupported(Isa::kAvx512) && Avx512DotKernels() != nullptr) tables.push_back(Avx512DotKernels());
  for (const DotKernels* k : tables) {
    std::vector<BlockQ8_K> got(6), want(6);
    QuantizeRowQ8_K(x.data(), want.data(), x.size());
    k->quantize_q8_k(x.data(), got.data(), x.size());
    for (size_t b = 0; b < 6; ++b) {
      EXPECT_EQ(0, std::memcmp(&got[b], &want[b], sizeof(BlockQ8_K))) << k->name << " block " << b;
    }
  }
}

TEST(QuantActivations, Q8_KSumsEachSixteen) {
  std::vector<float> x = test::RandomFloats(512, 9, 2.0f);
  x[300] = -7.0f;  // the signed extreme of the second block maps to -127
  std::vector<BlockQ8_K> q(2);
  QuantizeRowQ8_K(x.data(), q.data(), x.size());
  for (const BlockQ8_K& b : q) {
    for (int j = 0; j < 16; ++j) {
      int s = 0;
      for (int e = 0; e < 16; ++e) s += b.qs[16 * j + e];
      EXPECT_EQ(b.bsums[j], s);
    }
  }
  EXPECT_EQ(q[1].qs[300 - 256], -127);
  EXPECT_FLOAT_EQ(q[1].d * -127, -7.0f);
}

// A few facts of the formats, by hand: where the bits of one element live.
TEST(QuantLayouts, HandCheckedElements) {
  DecodedBlock d;
  {  // Q5_0: element 20 = high nibble of qs[4], fifth bit = bit 20 of qh; x = d * (q - 16)
    BlockQ5_0 b{};
    b.d = Fp32ToFp16(0.5f);
    b.qs[4] = 0x30;
    const uint32_t qh = 1u << 20;
    std::memcpy(b.qh, &qh, 4);
    std::vector<float> y(32);
    DequantizeRow(TensorType::kQ5_0, &b, y.data(), 32);
    EXPECT_EQ(y[20], 0.5f * ((3 | 16) - 16));
    EXPECT_EQ(y[4], 0.5f * (0 - 16));
  }
  {  // Q4_K: sub-block 5's scale and min: low 4 bits in byte 9, high 2 bits in bytes 1 and 5
    BlockQ4_K b{};
    b.d = Fp32ToFp16(1.0f);
    b.dmin = Fp32ToFp16(1.0f);
    b.scales[9] = 0x21;         // scale low 1, min low 2
    b.scales[1] = 0x40;         // scale high 1 -> scale 17
    b.scales[5] = 0x80;         // min high 2 -> min 34
    b.qs[32 * 2 + 3] = 0x70;    // element 64 * 2 + 32 + 3 = 163 (sub-block 5) = high nibble, 7
    DecodeBlock(TensorType::kQ4_K, &b, &d);
    EXPECT_EQ(d.sc[5], 17);
    EXPECT_EQ(d.mn[5], 34);
    std::vector<float> y(256);
    DequantizeRow(TensorType::kQ4_K, &b, y.data(), 256);
    EXPECT_EQ(y[163], 17.0f * 7 - 34);
  }
  {  // Q6_K: element 200 = half 1, l = 8, quarter 2: low nibble = high half of ql[64 + 8], high bits 4-5 of qh[32 + 8]
    BlockQ6_K b{};
    b.d = Fp32ToFp16(1.0f);
    b.scales[200 / 16] = 3;
    b.ql[64 + 8] = 0x50;
    b.qh[32 + 8] = 0x20;  // bits 4-5 = 2
    std::vector<float> y(256);
    DequantizeRow(TensorType::kQ6_K, &b, y.data(), 256);
    EXPECT_EQ(y[200], 3.0f * ((5 | (2 << 4)) - 32));
  }
  {  // IQ4_XS: sub-block 3's scale: low nibble = high half of scales_l[1], high bits 6-7 of scales_h
    BlockIQ4_XS b{};
    b.d = Fp32ToFp16(1.0f);
    b.scales_l[1] = 0x50;
    b.scales_h = static_cast<uint16_t>(2 << 6);
    b.qs[16 * 3 + 1] = 0xF0;  // element 96 + 17: high nibble of byte 1 of sub-block 3: grid[15] = 113
    std::vector<float> y(256);
    DequantizeRow(TensorType::kIQ4_XS, &b, y.data(), 256);
    EXPECT_EQ(y[96 + 17], static_cast<float>((5 | (2 << 4)) - 32) * 113);
  }
  {  // MXFP4: exponent byte first, then Q4_0's nibbles; x = 2^(e - 128) * grid (E2M1 doubled)
    BlockMXFP4 b{};
    b.e = 130;                // 2^2
    b.qs[3] = 0x7D;           // element 3: grid[13] = -6; element 19: grid[7] = 12
    b.qs[4] = 0x08;           // element 4: -0
    std::vector<float> y(32);
    DequantizeRow(TensorType::kMXFP4, &b, y.data(), 32);
    EXPECT_EQ(y[3], -24.0f);
    EXPECT_EQ(y[19], 48.0f);
    EXPECT_EQ(y[4], 0.0f);
    EXPECT_EQ(y[0], 0.0f);
  }
}

// Every E8M0 exponent is exact in bf16 (the x16 layout's scale field), the
// two subnormal powers of two included, and comes back to the same byte.
TEST(QuantLayouts, E8m0ScalesAreExactInBf16) {
  for (int e = 0; e < 255; ++e) {
    const uint16_t h = E8m0HalfToBf16(static_cast<uint8_t>(e));
    EXPECT_EQ(Bf16ToFp32(h), std::ldexp(1.0f, e - 128)) << e;
    EXPECT_EQ(Bf16ToE8m0Half(h), e);
  }
}

}  // namespace
}  // namespace pc
