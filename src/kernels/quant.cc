#include "kernels/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/fp16.h"

namespace pc {

const int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
const uint8_t kIq4ValuesPlus128[16] = {1, 24, 45, 63, 79, 93, 106, 118, 129, 141, 153, 166, 181, 197, 217, 241};
const int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
const uint8_t kMxfp4ValuesPlus128[16] = {128, 129, 130, 131, 132, 134, 136, 140, 128, 127, 126, 125, 124, 122, 120, 116};

// 2^(e - 128) as a float: exponent field e - 1 from e = 2; 2^-127 and
// 2^-128 are the subnormals 0x00400000 and 0x00200000. bf16 keeps a float's
// top 16 bits, which hold all of these.
uint16_t E8m0HalfToBf16(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  return static_cast<uint16_t>(bits >> 16);
}
uint8_t Bf16ToE8m0Half(uint16_t bf16) {
  if (bf16 == 0x0020) return 0;
  if (bf16 == 0x0040) return 1;
  return static_cast<uint8_t>((bf16 >> 7) + 1);
}

float DecodedBlock::d() const { return bf16_scale ? Bf16ToFp32(dh) : Fp16ToFp32(dh); }
float DecodedBlock::m() const {
  const float v = Fp16ToFp32(mh);
  return neg_min ? -v : v;
}

const QuantFormat* QuantFormatOf(TensorType t) {
  static const QuantFormat kQ8_0 = QuantFormatFor(TensorType::kQ8_0), kQ4_0 = QuantFormatFor(TensorType::kQ4_0),
                           kQ4_1 = QuantFormatFor(TensorType::kQ4_1), kQ5_0 = QuantFormatFor(TensorType::kQ5_0),
                           kQ5_1 = QuantFormatFor(TensorType::kQ5_1), kIQ4_NL = QuantFormatFor(TensorType::kIQ4_NL),
                           kQ2_K = QuantFormatFor(TensorType::kQ2_K), kQ3_K = QuantFormatFor(TensorType::kQ3_K),
                           kQ4_K = QuantFormatFor(TensorType::kQ4_K), kQ5_K = QuantFormatFor(TensorType::kQ5_K),
                           kQ6_K = QuantFormatFor(TensorType::kQ6_K), kIQ4_XS = QuantFormatFor(TensorType::kIQ4_XS),
                           kMXFP4 = QuantFormatFor(TensorType::kMXFP4);
  switch (t) {
    case TensorType::kQ8_0: return &kQ8_0;
    case TensorType::kQ4_0: return &kQ4_0;
    case TensorType::kQ4_1: return &kQ4_1;
    case TensorType::kQ5_0: return &kQ5_0;
    case TensorType::kQ5_1: return &kQ5_1;
    case TensorType::kIQ4_NL: return &kIQ4_NL;
    case TensorType::kQ2_K: return &kQ2_K;
    case TensorType::kQ3_K: return &kQ3_K;
    case TensorType::kQ4_K: return &kQ4_K;
    case TensorType::kQ5_K: return &kQ5_K;
    case TensorType::kQ6_K: return &kQ6_K;
    case TensorType::kIQ4_XS: return &kIQ4_XS;
    case TensorType::kMXFP4: return &kMXFP4;
    default: return nullptr;
  }
}

namespace {

int GridIndex(Grid g, int q) {  // q = grid value + 128; the first index holding it
  const int8_t* values = GridValues(g);
  for (int i = 0; i < 16; ++i) {
    if (values[i] + 128 == q) return i;
  }
  PC_CHECK(false && "not a grid value");
  return 0;
}

void Start(TensorType t, DecodedBlock* b) {
  const QuantFormat& f = *QuantFormatOf(t);
  b->n = static_cast<int>(BlockElems(t));
  b->sub = f.sub;
  b->offset = f.offset;
  b->has_min = f.has_min;
  b->neg_min = f.has_min && b->n == 256;  // K-quants subtract dmin * m; Q4_1/Q5_1 add m
  b->bf16_scale = f.e8m0;
  b->dh = b->mh = 0;
  for (int j = 0; j < 16; ++j) {
    b->sc[j] = 1;
    b->mn[j] = f.has_min ? 1 : 0;
  }
}

// Nibble e of the 32-element formats' layout: elements j and j + 16 share qs[j].
int Nibble32(const uint8_t* qs, int e) { return e < 16 ? qs[e] & 15 : qs[e - 16] >> 4; }
void SetNibble32(uint8_t* qs, int e, int q) { qs[e % 16] |= static_cast<uint8_t>(e < 16 ? q : q << 4); }

// Q4_K/Q5_K's 6-bit scale and minimum of sub-block j from 12 bytes.
void ScaleMinK4(const uint8_t* s, int j, int32_t* sc, int32_t* mn) {
  if (j < 4) {
    *sc = s[j] & 63;
    *mn = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}
void SetScaleMinK4(uint8_t* s, int j, int sc, int mn) {
  if (j < 4) {
    s[j] |= static_cast<uint8_t>(sc);
    s[j + 4] |= static_cast<uint8_t>(mn);
  } else {
    s[j + 4] = static_cast<uint8_t>((sc & 0xF) | ((mn & 0xF) << 4));
    s[j - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
    s[j] |= static_cast<uint8_t>((mn >> 4) << 6);
  }
}

// Q4_K/Q5_K element e: 64-element chunks, the low nibbles of 32 bytes then their high nibbles.
int NibbleK(const uint8_t* qs, int e) {
  const uint8_t b = qs[e / 64 * 32 + e % 32];
  return e % 64 < 32 ? b & 15 : b >> 4;
}
void SetNibbleK(uint8_t* qs, int e, int q) {
  qs[e / 64 * 32 + e % 32] |= static_cast<uint8_t>(e % 64 < 32 ? q : q << 4);
}
// Q2_K/Q3_K element e: 128-element halves of 32 bytes, 2 bits at shift 2 * (e % 128 / 32).
int CrumbK(const uint8_t* qs, int e) { return (qs[e / 128 * 32 + e % 32] >> (2 * (e % 128 / 32))) & 3; }
void SetCrumbK(uint8_t* qs, int e, int q) {
  qs[e / 128 * 32 + e % 32] |= static_cast<uint8_t>(q << (2 * (e % 128 / 32)));
}
// Q3_K's 6-bit scales: low nibbles in bytes 0-7, high pairs in bytes 8-11.
int ScaleQ3(const uint8_t* s, int j) {
  const int lo = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
  return lo | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
}
void SetScaleQ3(uint8_t* s, int j, int v) {
  s[j % 8] |= static_cast<uint8_t>(j < 8 ? v & 15 : (v & 15) << 4);
  s[8 + j % 4] |= static_cast<uint8_t>((v >> 4) << (2 * (j / 4)));
}
// Q6_K element e: halves of 128 over 64 bytes of ql and 32 of qh.
void Q6Where(int e, int* ql, int* ql_shift, int* qh, int* qh_shift) {
  const int h = e / 128, w = e % 128, l = w % 32, k = w / 32;
  *ql = 64 * h + l + (k & 1) * 32;
  *ql_shift = (k >> 1) * 4;
  *qh = 32 * h + l;
  *qh_shift = 2 * k;
}

}  // namespace

namespace {

// The 32-element formats.
bool DecodeSmall(TensorType t, const void* block, DecodedBlock* o) {
  switch (t) {
    case TensorType::kQ8_0: {
      const auto& b = *static_cast<const BlockQ8_0*>(block);
      o->dh = b.d;
      for (int e = 0; e < 32; ++e) o->q[e] = static_cast<uint8_t>(b.qs[e] + 128);
      return true;
    }
    case TensorType::kQ4_0:
    case TensorType::kIQ4_NL: {
      const auto& b = *static_cast<const BlockQ4_0*>(block);  // same layout
      o->dh = b.d;
      for (int e = 0; e < 32; ++e) {
        const int nib = Nibble32(b.qs, e);
        o->q[e] = static_cast<uint8_t>(t == TensorType::kQ4_0 ? nib : kIq4Values[nib] + 128);
      }
      return true;
    }
    case TensorType::kMXFP4: {
      const auto& b = *static_cast<const BlockMXFP4*>(block);
      o->dh = E8m0HalfToBf16(b.e);
      for (int e = 0; e < 32; ++e) o->q[e] = kMxfp4ValuesPlus128[Nibble32(b.qs, e)];
      return true;
    }
    case TensorType::kQ4_1: {
      const auto& b = *static_cast<const BlockQ4_1*>(block);
      o->dh = b.d;
      o->mh = b.m;
      for (int e = 0; e < 32; ++e) o->q[e] = static_cast<uint8_t>(Nibble32(b.qs, e));
      return true;
    }
    case TensorType::kQ5_0:
    case TensorType::kQ5_1: {
      const bool one = t == TensorType::kQ5_1;
      const uint8_t* qs = one ? static_cast<const BlockQ5_1*>(block)->qs : static_cast<const BlockQ5_0*>(block)->qs;
      const uint8_t* qhp = one ? static_cast<const BlockQ5_1*>(block)->qh : static_cast<const BlockQ5_0*>(block)->qh;
      uint32_t qh;
      std::memcpy(&qh, qhp, 4);
      if (one) {
        o->dh = static_cast<const BlockQ5_1*>(block)->d;
        o->mh = static_cast<const BlockQ5_1*>(block)->m;
      } else {
        o->dh = static_cast<const BlockQ5_0*>(block)->d;
      }
      for (int e = 0; e < 32; ++e) o->q[e] = static_cast<uint8_t>(Nibble32(qs, e) | (((qh >> e) & 1) << 4));
      return true;
    }
    default: return false;
  }
}

// The 256-element super-blocks (K-quants, IQ4_XS).
bool DecodeSuper(TensorType t, const void* block, DecodedBlock* o) {
  switch (t) {
    case TensorType::kQ2_K: {
      const auto& b = *static_cast<const BlockQ2_K*>(block);
      o->dh = b.d;
      o->mh = b.dmin;
      for (int j = 0; j < 16; ++j) {
        o->sc[j] = b.scales[j] & 15;
        o->mn[j] = b.scales[j] >> 4;
      }
      for (int e = 0; e < 256; ++e) o->q[e] = static_cast<uint8_t>(CrumbK(b.qs, e));
      return true;
    }
    case TensorType::kQ3_K: {
      const auto& b = *static_cast<const BlockQ3_K*>(block);
      o->dh = b.d;
      for (int j = 0; j < 16; ++j) o->sc[j] = ScaleQ3(b.scales, j) - 32;
      for (int e = 0; e < 256; ++e) {
        const int high = (b.hmask[e % 32] >> (e / 32)) & 1;
        o->q[e] = static_cast<uint8_t>(CrumbK(b.qs, e) | (high << 2));
      }
      return true;
    }
    case TensorType::kQ4_K:
    case TensorType::kQ5_K: {
      const bool five = t == TensorType::kQ5_K;
      const auto* b4 = static_cast<const BlockQ4_K*>(block);
      const auto* b5 = static_cast<const BlockQ5_K*>(block);
      o->dh = five ? b5->d : b4->d;
      o->mh = five ? b5->dmin : b4->dmin;
      for (int j = 0; j < 8; ++j) ScaleMinK4(five ? b5->scales : b4->scales, j, &o->sc[j], &o->mn[j]);
      for (int e = 0; e < 256; ++e) {
        int q = NibbleK(five ? b5->qs : b4->qs, e);
        if (five) q |= ((b5->qh[e % 32] >> (e / 32)) & 1) << 4;
        o->q[e] = static_cast<uint8_t>(q);
      }
      return true;
    }
    case TensorType::kQ6_K: {
      const auto& b = *static_cast<const BlockQ6_K*>(block);
      o->dh = b.d;
      for (int j = 0; j < 16; ++j) o->sc[j] = b.scales[j];
      for (int e = 0; e < 256; ++e) {
        int ql, qls, qh, qhs;
        Q6Where(e, &ql, &qls, &qh, &qhs);
        o->q[e] = static_cast<uint8_t>(((b.ql[ql] >> qls) & 15) | (((b.qh[qh] >> qhs) & 3) << 4));
      }
      return true;
    }
    case TensorType::kIQ4_XS: {
      const auto& b = *static_cast<const BlockIQ4_XS*>(block);
      o->dh = b.d;
      for (int j = 0; j < 8; ++j) {
        const int ls = ((b.scales_l[j / 2] >> (4 * (j % 2))) & 15) | (((b.scales_h >> (2 * j)) & 3) << 4);
        o->sc[j] = ls - 32;
      }
      for (int e = 0; e < 256; ++e) o->q[e] = static_cast<uint8_t>(kIq4Values[Nibble32(b.qs + 16 * (e / 32), e % 32)] + 128);
      return true;
    }
    default: return false;
  }
}

}  // namespace

void DecodeBlock(TensorType t, const void* block, DecodedBlock* o) {
  Start(t, o);
  const bool known = DecodeSmall(t, block, o) || DecodeSuper(t, block, o);
  PC_CHECK(known && "DecodeBlock: not a weight block format");
}

namespace {

// The 32-element formats.
bool EncodeSmall(TensorType t, const DecodedBlock& in, void* block) {
  switch (t) {
    case TensorType::kQ8_0: {
      auto& b = *static_cast<BlockQ8_0*>(block);
      b.d = in.dh;
      for (int e = 0; e < 32; ++e) b.qs[e] = static_cast<int8_t>(in.q[e] - 128);
      return true;
    }
    case TensorType::kQ4_0:
    case TensorType::kIQ4_NL: {
      auto& b = *static_cast<BlockQ4_0*>(block);
      b.d = in.dh;
      for (int e = 0; e < 32; ++e) SetNibble32(b.qs, e, t == TensorType::kQ4_0 ? in.q[e] : GridIndex(Grid::kIq4, in.q[e]));
      return true;
    }
    case TensorType::kMXFP4: {
      auto& b = *static_cast<BlockMXFP4*>(block);
      b.e = Bf16ToE8m0Half(in.dh);
      for (int e = 0; e < 32; ++e) SetNibble32(b.qs, e, GridIndex(Grid::kMxfp4, in.q[e]));
      return true;
    }
    case TensorType::kQ4_1: {
      auto& b = *static_cast<BlockQ4_1*>(block);
      b.d = in.dh;
      b.m = in.mh;
      for (int e = 0; e < 32; ++e) SetNibble32(b.qs, e, in.q[e]);
      return true;
    }
    case TensorType::kQ5_0:
    case TensorType::kQ5_1: {
      const bool one = t == TensorType::kQ5_1;
      uint8_t* qs = one ? static_cast<BlockQ5_1*>(block)->qs : static_cast<BlockQ5_0*>(block)->qs;
      uint8_t* qhp = one ? static_cast<BlockQ5_1*>(block)->qh : static_cast<BlockQ5_0*>(block)->qh;
      if (one) {
        static_cast<BlockQ5_1*>(block)->d = in.dh;
        static_cast<BlockQ5_1*>(block)->m = in.mh;
      } else {
        static_cast<BlockQ5_0*>(block)->d = in.dh;
      }
      uint32_t qh = 0;
      for (int e = 0; e < 32; ++e) {
        SetNibble32(qs, e, in.q[e] & 15);
        qh |= static_cast<uint32_t>(in.q[e] >> 4) << e;
      }
      std::memcpy(qhp, &qh, 4);
      return true;
    }
    default: return false;
  }
}

// The 256-element super-blocks (K-quants, IQ4_XS).
bool EncodeSuper(TensorType t, const DecodedBlock& in, void* block) {
  switch (t) {
    case TensorType::kQ2_K: {
      auto& b = *static_cast<BlockQ2_K*>(block);
      b.d = in.dh;
      b.dmin = in.mh;
      for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(in.sc[j] | (in.mn[j] << 4));
      for (int e = 0; e < 256; ++e) SetCrumbK(b.qs, e, in.q[e]);
      return true;
    }
    case TensorType::kQ3_K: {
      auto& b = *static_cast<BlockQ3_K*>(block);
      b.d = in.dh;
      for (int j = 0; j < 16; ++j) SetScaleQ3(b.scales, j, in.sc[j] + 32);
      for (int e = 0; e < 256; ++e) {
        SetCrumbK(b.qs, e, in.q[e] & 3);
        b.hmask[e % 32] |= static_cast<uint8_t>((in.q[e] >> 2) << (e / 32));
      }
      return true;
    }
    case TensorType::kQ4_K:
    case TensorType::kQ5_K: {
      const bool five = t == TensorType::kQ5_K;
      auto* b4 = static_cast<BlockQ4_K*>(block);
      auto* b5 = static_cast<BlockQ5_K*>(block);
      (five ? b5->d : b4->d) = in.dh;
      (five ? b5->dmin : b4->dmin) = in.mh;
      for (int j = 0; j < 8; ++j) SetScaleMinK4(five ? b5->scales : b4->scales, j, in.sc[j], in.mn[j]);
      for (int e = 0; e < 256; ++e) {
        SetNibbleK(five ? b5->qs : b4->qs, e, in.q[e] & 15);
        if (five) b5->qh[e % 32] |= static_cast<uint8_t>((in.q[e] >> 4) << (e / 32));
      }
      return true;
    }
    case TensorType::kQ6_K: {
      auto& b = *static_cast<BlockQ6_K*>(block);
      b.d = in.dh;
      for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(in.sc[j]);
      for (int e = 0; e < 256; ++e) {
        int ql, qls, qh, qhs;
        Q6Where(e, &ql, &qls, &qh, &qhs);
        b.ql[ql] |= static_cast<uint8_t>((in.q[e] & 15) << qls);
        b.qh[qh] |= static_cast<uint8_t>((in.q[e] >> 4) << qhs);
      }
      return true;
    }
    case TensorType::kIQ4_XS: {
      auto& b = *static_cast<BlockIQ4_XS*>(block);
      b.d = in.dh;
      for (int j = 0; j < 8; ++j) {
        const int ls = in.sc[j] + 32;
        b.scales_l[j / 2] |= static_cast<uint8_t>((ls & 15) << (4 * (j % 2)));
        b.scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * j));
      }
      for (int e = 0; e < 256; ++e) SetNibble32(b.qs + 16 * (e / 32), e % 32, GridIndex(Grid::kIq4, in.q[e]));
      return true;
    }
    default: return false;
  }
}

}  // namespace

void EncodeBlock(TensorType t, const DecodedBlock& in, void* block) {
  std::memset(block, 0, BlockBytes(t));  // the formats below OR bits in
  const bool known = EncodeSmall(t, in, block) || EncodeSuper(t, in, block);
  PC_CHECK(known && "EncodeBlock: not a weight block format");
}

void QuantizeRowQ8_0(const float* x, BlockQ8_0* y, size_t n) {
  PC_CHECK(n % kQuantBlock == 0);
  for (size_t b = 0; b < n / kQuantBlock; ++b) {
    const float* xb = x + b * kQuantBlock;
    float amax = 0.0f;
    for (size_t i = 0; i < kQuantBlock; ++i) {
      const float a = std::fabs(xb[i]);
      amax = a > amax ? a : amax;
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = Fp32ToFp16(d);
    // Round half away from zero exactly as roundf (|v| <= 127, so the
    // fraction v - trunc(v) is exact), without the libm call.
    for (size_t i = 0; i < kQuantBlock; ++i) {
      const float v = xb[i] * id;
      int q = static_cast<int>(v);
      const float frac = v - static_cast<float>(q);
      q += (frac >= 0.5f) - (frac <= -0.5f);
      y[b].qs[i] = static_cast<int8_t>(q);
    }
  }
}

float SignedExtreme(const float* x, size_t n) {
  float amax = 0.0f, extreme = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      extreme = x[i];
    }
  }
  return extreme;
}

void QuantizeRowQ4_0(const float* x, BlockQ4_0* y, size_t n) {
  PC_CHECK(n % kQuantBlock == 0);
  for (size_t b = 0; b < n / kQuantBlock; ++b) {
    const float* xb = x + b * kQuantBlock;
    // The signed value of largest magnitude maps to -8, so d may be negative.
    const float d = SignedExtreme(xb, kQuantBlock) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = Fp32ToFp16(d);
    for (size_t j = 0; j < 16; ++j) {
      const float x0 = xb[j] * id, x1 = xb[j + 16] * id;
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 8.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 8.5f)));
      y[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void ConvertRowF16(const float* x, uint16_t* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = Fp32ToFp16(x[i]);
}

void ConvertRowBf16(const float* x, uint16_t* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = Fp32ToBf16(x[i]);
}

void DequantizeRow(TensorType type, const void* src, float* dst, size_t n) {
  switch (type) {
    case TensorType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
    case TensorType::kF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = Fp16ToFp32(s[i]);
      return;
    }
    case TensorType::kBF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = Bf16ToFp32(s[i]);
      return;
    }
    default: break;
  }
  PC_CHECK(QuantFormatOf(type) != nullptr);
  const size_t be = BlockElems(type), bb = BlockBytes(type);
  DecodedBlock d;
  for (size_t b = 0; b < n / be; ++b) {
    DecodeBlock(type, static_cast<const uint8_t*>(src) + b * bb, &d);
    const float df = d.d(), mf = d.m();
    for (int e = 0; e < d.n; ++e) {
      const int j = e / d.sub;
      float v = df * static_cast<float>(d.sc[j]) * static_cast<float>(d.q[e] - d.offset);
      if (d.has_min) v += mf * static_cast<float>(d.mn[j]);
      dst[b * be + static_cast<size_t>(e)] = v;
    }
  }
}

TensorType ActivationTypeFor(TensorType weight) {
  if (!IsQuantized(weight)) return weight;
  return BlockElems(weight) == kSuperBlock ? TensorType::kQ8_K : TensorType::kQ8A;
}

}  // namespace pc
