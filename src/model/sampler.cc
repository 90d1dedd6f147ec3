#include "model/sampler.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"

namespace pc {

int32_t Argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

std::vector<std::pair<int32_t, float>> TopLogprobs(std::span<const float> logits, int k) {
  std::vector<float> lp(logits.size());
  LogSoftmax(logits.data(), lp.data(), lp.size());
  std::vector<int32_t> ids(lp.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  const size_t kk = std::min<size_t>(static_cast<size_t>(std::max(k, 0)), ids.size());
  std::partial_sort(ids.begin(), ids.begin() + kk, ids.end(), [&lp](int32_t a, int32_t b) {
    return lp[a] > lp[b] || (lp[a] == lp[b] && a < b);
  });
  std::vector<std::pair<int32_t, float>> out;
  for (size_t i = 0; i < kk; ++i) out.emplace_back(ids[i], lp[ids[i]]);
  return out;
}

float TokenLogprob(std::span<const float> logits, int32_t id) {
  float mx = -INFINITY;
  for (float v : logits) mx = std::max(mx, v);
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v - mx));
  return static_cast<float>(static_cast<double>(logits[static_cast<size_t>(id)] - mx) - std::log(sum));
}

Sampler::Sampler(const SamplingParams& p) : p_(p), state_(p.seed ^ 0x9e3779b97f4a7c15ull) {}

double Sampler::NextUniform() {
  // splitmix64
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

int32_t Sampler::Sample(std::span<const float> logits) {
  if (p_.temperature <= 0.0f || logits.size() <= 1) return Argmax(logits);
  cand_.clear();
  for (size_t i = 0; i < logits.size(); ++i) cand_.emplace_back(logits[i], static_cast<int32_t>(i));
  auto better = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t k = cand_.size();
  if (p_.top_k > 0) k = std::min<size_t>(k, static_cast<size_t>(p_.top_k));
  std::partial_sort(cand_.begin(), cand_.begin() + k, cand_.end(), better);
  cand_.resize(k);
  // Softmax over the survivors at the given temperature.
  const float max = cand_[0].first;
  double sum = 0;
  std::vector<double> prob(k);
  for (size_t i = 0; i < k; ++i) {
    prob[i] = std::exp(static_cast<double>(cand_[i].first - max) / p_.temperature);
    sum += prob[i];
  }
  size_t keep = k;
  if (p_.top_p < 1.0f) {
    double cum = 0;
    for (size_t i = 0; i < k; ++i) {
      cum += prob[i] / sum;
      if (cum >= p_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += prob[i];
  double r = NextUniform() * total;
  for (size_t i = 0; i < keep; ++i) {
    r -= prob[i];
    if (r < 0) return cand_[i].second;
  }
  return cand_[keep - 1].second;
}

}  // namespace pc
