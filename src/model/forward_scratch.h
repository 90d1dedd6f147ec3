// The forward pass's per-batch activations (Model::Scratch), shared by the
// files of the recipe (forward.cc, forward_experts.cc). Not thread-safe: one
// Forward call owns one.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/dot.h"
#include "kernels/ops_simd.h"
#include "kernels/qpack_kernels.h"
#include "kernels/quant.h"
#include "model/attn_plan.h"
#include "model/forward.h"

namespace pc {

// Grows v to at least n elements, never shrinking it. The scratch lives as
// long as the model and every buffer is written before it is read, so a
// reused buffer needs no zeroing: a fresh one per Forward zero-filled and
// page-faulted 16 MB per MoE layer (30% of bench-moe's prefill samples).
template <class T>
T* Fit(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Activations for one batch of n tokens (floats unless noted).
struct Model::Scratch {
  std::vector<float> x, xb, q, k, v, att, hb, hb2, out;
  std::vector<float> rope_cs;      // [n][rope_dim]: each token's rotation angles (RopeAngles)
  std::vector<float> rope_cs_swa;  // the same for windowed layers, when they rotate otherwise
  std::vector<float> router;       // [n][n_expert] router logits
  std::vector<float> ex, ey;       // one expert's gathered input rows and output rows
  std::vector<float> moe_out;      // [n][n_expert_used][n_embd] weighted expert outputs
  std::vector<uint8_t> xq;  // activation rows converted for a matmul (ggml numerics)
  // Activation rows converted for the precise kernels, one buffer per
  // activation type a matmul needs (weights of several types can share an
  // input: Q4_K_M files mix Q4_K and Q6_K).
  struct Converted {
    TensorType type;
    size_t row_bytes;
    std::vector<uint8_t> data;
    bool live = false;  // holds this Linear's input; else a buffer to reuse
  };
  std::vector<Converted> acts;
  // Forgets the converted inputs and keeps their buffers.
  void ClearActs() {
    for (Converted& c : acts) c.live = false;
  }
  const X16Kernels* x16 = nullptr;
  std::vector<float> attn_scratch;  // per-thread attention tiles
  std::vector<float> attn_parts;    // split-KV: one softmax state per span
  // The last attention plan (BalanceAttnItems) and what it was made from:
  // every layer of a forward pass plans the same items (the last one, cut
  // to the logit rows, may plan its own), so it is made once or twice.
  std::vector<AttnItem> plan_in, plan_out;
  // The same for split-KV's span units (BalanceSpanUnits).
  std::vector<AttnItem> split_in, split_out;
  std::vector<BatchToken> logit_batch;  // the last layer's rows with want_logits (AttentionBlock)
  const DotKernels* kernels = nullptr;
  const RowOps* ops = nullptr;  // the per-token passes at the same level
  // The pass's keep_going (Forward; null or empty: none) and whether it
  // has said no.
  const std::function<bool()>* keep_going = nullptr;
  bool dropped = false;
  // The pass's news counter (Forward; null: none) and its value at the last
  // ask; written on the calling thread between pool jobs only.
  const std::atomic<uint64_t>* news = nullptr;
  uint64_t news_seen = 0;
};

}  // namespace pc
