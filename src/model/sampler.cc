#include "model/sampler.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"

namespace pc {

int32_t Argmax(std::span<const float> logits) {
  if (logits.empty()) return 0;
  // The maximum in 16 independent lanes (no chain through one index: the
  // compiler keeps them in vector registers, ~10x the one-lane loop on a
  // 49k vocabulary), then the first index holding it. NaN never wins a
  // comparison, as in a plain scan (one at logits[0] keeps 0).
  constexpr size_t kLanes = 16;
  float lane[kLanes];
  std::fill(lane, lane + kLanes, logits[0]);
  size_t i = 0;
  for (; i + kLanes <= logits.size(); i += kLanes) {
    for (size_t l = 0; l < kLanes; ++l) lane[l] = logits[i + l] > lane[l] ? logits[i + l] : lane[l];
  }
  float max = lane[0];
  for (size_t l = 1; l < kLanes; ++l) max = lane[l] > max ? lane[l] : max;
  for (; i < logits.size(); ++i) max = logits[i] > max ? logits[i] : max;
  for (size_t j = 0; j < logits.size(); ++j) {
    if (logits[j] == max) return static_cast<int32_t>(j);
  }
  return 0;
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

namespace {
bool Better(float la, int32_t ia, float lb, int32_t ib) { return la > lb || (la == lb && ia < ib); }
}  // namespace

void Sampler::SortThrough(size_t n) {
  n = std::min(n, cand_.size());
  if (n <= sorted_) return;
  auto better = [](const Candidate& a, const Candidate& b) { return Better(a.logit, a.id, b.logit, b.id); };
  const size_t end = std::min(cand_.size(), std::max({n, 2 * sorted_, size_t{64}}));
  const auto first = cand_.begin() + static_cast<std::ptrdiff_t>(sorted_), last = cand_.begin() + static_cast<std::ptrdiff_t>(end);
  if (end < cand_.size()) std::nth_element(first, last, cand_.end(), better);
  std::sort(first, last, better);
  sorted_ = end;
}

// Locally typical: keep the tokens whose surprise is nearest the entropy,
// until their mass reaches typical_p; then back in probability order.
void Sampler::KeepTypical(double sum) {
  SortThrough(cand_.size());
  const size_t k = cand_.size();
  double entropy = 0;
  for (const Candidate& c : cand_) {
    const double q = c.p / sum;
    if (q > 0) entropy -= q * std::log(q);
  }
  std::vector<size_t> order(k);
  for (size_t i = 0; i < k; ++i) order[i] = i;
  auto dist = [&](size_t i) { return cand_[i].p > 0 ? std::fabs(-std::log(cand_[i].p / sum) - entropy) : INFINITY; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return dist(a) < dist(b); });
  double cum = 0;
  size_t m = 0;
  while (m < k) {
    cum += cand_[order[m++]].p / sum;
    if (cum >= p_.typical_p) break;
  }
  std::sort(order.begin(), order.begin() + long(m));
  std::vector<Candidate> kept;
  for (size_t i = 0; i < m; ++i) kept.push_back(cand_[order[i]]);
  cand_ = std::move(kept);
  sorted_ = cand_.size();
}

int32_t Sampler::Sample(std::span<const float> logits) {
  if (p_.temperature <= 0.0f || logits.size() <= 1) return Argmax(logits);
  cand_.clear();
  sorted_ = 0;
  for (size_t i = 0; i < logits.size(); ++i) cand_.push_back({logits[i], static_cast<int32_t>(i), 0.0});
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < cand_.size()) {
    SortThrough(static_cast<size_t>(p_.top_k));
    cand_.resize(static_cast<size_t>(p_.top_k));
    sorted_ = cand_.size();
  }
  // Softmax over the survivors at the given temperature.
  float max = cand_[0].logit;
  for (const Candidate& c : cand_) max = std::max(max, c.logit);
  double sum = 0;
  for (Candidate& c : cand_) sum += c.p = std::exp(static_cast<double>(c.logit - max) / p_.temperature);
  if (p_.typical_p < 1.0f && cand_.size() > 1) {
    KeepTypical(sum);
    sum = 0;
    for (const Candidate& c : cand_) sum += c.p;
  }
  const size_t k = cand_.size();
  size_t keep = k;
  if (p_.top_p < 1.0f) {
    double cum = 0;
    for (size_t i = 0; i < k; ++i) {
      SortThrough(i + 1);
      cum += cand_[i].p / sum;
      if (cum >= p_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (p_.min_p > 0.0f) {
    SortThrough(1);
    const double floor = double(p_.min_p) * cand_[0].p;  // cand_[0] is the largest
    size_t m = 1;
    for (; m < keep; ++m) {
      SortThrough(m + 1);
      if (cand_[m].p < floor) break;
    }
    keep = m;
  }
  double total = sum;
  if (keep < k) {
    total = 0;
    for (size_t i = 0; i < keep; ++i) total += cand_[i].p;
  }
  double r = NextUniform() * total;
  for (size_t i = 0; i < std::min(keep, sorted_); ++i) {
    if ((r -= cand_[i].p) < 0) return cand_[i].id;
  }
  return WalkUnsorted(r, keep);
}

// The walk through cand_[sorted_, keep) (not yet in order) without sorting
// it: bucket the range by logit (64 buckets between its extremes, the
// highest first: a bucket's tokens all rank above the next bucket's, equal
// logits share one), find the bucket where the draw ends from the buckets'
// masses, keep only its tokens, and repeat until few are left; sort those
// and walk. Three passes over the range, then over ~1/64 of it.
int32_t Sampler::WalkUnsorted(double r, size_t keep) {
  auto better = [](const Candidate& a, const Candidate& b) { return Better(a.logit, a.id, b.logit, b.id); };
  const auto at = [&](size_t i) { return cand_.begin() + static_cast<std::ptrdiff_t>(i); };
  constexpr int kBuckets = 64;
  size_t lo = sorted_, hi = keep;
  while (hi - lo > 256) {
    float vmin = INFINITY, vmax = -INFINITY;
    for (size_t i = lo; i < hi; ++i) vmin = std::min(vmin, cand_[i].logit), vmax = std::max(vmax, cand_[i].logit);
    if (!(vmax > vmin) || !std::isfinite(vmax - vmin)) break;  // all equal, or not numbers: sort what is left
    const double scale = kBuckets / (static_cast<double>(vmax) - vmin);
    auto bucket = [&](float v) {
      const double b = (static_cast<double>(vmax) - v) * scale;
      return b >= 0 && b < kBuckets ? static_cast<int>(b) : kBuckets - 1;  // vmin (b == kBuckets) and NaN last
    };
    double mass[kBuckets] = {};
    for (size_t i = lo; i < hi; ++i) mass[bucket(cand_[i].logit)] += cand_[i].p;
    int b = 0;
    while (b + 1 < kBuckets && r - mass[b] >= 0) r -= mass[b++];
    hi = static_cast<size_t>(std::partition(at(lo), at(hi), [&](const Candidate& c) { return bucket(c.logit) == b; }) - cand_.begin());
  }
  std::sort(at(lo), at(hi), better);
  for (size_t i = lo; i < hi; ++i) {
    if ((r -= cand_[i].p) < 0) return cand_[i].id;
  }
  return cand_[hi - 1].id;
}

}  // namespace pc
