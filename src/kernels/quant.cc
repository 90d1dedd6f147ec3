#include "kernels/quant.h"

#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/fp16.h"

namespace pc {

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

void DequantizeBlockQ6_K(const BlockQ6_K& b, float* y) {
  const float d = Fp16ToFp32(b.d);
  const uint8_t* ql = b.ql;
  const uint8_t* qh = b.qh;
  const int8_t* sc = b.scales;
  // Two halves of 128 values; each byte of ql/qh feeds four outputs 32 apart.
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * sc[is] * q1;
      y[l + 32] = d * sc[is + 2] * q2;
      y[l + 64] = d * sc[is + 4] * q3;
      y[l + 96] = d * sc[is + 6] * q4;
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
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
    case TensorType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
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
    case TensorType::kQ8_0: {
      const auto* s = static_cast<const BlockQ8_0*>(src);
      for (size_t b = 0; b < n / kQuantBlock; ++b) {
        const float d = Fp16ToFp32(s[b].d);
        for (size_t i = 0; i < kQuantBlock; ++i) dst[b * kQuantBlock + i] = d * s[b].qs[i];
      }
      return;
    }
    case TensorType::kQ4_0: {
      const auto* s = static_cast<const BlockQ4_0*>(src);
      for (size_t b = 0; b < n / kQuantBlock; ++b) {
        const float d = Fp16ToFp32(s[b].d);
        float* o = dst + b * kQuantBlock;
        for (size_t j = 0; j < 16; ++j) {
          o[j] = d * ((s[b].qs[j] & 15) - 8);
          o[j + 16] = d * ((s[b].qs[j] >> 4) - 8);
        }
      }
      return;
    }
    case TensorType::kQ6_K: {
      const auto* s = static_cast<const BlockQ6_K*>(src);
      for (size_t b = 0; b < n / kSuperBlock; ++b) DequantizeBlockQ6_K(s[b], dst + b * kSuperBlock);
      return;
    }
  }
  PC_CHECK(false);
}

void QuantizeRow(TensorType type, const float* src, void* dst, size_t n) {
  switch (type) {
    case TensorType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
    case TensorType::kF16: ConvertRowF16(src, static_cast<uint16_t*>(dst), n); return;
    case TensorType::kBF16: ConvertRowBf16(src, static_cast<uint16_t*>(dst), n); return;
    case TensorType::kQ8_0: QuantizeRowQ8_0(src, static_cast<BlockQ8_0*>(dst), n); return;
    case TensorType::kQ4_0: QuantizeRowQ4_0(src, static_cast<BlockQ4_0*>(dst), n); return;
    case TensorType::kQ6_K: break;  // read-only format
  }
  PC_CHECK(false);
}

TensorType ActivationTypeFor(TensorType weight) {
  switch (weight) {
    case TensorType::kQ8_0:
    case TensorType::kQ4_0: return TensorType::kQ8_0;
    case TensorType::kQ6_K: return TensorType::kF32;
    default: return weight;
  }
}

void PackQ8_0x8(const uint8_t* w, size_t row_bytes, size_t nb, BlockQ8_0x8* out) {
  for (size_t b = 0; b < nb; ++b) {
    for (int r = 0; r < 8; ++r) {
      const BlockQ8_0& src = reinterpret_cast<const BlockQ8_0*>(w + r * row_bytes)[b];
      out[b].d[r] = src.d;
      for (int g = 0; g < 8; ++g) std::memcpy(out[b].qs + 32 * g + 4 * r, src.qs + 4 * g, 4);
    }
  }
}

BlockQ8_0 UnpackQ8_0x8(const BlockQ8_0x8& b, int r) {
  BlockQ8_0 out;
  out.d = b.d[r];
  for (int e = 0; e < 32; ++e) out.qs[e] = b.qs[32 * (e / 4) + 4 * r + e % 4];
  return out;
}

}  // namespace pc
