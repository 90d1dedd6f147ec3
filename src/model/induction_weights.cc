#include "model/induction_weights.h"

#include <algorithm>
#include <cmath>

namespace pc {

namespace {
constexpr float kIdentity = 4;  // s: |u_t[d]|
constexpr float kBias = 16;     // B: dim 0 of every embedding
constexpr double kPositionMargin = 16;  // logits between the wanted position and its neighbours
constexpr double kMatchSpread = 4;      // std of a content score between different tokens (logits)

uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

bool StartsWith(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }
}  // namespace

Result<InductionWeights> InductionWeights::Make(const ModelShape& s, uint64_t seed) {
  InductionWeights w;
  w.s_ = s;
  w.seed_ = seed;
  w.hd_ = static_cast<size_t>(s.n_embd / s.n_head);
  w.group_ = static_cast<size_t>(s.n_head / s.n_kv_head);
  // About 40% of the head's pairs turn fast enough to tell neighbours apart.
  w.pos_pairs_ = std::max<size_t>(2, w.hd_ * 13 / 64);
  if (s.n_layer < 2 || w.group_ < 2 || 2 * w.pos_pairs_ + 8 > w.hd_) {
    return Errorf("--copy needs 2+ layers, 2+ query heads per KV head and heads of 24+ dims");
  }
  w.slice_ = w.hd_ - 2 * w.pos_pairs_;
  w.dims_ = static_cast<size_t>(s.n_kv_head) * w.slice_;
  if (1 + 2 * w.dims_ > static_cast<size_t>(s.n_embd)) return Errorf("--copy: n_embd too small for {} identity dims", w.dims_);
  const double e = s.n_embd, d = static_cast<double>(w.dims_), id2 = kIdentity * kIdentity;
  const double rms0 = std::sqrt((kBias * kBias + d * id2) / e), rms1 = std::sqrt((kBias * kBias + 2 * d * id2) / e);
  double margin = 0;  // sum over positional pairs of 1 - cos(theta): the score gap to a neighbour, per unit
  for (size_t k = 0; k < w.pos_pairs_; ++k) {
    w.theta_.push_back(static_cast<float>(std::pow(static_cast<double>(kRopeBase), -2.0 * static_cast<double>(k) / static_cast<double>(w.hd_))));
    margin += 1 - std::cos(static_cast<double>(w.theta_.back()));
  }
  const double scale = std::sqrt(static_cast<double>(w.hd_));  // attention's 1/sqrt(hd)
  const double p = kPositionMargin * scale / margin;          // (q pair * k pair) per positional pair
  w.a0_ = static_cast<float>(std::sqrt(p) * rms0 / kBias);
  w.a1_ = static_cast<float>(std::sqrt(p) * rms1 / kBias);
  // Values carry the identity / rms; the output projections restore +-s.
  w.co0_ = static_cast<float>(rms0);
  w.co1_ = static_cast<float>(rms1);
  w.cqk_ = static_cast<float>(std::sqrt(kMatchSpread * rms1 * rms1 * scale / (std::sqrt(static_cast<double>(w.slice_)) * id2)));
  return w;
}

float InductionWeights::Identity(size_t token, size_t dim) const {
  return (Mix(seed_ * 0x9e3779b97f4a7c15ull + token * 0x100000001b3ull + dim) & 1) ? kIdentity : -kIdentity;
}

bool InductionWeights::Writes(const std::string& name) const {
  if (name == "token_embd.weight" || name == "output.weight") return true;
  if (!StartsWith(name, "blk.0.") && !StartsWith(name, "blk.1.")) return false;
  return name.find("norm") == std::string::npos;
}

void InductionWeights::Row(const std::string& name, size_t row, float* out, size_t cols) const {
  std::fill(out, out + cols, 0.0f);
  if (name == "token_embd.weight" || name == "output.weight") {
    out[0] = kBias;
    for (size_t i = 0; i < dims_; ++i) out[Cur(i)] = Identity(row, i);
    return;
  }
  const std::string m = name.substr(6);  // after "blk.N."
  if (name[4] == '0') Layer0(m, row, out);
  else Layer1(m, row, out);
}

// The previous-token heads.
void InductionWeights::Layer0(const std::string& m, size_t row, float* out) const {
  const size_t h = row / hd_, d = row % hd_;
  if (m == "attn_q.weight") {
    if (h % group_ == 0 && d < 2 * pos_pairs_ && d % 2 == 0) out[0] = a0_;
  } else if (m == "attn_k.weight") {
    // Key pairs turned ahead by one position: the score peaks at i - 1.
    if (d < 2 * pos_pairs_) out[0] = a0_ * (d % 2 == 0 ? std::cos(theta_[d / 2]) : std::sin(theta_[d / 2]));
  } else if (m == "attn_v.weight") {
    if (d >= 2 * pos_pairs_) out[Cur(h * slice_ + d - 2 * pos_pairs_)] = 1;
  } else if (m == "attn_output.weight") {
    if (row >= Prev(0) && row < Prev(dims_)) {
      const size_t i = row - Prev(0), g = i / slice_;
      out[g * group_ * hd_ + Content(i % slice_)] = co0_;
    }
  }
}

// The induction heads and the heads that take the token's own identity out.
void InductionWeights::Layer1(const std::string& m, size_t row, float* out) const {
  const size_t h = row / hd_, d = row % hd_;
  if (m == "attn_q.weight") {
    const size_t g = h / group_;
    if (h % group_ == 0 && d >= 2 * pos_pairs_) out[Cur(g * slice_ + d - 2 * pos_pairs_)] = cqk_;
    if (h % group_ == 1 && d < 2 * pos_pairs_ && d % 2 == 0) out[0] = a1_;
  } else if (m == "attn_k.weight") {
    if (d < 2 * pos_pairs_ && d % 2 == 0) out[0] = a1_;  // offset 0: the score peaks at i itself
    if (d >= 2 * pos_pairs_) out[Prev(h * slice_ + d - 2 * pos_pairs_)] = cqk_;
  } else if (m == "attn_v.weight") {
    if (d >= 2 * pos_pairs_) out[Cur(h * slice_ + d - 2 * pos_pairs_)] = 1;
  } else if (m == "attn_output.weight") {
    if (row >= Cur(0) && row < Cur(dims_)) {
      const size_t i = row - Cur(0), g = i / slice_;
      out[g * group_ * hd_ + Content(i % slice_)] = co1_;
      out[(g * group_ + 1) * hd_ + Content(i % slice_)] = -co1_;
    }
  }
}

}  // namespace pc
