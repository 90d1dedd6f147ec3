// Written weights for `make-model --copy`: a model that copies the way real
// models quote their prompt (an "induction head"), so that copy-heavy
// workloads (prompt-lookup drafts, issue 29) can be measured on a file both
// engines run. Every other matrix stays random: a step costs what the shape
// costs.
//
// The residual stream of n_embd dims holds, per position: dim 0 a constant
// B (every embedding has it), dims [1, 1+D) the token's identity u_t (±s per
// dim, pseudo-random per token), dims [1+D, 1+2D) the previous token's
// identity (written by layer 0). D = n_kv_head * slice, where each head of
// hd dims keeps its first `pos_pairs` rotary pairs (the fast-turning ones)
// for position and the last `slice` dims (pairs that barely turn at the
// chosen rope base, 1e12) for content:
// - layer 0, the first head of each KV group: query and key are constants
//   from dim 0 whose rotary pairs make the score peak at the previous
//   position; the value is the token's identity slice, written to `prev`.
// - layer 1, the first head of each group: query = identity slice, key =
//   `prev` slice, so position i attends to j where token j-1 equals token i;
//   value = identity at j (what followed the earlier occurrence), added to
//   the identity dims. The second head of each group attends to itself
//   (positional pairs, offset 0) and subtracts the token's own identity.
// - tied output (or output.weight = the embeddings): the logits rank tokens
//   by their identity's match with what remains: the copied successor.
// FFNs of layers 0-1 are zero. Thread-safety: immutable after Make.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/make_model.h"

namespace pc {

class InductionWeights {
 public:
  // Fails when the shape has no room (fewer than 2 layers or 2 heads per KV
  // group, or 1 + 2D > n_embd).
  static Result<InductionWeights> Make(const ModelShape& s, uint64_t seed);
  static constexpr float kRopeBase = 1e12f;

  // Whether tensor `name` (e.g. "blk.0.attn_q.weight", "token_embd.weight")
  // is written here rather than drawn at random.
  bool Writes(const std::string& name) const;
  // Row `row` of that matrix ([cols] floats, cols = its input width).
  void Row(const std::string& name, size_t row, float* out, size_t cols) const;

 private:
  ModelShape s_;
  uint64_t seed_ = 0;
  size_t hd_ = 0, group_ = 0, pos_pairs_ = 0, slice_ = 0, dims_ = 0;
  float a0_ = 0, a1_ = 0, co0_ = 0, co1_ = 0, cqk_ = 0;
  std::vector<float> theta_;  // per positional pair, radians per position

  float Identity(size_t token, size_t dim) const;  // u_t[dim], dim < dims_
  size_t Cur(size_t i) const { return 1 + i; }
  size_t Prev(size_t i) const { return 1 + dims_ + i; }
  // Head-local dim of content element r of a slice.
  size_t Content(size_t r) const { return 2 * pos_pairs_ + r; }
  void Layer0(const std::string& m, size_t row, float* out) const;
  void Layer1(const std::string& m, size_t row, float* out) const;
};

}  // namespace pc
