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

void AdjustLogits(const LogitAdjust& adj, std::span<const int32_t> context, size_t num_generated,
                  std::span<float> logits) {
  const size_t n = logits.size();
  for (const auto& [id, b] : adj.bias)
    if (id >= 0 && size_t(id) < n) logits[size_t(id)] += b;
  if (adj.repetition_penalty != 1.0f && adj.repeat_last_n != 0) {
    size_t window = adj.repeat_last_n < 0 ? context.size() : std::min(context.size(), size_t(adj.repeat_last_n));
    std::vector<int32_t> seen(context.end() - long(window), context.end());
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (int32_t id : seen) {
      if (id < 0 || size_t(id) >= n) continue;
      float& l = logits[size_t(id)];
      l = l > 0 ? l / adj.repetition_penalty : l * adj.repetition_penalty;
    }
  }
  if (adj.presence_penalty != 0.0f || adj.frequency_penalty != 0.0f) {
    std::vector<int32_t> gen(context.end() - long(std::min(num_generated, context.size())), context.end());
    std::sort(gen.begin(), gen.end());
    for (size_t i = 0; i < gen.size();) {
      size_t j = i;
      while (j < gen.size() && gen[j] == gen[i]) ++j;
      if (gen[i] >= 0 && size_t(gen[i]) < n)
        logits[size_t(gen[i])] -= adj.presence_penalty + adj.frequency_penalty * float(j - i);
      i = j;
    }
  }
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
  if (p_.typical_p < 1.0f && k > 1) {
    // Locally typical: keep the tokens whose surprise is nearest the
    // entropy, until their mass reaches typical_p; then back in
    // probability order.
    double entropy = 0;
    for (size_t i = 0; i < k; ++i) {
      const double q = prob[i] / sum;
      if (q > 0) entropy -= q * std::log(q);
    }
    std::vector<size_t> order(k);
    for (size_t i = 0; i < k; ++i) order[i] = i;
    auto dist = [&](size_t i) { return prob[i] > 0 ? std::fabs(-std::log(prob[i] / sum) - entropy) : INFINITY; };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return dist(a) < dist(b); });
    double cum = 0;
    size_t m = 0;
    while (m < k) {
      cum += prob[order[m++]] / sum;
      if (cum >= p_.typical_p) break;
    }
    std::sort(order.begin(), order.begin() + long(m));
    std::vector<std::pair<float, int32_t>> kept_c;
    std::vector<double> kept_p;
    for (size_t i = 0; i < m; ++i) {
      kept_c.push_back(cand_[order[i]]);
      kept_p.push_back(prob[order[i]]);
    }
    cand_ = std::move(kept_c);
    prob = std::move(kept_p);
    k = keep = m;
    sum = 0;
    for (double q : prob) sum += q;
  }
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
  if (p_.min_p > 0.0f) {
    // prob[0] is the largest (candidates are sorted).
    size_t m = 1;
    while (m < keep && prob[m] >= double(p_.min_p) * prob[0]) ++m;
    keep = m;
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
