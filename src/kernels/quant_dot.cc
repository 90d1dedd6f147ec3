// The scalar reference dot products of the quantized weight formats and the
// activation quantizers they meet.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/fp16.h"
#include "kernels/quant.h"

namespace pc {

void QuantizeRowQ8A(const float* x, BlockQ8A* y, size_t n) {
  PC_CHECK(n % kQuantBlock == 0);
  for (size_t b = 0; b < n / kQuantBlock; ++b) {
    const float* xb = x + b * kQuantBlock;
    float amax = 0;
    for (size_t i = 0; i < kQuantBlock; ++i) amax = std::max(amax, std::fabs(xb[i]));
    y[b].d = Fp16ToFp32(Fp32ToFp16(amax / 127.0f));
    const float scale = amax != 0.0f ? 127.0f / amax : 0.0f;
    int32_t sum = 0;
    for (size_t i = 0; i < kQuantBlock; ++i) {
      y[b].qs[i] = static_cast<int8_t>(std::nearbyint(xb[i] * scale));  // ties to even
      sum += y[b].qs[i];
    }
    y[b].sum = sum;
  }
}

void Q8_0ToQ8A(const BlockQ8_0* x, BlockQ8A* y, size_t nb) {
  for (size_t b = 0; b < nb; ++b) {
    // Through a local copy: a byte store into y may alias x, and copying
    // byte by byte made the compiler reload x after every store (4% of a
    // short prompt's prefill on 2 threads).
    int8_t q[32];
    std::memcpy(q, x[b].qs, sizeof(q));
    std::memcpy(y[b].qs, q, sizeof(q));
    int32_t sum = 0;
    for (int8_t v : q) sum += v;
    y[b].d = Fp16ToFp32(x[b].d);
    y[b].sum = sum;
  }
}

void QuantizeRowQ8_K(const float* x, BlockQ8_K* y, size_t n) {
  PC_CHECK(n % kSuperBlock == 0);
  for (size_t b = 0; b < n / kSuperBlock; ++b) {
    const float* xb = x + b * kSuperBlock;
    const float max = SignedExtreme(xb, kSuperBlock);
    y[b] = BlockQ8_K{};
    if (max == 0.0f) continue;
    const float iscale = -127.0f / max;
    for (size_t i = 0; i < kSuperBlock; ++i) {
      y[b].qs[i] = static_cast<int8_t>(std::min(127.0f, std::nearbyint(iscale * xb[i])));
      y[b].bsums[i / 16] = static_cast<int16_t>(y[b].bsums[i / 16] + y[b].qs[i]);
    }
    y[b].d = 1.0f / iscale;
  }
}

void QuantizeActivationRow(TensorType type, const float* x, void* y, size_t n) {
  if (type == TensorType::kQ8A) return QuantizeRowQ8A(x, static_cast<BlockQ8A*>(y), n);
  if (type == TensorType::kQ8_K) return QuantizeRowQ8_K(x, static_cast<BlockQ8_K*>(y), n);
  QuantizeRow(type, x, y, n);
}

float QuantDot(TensorType type, const void* w, const void* x, size_t n) {
  const size_t be = BlockElems(type), bb = BlockBytes(type);
  const bool k_quant = be == kSuperBlock;
  DecodedBlock d;
  float s = 0;
  for (size_t b = 0; b < n / be; ++b) {
    DecodeBlock(type, static_cast<const uint8_t*>(w) + b * bb, &d);
    const int8_t* xq;
    float dx;
    int32_t xsum[16];  // per sub-block
    if (k_quant) {
      const BlockQ8_K& xb = static_cast<const BlockQ8_K*>(x)[b];
      xq = xb.qs;
      dx = xb.d;
      for (int j = 0; j < 256 / d.sub; ++j) {
        xsum[j] = d.sub == 16 ? xb.bsums[j] : xb.bsums[2 * j] + xb.bsums[2 * j + 1];
      }
    } else {
      const BlockQ8A& xb = static_cast<const BlockQ8A*>(x)[b];
      xq = xb.qs;
      dx = xb.d;
      xsum[0] = xb.sum;
    }
    int32_t a = 0, m = 0;
    for (int j = 0; j < d.n / d.sub; ++j) {
      int32_t isum = 0;
      for (int e = j * d.sub; e < (j + 1) * d.sub; ++e) isum += d.q[e] * xq[e];
      a += d.sc[j] * (isum - d.offset * xsum[j]);
      m += d.mn[j] * xsum[j];
    }
    float t = static_cast<float>(a) * (d.d() * dx);
    if (d.has_min) t = t + static_cast<float>(m) * (d.m() * dx);
    s += t;
  }
  return s;
}

}  // namespace pc
