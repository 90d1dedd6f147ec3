// Attention in the reference engine's arithmetic order (ggml_compat.h):
// scalar loops whose roundings follow its CPU flash-attention paths, so
// outputs can be compared with it step for step.
#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"
#include "base/fp16.h"
#include "kernels/ggml_compat.h"

namespace pc {

void AttendHeadExtrasF16Accum(const float* q_head, const KvLayerView& kv, size_t pos, size_t kv_head, size_t head_dim,
                              const AttnExtras& x, float* out_head) {
  PC_CHECK(kv.dtype == KvDtype::kF16 && head_dim <= 512);
  PC_CHECK(kv.block_table.size() * kv.block_size > pos);
  const float scale = x.scale != 0 ? x.scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  const float inv_cap = x.softcap != 0 ? 1.0f / x.softcap : 1.0f;
  const size_t lo = x.window != 0 && pos + 1 > x.window ? pos + 1 - x.window : 0;
  uint16_t q16[512], acc[512];
  for (size_t i = 0; i < head_dim; ++i) {
    q16[i] = Fp32ToFp16(q_head[i] * scale);
    acc[i] = 0;
  }
  const auto* kbase = static_cast<const uint16_t*>(kv.k);
  const auto* vbase = static_cast<const uint16_t*>(kv.v);
  float max_score = -std::numeric_limits<float>::infinity(), denom = 0;
  for (size_t p = lo; p <= pos; ++p) {
    const size_t row = static_cast<size_t>(kv.block_table[p / kv.block_size]) * kv.block_size + p % kv.block_size;
    const size_t elem = row * kv.kv_dim + kv_head * head_dim;
    float score = GgmlDotF16Vec(kbase + elem, q16, head_dim);
    if (x.softcap != 0) score = x.softcap * std::tanh(score * inv_cap);
    float ms = 1.0f, vs = 1.0f;
    if (score > max_score) {
      ms = std::exp(max_score - score);
      max_score = score;
      for (size_t i = 0; i < head_dim; ++i) acc[i] = Fp32ToFp16(Fp16ToFp32(acc[i]) * ms);
    } else {
      vs = std::exp(score - max_score);
    }
    for (size_t i = 0; i < head_dim; ++i) acc[i] = Fp32ToFp16(std::fma(Fp16ToFp32(vbase[elem + i]), vs, Fp16ToFp32(acc[i])));
    denom = std::fma(denom, ms, vs);  // the reference's S * ms + vs, contracted
  }
  // The sink's share after the positions, on the accumulator widened to F32
  // (the reference's order).
  float sink_scale = 1.0f;
  if (x.has_sink) {
    float vs = 1.0f;
    if (x.sink > max_score) {
      sink_scale = std::exp(max_score - x.sink);
    } else {
      vs = std::exp(x.sink - max_score);
    }
    denom = denom * sink_scale + vs;  // not fused here: measured against the reference, unlike the loop's
  }
  const float inv_denom = denom == 0.0f ? 0.0f : 1.0f / denom;
  for (size_t i = 0; i < head_dim; ++i) {
    float v = Fp16ToFp32(acc[i]);
    if (sink_scale != 1.0f) v *= sink_scale;
    out_head[i] = v * inv_denom;
  }
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
  AttendHeadGgmlTiledExtras(q_head, kv, pos, kv_head, head_dim, AttnExtras{}, out_head);
}

void AttendHeadGgmlTiledExtras(const float* q_head, const KvLayerView& kv, size_t pos, size_t kv_head,
                               size_t head_dim, const AttnExtras& x, float* out_head) {
  constexpr size_t kTile = 64;  // the reference's KV tile, at absolute positions
  PC_CHECK(kv.dtype == KvDtype::kF16 && head_dim <= 512);
  PC_CHECK(kv.block_table.size() * kv.block_size > pos);
  const float scale = x.scale != 0 ? x.scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  const float inv_cap = x.softcap != 0 ? 1.0f / x.softcap : 1.0f;
  const size_t lo = x.window != 0 && pos + 1 > x.window ? pos + 1 - x.window : 0;
  const size_t lanes = GgmlVectorLanes();
  const auto* kbase = static_cast<const uint16_t*>(kv.k);
  const auto* vbase = static_cast<const uint16_t*>(kv.v);
  float acc[512] = {}, scores[kTile];
  float max_score = -std::numeric_limits<float>::infinity(), denom = 0;
  auto elem_of = [&](size_t p) {
    const size_t row = static_cast<size_t>(kv.block_table[p / kv.block_size]) * kv.block_size + p % kv.block_size;
    return row * kv.kv_dim + kv_head * head_dim;
  };
  for (size_t p0 = lo / kTile * kTile; p0 <= pos; p0 += kTile) {
    const size_t n = std::min(kTile, pos + 1 - p0);
    // Scores: one fused multiply-add chain over the head dimension (Q in
    // F32), scaled, soft-capped; masked and padded cells are -inf.
    float tile_max = -std::numeric_limits<float>::infinity();
    for (size_t j = 0; j < kTile; ++j) {
      if (j >= n || p0 + j < lo) {
        scores[j] = -std::numeric_limits<float>::infinity();
        continue;
      }
      const uint16_t* krow = kbase + elem_of(p0 + j);
      float dot = 0;
      for (size_t d = 0; d < head_dim; ++d) dot = std::fma(Fp16ToFp32(krow[d]), q_head[d], dot);
      scores[j] = x.softcap != 0 ? x.softcap * std::tanh(dot * (scale * inv_cap)) : dot * scale;
      tile_max = std::max(tile_max, scores[j]);
    }
    const float new_max = std::fmax(max_score, tile_max);
    if (new_max > max_score) {
      const float rescale = std::exp(max_score - new_max);
      for (size_t d = 0; d < head_dim; ++d) acc[d] *= rescale;
      denom *= rescale;
    }
    max_score = new_max;
    // exp by the vectorised approximation; the sum in double over partial
    // sums of the target's vector width.
    double sum = 0;
    for (size_t j0 = 0; j0 < kTile; j0 += lanes) {
      for (size_t j = j0; j < j0 + lanes; ++j) scores[j] = GgmlExpApprox(scores[j] - new_max);
      sum += GgmlReduceLanes(scores + j0);
    }
    denom = static_cast<float>(denom + sum);
    // V: for each output dim one fused chain over the tile, continuing acc.
    for (size_t j = 0; j < n; ++j) {
      if (p0 + j < lo) continue;
      const uint16_t* vrow = vbase + elem_of(p0 + j);
      for (size_t d = 0; d < head_dim; ++d) acc[d] = std::fma(Fp16ToFp32(vrow[d]), scores[j], acc[d]);
    }
  }
  if (x.has_sink) {  // the sink's share after the positions
    float vs = 1.0f;
    if (x.sink > max_score) {
      const float ms = std::exp(max_score - x.sink);
      for (size_t d = 0; d < head_dim; ++d) acc[d] *= ms;
      denom *= ms;
    } else {
      vs = std::exp(x.sink - max_score);
    }
    denom += vs;
  }
  const float inv_denom = denom == 0.0f ? 0.0f : 1.0f / denom;
  for (size_t d = 0; d < head_dim; ++d) out_head[d] = acc[d] * inv_denom;
}

}  // namespace pc
