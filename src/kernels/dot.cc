#include "kernels/dot.h"

#include "kernels/ggml_compat.h"
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>

#include "base/check.h"
#include "base/fp16.h"

namespace pc {

float ExpPoly(float x) {
  // exp(x) = 2^i * 2^f with i = round(x * log2 e), f in [-0.5, 0.5]; 2^f
  // from a degree-6 polynomial. Inputs below -87 give 0 (softmax tails).
  if (x < -87.0f) return 0.0f;
  if (x > 88.0f) x = 88.0f;
  const float t = x * 1.44269504088896341f;
  const float i = std::nearbyint(t);
  const float f = (x - i * 0.693145751953125f) - i * 1.428606765330187e-06f;  // x - i*ln2, split
  float p = 1.3981999507e-3f;
  p = p * f + 8.3334519073e-3f;
  p = p * f + 4.1665795894e-2f;
  p = p * f + 1.6666665459e-1f;
  p = p * f + 5.0000001201e-1f;
  p = p * f * f + f + 1.0f;
  const int32_t bits = (static_cast<int32_t>(i) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return p * scale;
}

float ExpLane(float x) {
  // ExpPoly's steps with its multiply-adds fused, as the AVX-512 lanes do.
  if (x < -87.0f) return 0.0f;
  x = std::min(x, 88.0f);
  const float i = std::nearbyint(x * 1.44269504088896341f);
  const float f = (x - i * 0.693145751953125f) - i * 1.428606765330187e-06f;
  float p = 1.3981999507e-3f;
  p = std::fma(p, f, 8.3334519073e-3f);
  p = std::fma(p, f, 4.1665795894e-2f);
  p = std::fma(p, f, 1.6666665459e-1f);
  p = std::fma(p, f, 5.0000001201e-1f);
  p = std::fma(p * f, f, f) + 1.0f;
  const int32_t bits = (static_cast<int32_t>(i) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return p * scale;
}

namespace {

float DotF32(const float* a, const float* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(s);
}

float DotF16(const uint16_t* a, const uint16_t* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(Fp16ToFp32(a[i])) * Fp16ToFp32(b[i]);
  return static_cast<float>(s);
}

float DotBf16(const uint16_t* a, const uint16_t* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(Bf16ToFp32(a[i])) * Bf16ToFp32(b[i]);
  return static_cast<float>(s);
}

void AxpyF32(float a, const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void AxpyF16(float a, const uint16_t* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += a * Fp16ToFp32(x[i]);
}

float DotF32F16(const float* a, const uint16_t* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * Fp16ToFp32(b[i]);
  return static_cast<float>(s);
}

void TileScores(const float* q, const float* k, size_t head_dim, size_t n, float* s) {
  for (size_t j = 0; j < n; ++j) {
    float a = 0.0f;
    for (size_t d = 0; d < head_dim; ++d) a += q[d] * k[j * head_dim + d];
    s[j] = a;
  }
}

void TileAccum(const float* p, const float* v, size_t head_dim, size_t n, float* acc) {
  for (size_t j = 0; j < n; ++j) {
    for (size_t d = 0; d < head_dim; ++d) acc[d] += p[j] * v[j * head_dim + d];
  }
}

float ExpSum(float* x, size_t n, float m) {
  float sum = 0.0f;
  for (size_t j = 0; j < n; ++j) {
    x[j] = ExpPoly(x[j] - m);
    sum += x[j];
  }
  return sum;
}

void AttendTile(const float* q, const float* k, const float* v, size_t head_dim, size_t n, float* s, float* m,
                float* l, float* acc) {
  TileScores(q, k, head_dim, n, s);
  float tile_max = s[0];
  for (size_t j = 1; j < n; ++j) tile_max = std::max(tile_max, s[j]);
  if (tile_max > *m) {  // rescale what was accumulated under the old max
    const float corr = ExpPoly(*m - tile_max);
    *l *= corr;
    for (size_t d = 0; d < head_dim; ++d) acc[d] *= corr;
    *m = tile_max;
  }
  *l += ExpSum(s, n, *m);
  TileAccum(s, v, head_dim, n, acc);
}

void Q8_0ToF32(const void* x, float* y, size_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(x);
  for (size_t i = 0; i < n / 32; ++i) {
    const float d = Fp16ToFp32(b[i].d);
    for (size_t j = 0; j < 32; ++j) y[i * 32 + j] = d * static_cast<float>(b[i].qs[j]);
  }
}

void F16ToF32(const uint16_t* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = Fp16ToFp32(x[i]);
}

// One query's step of attend_lanes / attend_cols (dot.h): scores s[16] in,
// the state m, l, acc[head_dim] updated.
void LaneStep(float* s, const float* v, size_t head_dim, size_t first, size_t nv, float* m, float* l, float* acc) {
  float mx = *m;
  for (size_t j = 0; j < kLaneTile; ++j) {
    if (j >= nv || j < first) s[j] = -std::numeric_limits<float>::infinity();
    mx = std::max(mx, s[j]);
  }
  const float c = ExpLane(*m - mx);
  float p[kLaneTile];
  for (size_t j = 0; j < kLaneTile; ++j) p[j] = ExpLane(s[j] - mx);
  float u[8], w[4];
  for (int j = 0; j < 8; ++j) u[j] = p[j] + p[j + 8];
  for (int j = 0; j < 4; ++j) w[j] = u[j] + u[j + 4];
  *l = *l * c + ((w[0] + w[2]) + (w[1] + w[3]));
  *m = mx;
  for (size_t d = 0; d < head_dim; ++d) {
    float a = acc[d] * c;
    for (size_t j = 0; j < kLaneTile; ++j) a = std::fma(p[j], v[j * head_dim + d], a);
    acc[d] = a;
  }
}

float LaneScore(const float* q, size_t q_step, const float* k, size_t head_dim) {
  float a = 0.0f;
  for (size_t d = 0; d < head_dim; ++d) a = std::fma(q[d * q_step], k[d], a);
  return a;
}

void AttendLanes(const LaneGroup* groups, size_t n, const float* k, const float* v, size_t head_dim) {
  float s[kLaneTile], acc[512];
  PC_CHECK(head_dim <= 512);
  for (const LaneGroup& g : std::span<const LaneGroup>(groups, n)) {
    for (size_t i = 0; i < kLaneTile; ++i) {
      if (g.nv[i] <= g.first[i]) continue;
      for (size_t j = 0; j < kLaneTile; ++j) s[j] = LaneScore(g.qt + i, kLaneTile, k + j * head_dim, head_dim);
      for (size_t d = 0; d < head_dim; ++d) acc[d] = g.acct[d * kLaneTile + i];
      LaneStep(s, v, head_dim, static_cast<size_t>(g.first[i]), static_cast<size_t>(g.nv[i]), g.m + i, g.l + i, acc);
      for (size_t d = 0; d < head_dim; ++d) g.acct[d * kLaneTile + i] = acc[d];
    }
  }
}

// n elements of a K/V row slice in dtype t to F32 (the widening of
// f16_to_f32 / q8_0_to_f32).
void WidenKv(KvDtype t, const uint8_t* x, float* y, size_t n) {
  if (t == KvDtype::kF32) {
    std::memcpy(y, x, n * sizeof(float));
  } else if (t == KvDtype::kF16) {
    for (size_t i = 0; i < n; ++i) y[i] = Fp16ToFp32(reinterpret_cast<const uint16_t*>(x)[i]);
  } else {
    Q8_0ToF32(x, y, n);
  }
}

// A query's score against an 8-bit K row (QueryQ8, dot.h): qs(d) its byte
// d, qd(b) its block b's scale; k: the row's head slice as stored.
template <class Bytes, class Scales>
float Q8Score(Bytes qs, Scales qd, const uint8_t* k, size_t head_dim) {
  float s = 0.0f;
  for (size_t b = 0; b < head_dim / kKvQ8Block; ++b) {
    const uint8_t* blk = k + b * kKvQ8BlockBytes;
    uint16_t dk;
    std::memcpy(&dk, blk, sizeof dk);
    int32_t dot = 0;
    for (size_t e = 0; e < kKvQ8Block; ++e) dot += int32_t{qs(b * kKvQ8Block + e)} * static_cast<int8_t>(blk[2 + e]);
    s = std::fma(static_cast<float>(dot), qd(b) * Fp16ToFp32(dk), s);
  }
  return s;
}

void AttendCols(const float* q, const QueryQ8& q8, size_t nq, size_t group, const KvTile& kv, size_t head_dim,
                size_t first, size_t nv, float* scratch, float* m, float* l, float* acc) {
  float s[kLaneTile];
  float* k = scratch;  // the query's K/V head widened: k[16][head_dim], v likewise
  float* v = scratch + kLaneTile * head_dim;
  const bool int_k = kv.dtype == KvDtype::kQ8_0;
  const size_t nb = head_dim / kKvQ8Block;
  for (size_t i = 0; i < nq; ++i) {
    const size_t g = i / group;
    if (i == 0 || g != (i - 1) / group) {
      for (size_t j = 0; j < kLaneTile; ++j) {
        if (!int_k) WidenKv(kv.dtype, kv.k[j] + g * kv.head_bytes, k + j * head_dim, head_dim);
        WidenKv(kv.dtype, kv.v[j] + g * kv.head_bytes, v + j * head_dim, head_dim);
      }
    }
    for (size_t j = 0; j < kLaneTile; ++j) {
      s[j] = int_k ? Q8Score([&](size_t d) { return q8.qs[i * head_dim + d]; }, [&](size_t b) { return q8.d[i * nb + b]; },
                             kv.k[j] + g * kv.head_bytes, head_dim)
                   : LaneScore(q + i * head_dim, 1, k + j * head_dim, head_dim);
    }
    LaneStep(s, v, head_dim, first, nv, m + i, l + i, acc + i * head_dim);
  }
}

void AttendLanesQ8(const LaneGroup* groups, size_t n, const uint8_t* const* krows, const float* v, size_t head_dim) {
  float s[kLaneTile], acc[512];
  PC_CHECK(head_dim <= 512);
  for (const LaneGroup& g : std::span<const LaneGroup>(groups, n)) {
    for (size_t i = 0; i < kLaneTile; ++i) {
      if (g.nv[i] <= g.first[i]) continue;
      auto byte = [&](size_t d) {
        return static_cast<int8_t>(static_cast<uint32_t>(g.qt8[d / 4 * kLaneTile + i]) >> (8 * (d % 4)));
      };
      for (size_t j = 0; j < kLaneTile; ++j) {
        s[j] = Q8Score(byte, [&](size_t b) { return g.qd[b * kLaneTile + i]; }, krows[j], head_dim);
      }
      for (size_t d = 0; d < head_dim; ++d) acc[d] = g.acct[d * kLaneTile + i];
      LaneStep(s, v, head_dim, static_cast<size_t>(g.first[i]), static_cast<size_t>(g.nv[i]), g.m + i, g.l + i, acc);
      for (size_t d = 0; d < head_dim; ++d) g.acct[d * kLaneTile + i] = acc[d];
    }
  }
}

// No tiled float matmul at this level (tile_* null: matmul.cc calls the dots).
const DotKernels kScalar = {
    .name = "scalar",
    .f32 = DotF32,
    .f16 = DotF16,
    .bf16 = DotBf16,
    .to_f16 = ConvertRowF16,
    .quantize_q8_0 = GgmlQuantizeRowQ8_0,
    .quantize_q8_k = QuantizeRowQ8_K,
    .f16_to_f32 = F16ToF32,
    .axpy_f32 = AxpyF32,
    .axpy_f16 = AxpyF16,
    .dot_f32_f16 = DotF32F16,
    .tile_scores = TileScores,
    .tile_accum = TileAccum,
    .exp_sum = ExpSum,
    .silu_mul = SiluMul,
    .gelu_mul = GeluMul,
    .attend_tile = AttendTile,
    .tile_f32 = nullptr,
    .tile_f16 = nullptr,
    .tile_bf16 = nullptr,
    .attend_lanes = AttendLanes,
    .attend_cols = AttendCols,
    .attend_lanes_q8 = AttendLanesQ8,
    .q8_0_to_f32 = Q8_0ToF32,
};

}  // namespace

const DotKernels& ScalarDotKernels() { return kScalar; }

const DotKernels& DotKernelsFor(Isa isa) {
  if (isa >= Isa::kAvx512) {
    if (const DotKernels* k = Avx512DotKernels()) return *k;
  }
  if (isa == Isa::kAvxVnni) {
    if (const DotKernels* k = AvxVnniDotKernels()) return *k;
  }
  if (isa >= Isa::kAvx2) {
    if (const DotKernels* k = Avx2DotKernels()) return *k;
  }
  return kScalar;
}

const DotKernels& ActiveDotKernels() {
  Result<Isa> isa = ActiveIsa();
  return DotKernelsFor(isa.ok() ? *isa : Isa::kScalar);
}

float DotRow(const DotKernels& k, TensorType wt, const void* w, const void* x, size_t n) {
  switch (wt) {
    case TensorType::kF32: return k.f32(static_cast<const float*>(w), static_cast<const float*>(x), n);
    case TensorType::kF16:
      return k.f16(static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(x), n);
    case TensorType::kBF16:
      return k.bf16(static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(x), n);
    default: return QuantDot(wt, w, x, n);
  }
}

}  // namespace pc
