#include "kernels/attention.h"

#include <cmath>
#include <cstring>
#include <algorithm>
#include <limits>

#include "base/check.h"
#include "base/fp16.h"
#include "kernels/ggml_compat.h"

namespace pc {

void AttendHead(const DotKernels& k, const float* q_head, const KvLayerView& kv, size_t pos,
                size_t kv_head, size_t head_dim, float* out_head) {
  PC_CHECK(kv.block_table.size() * kv.block_size > pos);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const size_t offset = kv_head * head_dim;
  float max_score = -std::numeric_limits<float>::infinity();
  float denom = 0.0f;
  std::memset(out_head, 0, head_dim * sizeof(float));
  for (size_t p = 0; p <= pos; ++p) {
    const size_t row = static_cast<size_t>(kv.block_table[p / kv.block_size]) * kv.block_size +
                       p % kv.block_size;
    const size_t elem = row * kv.kv_dim + offset;
    float score;
    if (kv.dtype == KvDtype::kF16) {
      score = k.dot_f32_f16(q_head, static_cast<const uint16_t*>(kv.k) + elem, head_dim) * scale;
    } else {
      score = k.f32(q_head, static_cast<const float*>(kv.k) + elem, head_dim) * scale;
    }
    // Online softmax: rescale the running sum when a new maximum appears.
    if (score > max_score) {
      const float correction = std::exp(max_score - score);
      denom *= correction;
      for (size_t i = 0; i < head_dim; ++i) out_head[i] *= correction;
      max_score = score;
    }
    const float weight = std::exp(score - max_score);
    denom += weight;
    if (kv.dtype == KvDtype::kF16) {
      k.axpy_f16(weight, static_cast<const uint16_t*>(kv.v) + elem, out_head, head_dim);
    } else {
      k.axpy_f32(weight, static_cast<const float*>(kv.v) + elem, out_head, head_dim);
    }
  }
  const float inv = 1.0f / denom;
  for (size_t i = 0; i < head_dim; ++i) out_head[i] *= inv;
}

void AttendHeadF16Accum(const float* q_head, const KvLayerView& kv, size_t pos, size_t kv_head,
                        size_t head_dim, float* out_head) {
  PC_CHECK(kv.dtype == KvDtype::kF16 && head_dim <= 512);
  PC_CHECK(kv.block_table.size() * kv.block_size > pos);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  uint16_t q16[512], acc[512];
  for (size_t i = 0; i < head_dim; ++i) {
    q16[i] = Fp32ToFp16(q_head[i]);
    acc[i] = 0;
  }
  const auto* kbase = static_cast<const uint16_t*>(kv.k);
  const auto* vbase = static_cast<const uint16_t*>(kv.v);
  float max_score = -std::numeric_limits<float>::infinity(), denom = 0;
  for (size_t p = 0; p <= pos; ++p) {
    const size_t row = static_cast<size_t>(kv.block_table[p / kv.block_size]) * kv.block_size +
                       p % kv.block_size;
    const size_t elem = row * kv.kv_dim + kv_head * head_dim;
    const float score = GgmlDotF16Vec(kbase + elem, q16, head_dim) * scale;
    float ms = 1.0f, vs = 1.0f;
    if (score > max_score) {
      ms = std::exp(max_score - score);
      max_score = score;
      for (size_t i = 0; i < head_dim; ++i) acc[i] = Fp32ToFp16(Fp16ToFp32(acc[i]) * ms);
    } else {
      vs = std::exp(score - max_score);
    }
    for (size_t i = 0; i < head_dim; ++i) {
      // Fused multiply-add, then F16 rounding (the reference's compiled
      // scalar tail for head sizes under its vector width).
      acc[i] = Fp32ToFp16(std::fma(Fp16ToFp32(vbase[elem + i]), vs, Fp16ToFp32(acc[i])));
    }
    denom = std::fma(denom, ms, vs);
  }
  // Multiplied by the reciprocal, not divided: a different rounding.
  const float inv_denom = denom == 0.0f ? 0.0f : 1.0f / denom;
  for (size_t i = 0; i < head_dim; ++i) out_head[i] = Fp16ToFp32(acc[i]) * inv_denom;
}

void AttendHeadGgmlTiled(const float* q_head, const KvLayerView& kv, size_t pos, size_t kv_head, size_t head_dim,
                         float* out_head) {
  constexpr size_t kTile = 64;  // the reference's KV tile, at absolute positions
  PC_CHECK(kv.dtype == KvDtype::kF16 && head_dim <= 512);
  PC_CHECK(kv.block_table.size() * kv.block_size > pos);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const auto* kbase = static_cast<const uint16_t*>(kv.k);
  const auto* vbase = static_cast<const uint16_t*>(kv.v);
  float acc[512] = {}, scores[kTile];
  float max_score = -std::numeric_limits<float>::infinity(), denom = 0;
  auto elem_of = [&](size_t p) {
    const size_t row = static_cast<size_t>(kv.block_table[p / kv.block_size]) * kv.block_size + p % kv.block_size;
    return row * kv.kv_dim + kv_head * head_dim;
  };
  for (size_t p0 = 0; p0 <= pos; p0 += kTile) {
    const size_t n = std::min(kTile, pos + 1 - p0);
    // Scores: one fused multiply-add chain over the head dimension (Q in
    // F32), scaled; masked and padded cells are -inf.
    float tile_max = -std::numeric_limits<float>::infinity();
    for (size_t j = 0; j < kTile; ++j) {
      if (j >= n) {
        scores[j] = -std::numeric_limits<float>::infinity();
        continue;
      }
      const uint16_t* krow = kbase + elem_of(p0 + j);
      float dot = 0;
      for (size_t d = 0; d < head_dim; ++d) dot = std::fma(Fp16ToFp32(krow[d]), q_head[d], dot);
      scores[j] = dot * scale;
      tile_max = std::max(tile_max, scores[j]);
    }
    const float new_max = std::fmax(max_score, tile_max);
    if (new_max > max_score) {
      const float rescale = std::exp(max_score - new_max);
      for (size_t d = 0; d < head_dim; ++d) acc[d] *= rescale;
      denom *= rescale;
    }
    max_score = new_max;
    // exp by the vectorised approximation; the sum in double over 16-lane
    // partial sums.
    double sum = 0;
    for (size_t j0 = 0; j0 < kTile; j0 += 16) {
      for (size_t j = j0; j < j0 + 16; ++j) scores[j] = GgmlExpApprox(scores[j] - new_max);
      sum += GgmlReduce16(scores + j0);
    }
    denom = static_cast<float>(denom + sum);
    // V: for each output dim one fused chain over the tile, continuing acc.
    for (size_t j = 0; j < n; ++j) {
      const uint16_t* vrow = vbase + elem_of(p0 + j);
      for (size_t d = 0; d < head_dim; ++d) acc[d] = std::fma(Fp16ToFp32(vrow[d]), scores[j], acc[d]);
    }
  }
  const float inv_denom = denom == 0.0f ? 0.0f : 1.0f / denom;
  for (size_t d = 0; d < head_dim; ++d) out_head[d] = acc[d] * inv_denom;
}

size_t AttendScratchFloats(size_t rows, size_t group, size_t head_dim) {
  const size_t nq = rows * group;
  return 2 * kAttnTile * head_dim + std::max(kAttnTile, head_dim) + nq * (2 * head_dim + 2);
}

namespace {

// Copies K rows [p0, p0 + n) of kv_head transposed into kt[d][j] and V rows
// into vt[j][d], widened to F32.
void LoadTile(const DotKernels& k, const KvLayerView& kv, size_t kv_head, size_t head_dim, size_t p0, size_t n,
              float* kt, float* vt, float* krow) {
  for (size_t j = 0; j < n; ++j) {
    const size_t p = p0 + j;
    const size_t row = static_cast<size_t>(kv.block_table[p / kv.block_size]) * kv.block_size + p % kv.block_size;
    const size_t elem = row * kv.kv_dim + kv_head * head_dim;
    const float* kf;
    if (kv.dtype == KvDtype::kF16) {
      k.f16_to_f32(static_cast<const uint16_t*>(kv.k) + elem, krow, head_dim);
      k.f16_to_f32(static_cast<const uint16_t*>(kv.v) + elem, vt + j * head_dim, head_dim);
      kf = krow;
    } else {
      kf = static_cast<const float*>(kv.k) + elem;
      std::memcpy(vt + j * head_dim, static_cast<const float*>(kv.v) + elem, head_dim * sizeof(float));
    }
    for (size_t d = 0; d < head_dim; ++d) kt[d * kAttnTile + j] = kf[d];
  }
}

}  // namespace

void AttendKvHead(const DotKernels& k, const KvLayerView& kv, const AttnRows& rows, size_t r0, size_t r1,
                  size_t kv_head, size_t group, size_t head_dim, float* scratch) {
  const size_t nq = (r1 - r0) * group;
  float* kt = scratch;
  float* vt = kt + kAttnTile * head_dim;
  float* s = vt + kAttnTile * head_dim;
  float* qs = s + std::max(kAttnTile, head_dim);  // [nq][head_dim] scaled queries
  float* acc = qs + nq * head_dim;  // [nq][head_dim]
  float* m = acc + nq * head_dim;   // [nq] running max
  float* l = m + nq;                // [nq] running denominator
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  size_t max_pos = 0;
  for (size_t r = r0; r < r1; ++r) {
    PC_CHECK(rows.pos[r] >= 0 && kv.block_table.size() * kv.block_size > static_cast<size_t>(rows.pos[r]));
    max_pos = std::max(max_pos, static_cast<size_t>(rows.pos[r]));
    for (size_t g = 0; g < group; ++g) {
      const size_t qi = (r - r0) * group + g;
      const float* q = rows.q + r * rows.q_stride + (kv_head * group + g) * head_dim;
      for (size_t d = 0; d < head_dim; ++d) qs[qi * head_dim + d] = q[d] * scale;
    }
  }
  std::fill(acc, acc + nq * head_dim, 0.0f);
  std::fill(m, m + nq, -std::numeric_limits<float>::infinity());
  std::fill(l, l + nq, 0.0f);
  for (size_t p0 = 0; p0 <= max_pos; p0 += kAttnTile) {
    const size_t n = std::min(kAttnTile, max_pos + 1 - p0);
    LoadTile(k, kv, kv_head, head_dim, p0, n, kt, vt, s);
    for (size_t r = r0; r < r1; ++r) {
      const size_t pos = static_cast<size_t>(rows.pos[r]);
      if (pos < p0) continue;
      const size_t nv = std::min(n, pos - p0 + 1);  // causal: positions <= pos
      for (size_t g = 0; g < group; ++g) {
        const size_t qi = (r - r0) * group + g;
        k.scores(qs + qi * head_dim, kt, kAttnTile, head_dim, nv, s);
        float tile_max = s[0];
        for (size_t j = 1; j < nv; ++j) tile_max = std::max(tile_max, s[j]);
        float* a = acc + qi * head_dim;
        if (tile_max > m[qi]) {  // rescale what was accumulated under the old max
          const float corr = ExpPoly(m[qi] - tile_max);
          l[qi] *= corr;
          for (size_t d = 0; d < head_dim; ++d) a[d] *= corr;
          m[qi] = tile_max;
        }
        l[qi] += k.exp_sum(s, nv, m[qi]);
        for (size_t j = 0; j < nv; ++j) k.axpy_f32(s[j], vt + j * head_dim, a, head_dim);
      }
    }
  }
  for (size_t r = r0; r < r1; ++r) {
    for (size_t g = 0; g < group; ++g) {
      const size_t qi = (r - r0) * group + g;
      float* out = rows.out + r * rows.out_stride + (kv_head * group + g) * head_dim;
      const float inv = 1.0f / l[qi];
      for (size_t d = 0; d < head_dim; ++d) out[d] = acc[qi * head_dim + d] * inv;
    }
  }
}

void AttendOne(const DotKernels& k, const float* q, const KvLayerView& kv, size_t pos,
               size_t n_head, size_t n_kv_head, size_t head_dim, float* out) {
  const size_t group = n_head / n_kv_head;
  for (size_t h = 0; h < n_head; ++h) {
    AttendHead(k, q + h * head_dim, kv, pos, h / group, head_dim, out + h * head_dim);
  }
}

}  // namespace pc
