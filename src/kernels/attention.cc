#include "kernels/attention.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "base/check.h"
#include "base/fp16.h"

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
    double dot = 0;
    for (size_t i = 0; i < head_dim; ++i) dot += static_cast<double>(Fp16ToFp32(q16[i])) * Fp16ToFp32(kbase[elem + i]);
    const float score = static_cast<float>(dot) * scale;
    float ms = 1.0f, vs = 1.0f;
    if (score > max_score) {
      ms = std::exp(max_score - score);
      max_score = score;
      for (size_t i = 0; i < head_dim; ++i) acc[i] = Fp32ToFp16(Fp16ToFp32(acc[i]) * ms);
    } else {
      vs = std::exp(score - max_score);
    }
    for (size_t i = 0; i < head_dim; ++i) {
      acc[i] = Fp32ToFp16(Fp16ToFp32(acc[i]) + Fp16ToFp32(vbase[elem + i]) * vs);
    }
    denom = denom * ms + vs;
  }
  for (size_t i = 0; i < head_dim; ++i) out_head[i] = Fp16ToFp32(acc[i]) / denom;
}

void AttendOne(const DotKernels& k, const float* q, const KvLayerView& kv, size_t pos,
               size_t n_head, size_t n_kv_head, size_t head_dim, float* out) {
  const size_t group = n_head / n_kv_head;
  for (size_t h = 0; h < n_head; ++h) {
    AttendHead(k, q + h * head_dim, kv, pos, h / group, head_dim, out + h * head_dim);
  }
}

}  // namespace pc
