// Our weight quantizers (make-model): round-to-nearest fits per block, no
// search. Written over DecodedBlock, so each format's bit layout lives only
// in its encoder (quant.cc).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "base/fp16.h"
#include "kernels/quant.h"

namespace pc {
namespace {

int RoundClamp(float v, int lo, int hi) { return std::clamp(static_cast<int>(std::lround(v)), lo, hi); }

int NearestGrid(Grid g, float v) {  // returns grid value + 128
  const int8_t* values = GridValues(g);
  int best = 0;
  for (int i = 1; i < 16; ++i) {
    if (std::fabs(v - values[i]) < std::fabs(v - values[best])) best = i;
  }
  return values[best] + 128;
}

// MXFP4: the smallest power-of-two scale 2^(e - 128) that brings the
// block's largest magnitude within the grid's 12, then each element to its
// nearest grid value.
void FitBlockE8m0(const float* x, DecodedBlock* d) {
  float amax = 0;
  for (int e = 0; e < d->n; ++e) amax = std::max(amax, std::fabs(x[e]));
  int exp = 0;
  if (amax > 0) exp = std::clamp(static_cast<int>(std::ceil(std::log2(amax / 12.0f))) + 128, 0, 254);
  d->dh = E8m0HalfToBf16(static_cast<uint8_t>(exp));
  const float scale = d->d();
  for (int e = 0; e < d->n; ++e) d->q[e] = static_cast<uint8_t>(NearestGrid(Grid::kMxfp4, amax > 0 ? x[e] / scale : 0.0f));
}

// Quantizes one block of x into d (d.n, d.sub, d.offset already set).
// Formats with a minimum: per sub-block an affine fit of [min(0, lo), hi]
// onto 0..qmax; a sub-block scale and minimum quantized against the
// block's largest (to 6 or 4 bits), or the block's own scale and minimum.
// Symmetric formats: the signed extreme maps to the most negative value.
void FitBlock(const QuantFormat& f, const float* x, DecodedBlock* d) {
  if (f.e8m0) return FitBlockE8m0(x, d);
  const bool table = f.grid != Grid::kNone;
  const int qmax = (1 << f.bits) - 1, nsub = d->n / d->sub;
  const bool sub_scales = d->n == 256;
  // Q4_K/Q5_K scales and minima have 6 bits, Q2_K's 4; signed ones 6 (Q3_K,
  // IQ4_XS: -32..31) or 8 (Q6_K).
  const int smax = f.bits == 2 ? 15 : (f.bits == 6 ? 127 : (f.has_min ? 63 : 31));
  float scale[16], minv[16];
  for (int j = 0; j < nsub; ++j) {
    const float* xs = x + j * d->sub;
    if (f.has_min) {
      // K-quants subtract a non-negative minimum; Q4_1/Q5_1 add any m.
      const float lo = std::min(sub_scales ? 0.0f : xs[0], *std::min_element(xs, xs + d->sub));
      const float hi = *std::max_element(xs, xs + d->sub);
      scale[j] = (hi - lo) / static_cast<float>(qmax);
      minv[j] = -lo;
    } else {
      const float ext = SignedExtreme(xs, static_cast<size_t>(d->sub));
      scale[j] = table ? ext / -127.0f : ext / -static_cast<float>(f.offset);
      minv[j] = 0;
    }
  }
  float dsc = 1, dmin = 1;
  if (sub_scales) {
    float smax_v = 0, mmax_v = 0;
    for (int j = 0; j < nsub; ++j) {
      smax_v = std::max(smax_v, std::fabs(scale[j]));
      mmax_v = std::max(mmax_v, minv[j]);
    }
    dsc = smax_v / static_cast<float>(smax);
    dmin = mmax_v / static_cast<float>(smax);
    d->dh = Fp32ToFp16(dsc);
    d->mh = Fp32ToFp16(dmin);
    const float dr = d->d(), mr = Fp16ToFp32(d->mh);
    for (int j = 0; j < nsub; ++j) {
      const int lo_sc = f.has_min ? 0 : -(smax + 1);
      d->sc[j] = dr != 0 ? RoundClamp(scale[j] / dr, lo_sc, smax) : 0;
      if (f.has_min) d->mn[j] = mr != 0 ? RoundClamp(minv[j] / mr, 0, smax) : 0;
    }
    if (f.bits == 3 || table) {  // Q3_K, IQ4_XS: -32..31
      for (int j = 0; j < nsub; ++j) d->sc[j] = std::clamp(d->sc[j], -32, 31);
    }
  } else {
    d->dh = Fp32ToFp16(scale[0]);
    d->mh = Fp32ToFp16(-minv[0]);  // Q4_1/Q5_1 add m: m = lo
  }
  const float dr = d->d(), mr = d->m();
  for (int e = 0; e < d->n; ++e) {
    const int j = e / d->sub;
    const float step = dr * static_cast<float>(d->sc[j]);
    const float base = d->has_min ? mr * static_cast<float>(d->mn[j]) : 0.0f;
    if (step == 0.0f) {
      d->q[e] = static_cast<uint8_t>(table ? NearestGrid(f.grid, 0) : d->offset);
    } else if (table) {
      d->q[e] = static_cast<uint8_t>(NearestGrid(f.grid, x[e] / step));
    } else {
      d->q[e] = static_cast<uint8_t>(RoundClamp((x[e] - base) / step + static_cast<float>(d->offset), 0, qmax));
    }
  }
}

}  // namespace

void QuantizeRow(TensorType type, const float* src, void* dst, size_t n) {
  switch (type) {
    case TensorType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
    case TensorType::kF16: ConvertRowF16(src, static_cast<uint16_t*>(dst), n); return;
    case TensorType::kBF16: ConvertRowBf16(src, static_cast<uint16_t*>(dst), n); return;
    case TensorType::kQ8_0: QuantizeRowQ8_0(src, static_cast<BlockQ8_0*>(dst), n); return;
    case TensorType::kQ4_0: QuantizeRowQ4_0(src, static_cast<BlockQ4_0*>(dst), n); return;
    default: break;
  }
  const QuantFormat* f = QuantFormatOf(type);
  PC_CHECK(f != nullptr && "QuantizeRow: not a weight type");
  const size_t be = BlockElems(type), bb = BlockBytes(type);
  PC_CHECK(n % be == 0);
  // A decoded block of zero bytes carries the format's constants (n, sub,
  // offset, minimum); FitBlock sets the rest.
  PC_CHECK(bb <= kMaxBlockBytes);
  static constexpr uint8_t zero[kMaxBlockBytes] = {};
  DecodedBlock d;
  for (size_t b = 0; b < n / be; ++b) {
    DecodeBlock(type, zero, &d);
    FitBlock(*f, src + b * be, &d);
    EncodeBlock(type, d, static_cast<uint8_t*>(dst) + b * bb);
  }
}

}  // namespace pc
