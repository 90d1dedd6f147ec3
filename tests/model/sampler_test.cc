#include <algorithm>
#include <cmath>
#include <map>

#include "model/sampler.h"
#include "test_support.h"

namespace pc {
namespace {

TEST(Sampler, GreedyPicksTheLargestLowestIdOnTies) {
  const std::vector<float> logits = {0.1f, 3.0f, -1.0f, 3.0f};
  EXPECT_EQ(Argmax(logits), 1);
  Sampler s(SamplingParams{0.0f, 40, 0.95f, 1, 0.0f, 1.0f});
  for (int i = 0; i < 10; ++i) EXPECT_EQ(s.Sample(logits), 1);
}

// Argmax keeps 16 lanes; it must pick what a plain scan picks (the first
// index of the largest, NaN never winning) at every length and on ties.
TEST(Sampler, ArgmaxIsThePlainScansPick) {
  auto scan = [](const std::vector<float>& x) {
    int32_t b = 0;
    for (size_t i = 1; i < x.size(); ++i) if (x[i] > x[size_t(b)]) b = int32_t(i);
    return b;
  };
  uint64_t state = 3;
  auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull; };
  for (size_t n : {1u, 2u, 15u, 16u, 17u, 33u, 100u, 1000u, 49153u}) {
    for (int kind = 0; kind < 4; ++kind) {
      std::vector<float> x(n);
      for (float& v : x) v = kind == 1 ? float((next() >> 40) % 3) : float((next() >> 40) % 100000) * 1e-3f;
      if (kind == 2) x[n / 2] = NAN, x[n - 1] = INFINITY;
      if (kind == 3) x[0] = NAN;
      EXPECT_EQ(Argmax(x), scan(x)) << n << " kind " << kind;
    }
  }
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferentTokens) {
  std::vector<float> logits(100);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i % 7) * 0.3f;
  auto draw = [&](uint64_t seed) {
    Sampler s(SamplingParams{1.0f, 0, 1.0f, seed, 0.0f, 1.0f});
    std::vector<int32_t> out;
    for (int i = 0; i < 50; ++i) out.push_back(s.Sample(logits));
    return out;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
}

TEST(Sampler, TopKOneAndTinyTopPAreGreedy) {
  std::vector<float> logits = {1.0f, 2.0f, 5.0f, 4.9f};
  Sampler k1(SamplingParams{1.0f, 1, 1.0f, 7, 0.0f, 1.0f});
  Sampler p0(SamplingParams{1.0f, 0, 0.01f, 7, 0.0f, 1.0f});
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(k1.Sample(logits), 2);
    EXPECT_EQ(p0.Sample(logits), 2);
  }
}

TEST(Sampler, FrequenciesFollowTheSoftmax) {
  // Two tokens with logits differing by ln(3): expect a 3:1 split.
  const std::vector<float> logits = {0.0f, std::log(3.0f), -50.0f};
  Sampler s(SamplingParams{1.0f, 0, 1.0f, 99, 0.0f, 1.0f});
  std::map<int32_t, int> counts;
  for (int i = 0; i < 20000; ++i) ++counts[s.Sample(logits)];
  EXPECT_NEAR(counts[1] / 20000.0, 0.75, 0.02);
  EXPECT_EQ(counts[2], 0);
}

TEST(Sampler, TopKExcludesTheTail) {
  const std::vector<float> logits = {1.0f, 1.0f, 1.0f, 0.9f};
  Sampler s(SamplingParams{2.0f, 3, 1.0f, 5, 0.0f, 1.0f});
  for (int i = 0; i < 2000; ++i) EXPECT_NE(s.Sample(logits), 3);
}

// The walk over a fully sorted vocabulary, as the sampler is specified
// (top_k, top_p, min_p; no typical_p), drawing from `u`.
int32_t SortedWalk(std::span<const float> logits, const SamplingParams& p, Sampler& u) {
  std::vector<std::pair<float, int32_t>> c;
  for (size_t i = 0; i < logits.size(); ++i) c.emplace_back(logits[i], static_cast<int32_t>(i));
  std::sort(c.begin(), c.end(), [](auto& a, auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < c.size()) c.resize(static_cast<size_t>(p.top_k));
  std::vector<double> prob;
  double sum = 0;
  for (auto& [l, id] : c) sum += prob.emplace_back(std::exp(static_cast<double>(l - c[0].first) / p.temperature));
  size_t keep = c.size();
  double cum = 0;
  for (size_t i = 0; p.top_p < 1.0f && i < c.size(); ++i) {
    if ((cum += prob[i] / sum) >= p.top_p) {
      keep = i + 1;
      break;
    }
  }
  size_t m = 1;
  while (p.min_p > 0.0f && m < keep && prob[m] >= double(p.min_p) * prob[0]) ++m;
  if (p.min_p > 0.0f) keep = m;
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += prob[i];
  double r = u.NextUniform() * total;
  for (size_t i = 0; i < keep; ++i) {
    if ((r -= prob[i]) < 0) return c[i].second;
  }
  return c[keep - 1].second;
}

// The sampler sorts only as far as its walk goes: it must draw what the
// walk over the whole sorted vocabulary draws, for flat and peaked
// distributions, ties, and every truncation.
TEST(Sampler, LazyOrderDrawsWhatAFullSortDraws) {
  std::vector<std::vector<float>> cases;
  for (size_t n : {3u, 70u, 1000u, 20000u}) {
    std::vector<float> flat(n), peaked(n), ties(n);
    uint64_t x = n;
    for (size_t i = 0; i < n; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      flat[i] = static_cast<float>((x >> 40) % 1000) * 1e-3f;
      peaked[i] = static_cast<float>((x >> 40) % 1000) * 2e-2f;
      ties[i] = static_cast<float>((x >> 40) % 5);
    }
    cases.insert(cases.end(), {flat, peaked, ties});
  }
  const std::vector<SamplingParams> params = {
      {1.0f, 0, 1.0f, 11, 0.0f, 1.0f},  {0.7f, 0, 0.9f, 12, 0.0f, 1.0f}, {1.3f, 40, 1.0f, 13, 0.0f, 1.0f},
      {1.0f, 0, 1.0f, 14, 0.05f, 1.0f}, {1.0f, 100, 0.5f, 15, 0.2f, 1.0f}};
  size_t draws = 0;
  for (const std::vector<float>& logits : cases) {
    for (const SamplingParams& p : params) {
      Sampler s(p), u(p);
      for (int i = 0; i < 20; ++i, ++draws) ASSERT_EQ(s.Sample(logits), SortedWalk(logits, p, u)) << logits.size() << " " << i;
    }
  }
  EXPECT_EQ(draws, 12u * 5u * 20u);
}

TEST(Sampler, TopLogprobsAreSortedAndNormalised) {
  const std::vector<float> logits = {0.0f, 2.0f, 1.0f};
  auto top = TopLogprobs(logits, 2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].first, 1);
  EXPECT_EQ(top[1].first, 2);
  const double z = std::log(std::exp(0.0) + std::exp(2.0) + std::exp(1.0));
  EXPECT_NEAR(top[0].second, 2.0 - z, 1e-6);
  EXPECT_EQ(TopLogprobs(logits, 10).size(), 3u);
}

// Each parameter's arithmetic on fixed logits.
TEST(SamplerParams, MinPKeepsTokensWithinAFractionOfTheBest) {
  // Probabilities 0.5, 0.25, 0.125, 0.125: min_p 0.3 keeps 0.5 and 0.25 only.
  const std::vector<float> logits = {std::log(4.0f), std::log(2.0f), 0.0f, 0.0f};
  Sampler s(SamplingParams{1.0f, 0, 1.0f, 3, 0.3f, 1.0f});
  std::map<int32_t, int> counts;
  for (int i = 0; i < 6000; ++i) ++counts[s.Sample(logits)];
  EXPECT_EQ(counts[2] + counts[3], 0);
  EXPECT_NEAR(counts[0] / 6000.0, 2.0 / 3.0, 0.03);  // renormalised 0.5 : 0.25
}

TEST(SamplerParams, TypicalPKeepsTheTokensNearestTheEntropy) {
  // p = 0.7, 0.1, 0.1, 0.1: entropy 0.94 nats; surprises 0.36 and 2.30, so
  // the most likely token is the most typical; typical_p 0.5 keeps it alone.
  const std::vector<float> logits = {std::log(7.0f), 0.0f, 0.0f, 0.0f};
  Sampler s(SamplingParams{1.0f, 0, 1.0f, 3, 0.0f, 0.5f});
  for (int i = 0; i < 500; ++i) EXPECT_EQ(s.Sample(logits), 0);
  // p = 0.4, 0.3, 0.3 (entropy 1.09): surprises 0.92 and 1.20, the 0.3s
  // are nearer; typical_p 0.5 keeps both of them and never the 0.4.
  const std::vector<float> l2 = {std::log(4.0f), std::log(3.0f), std::log(3.0f)};
  Sampler t(SamplingParams{1.0f, 0, 1.0f, 3, 0.0f, 0.5f});
  std::map<int32_t, int> counts;
  for (int i = 0; i < 4000; ++i) ++counts[t.Sample(l2)];
  EXPECT_EQ(counts[0], 0);
  EXPECT_NEAR(counts[1] / 4000.0, 0.5, 0.04);
}

TEST(SamplerParams, LogitBiasAndPenalties) {
  const std::vector<int32_t> context = {5, 1, 1, 2, 1};  // prompt {5, 1}, generated {1, 2, 1}
  std::vector<float> l = {1.0f, 2.0f, -2.0f, 0.5f, 0.0f, 4.0f};
  LogitAdjust a;
  a.bias = {{3, 10.0f}, {0, -INFINITY}};
  AdjustLogits(a, context, 3, l);
  EXPECT_EQ(l[3], 10.5f);
  EXPECT_EQ(l[0], -INFINITY);
  // Repetition over the whole context: positive logits divided, negative
  // multiplied; once per token whatever its count.
  std::vector<float> r = {1.0f, 2.0f, -2.0f, 0.5f, 0.0f, 4.0f};
  LogitAdjust rep;
  rep.repetition_penalty = 2.0f;
  AdjustLogits(rep, context, 3, r);
  EXPECT_EQ(r[1], 1.0f);
  EXPECT_EQ(r[2], -4.0f);
  EXPECT_EQ(r[5], 2.0f);  // in the prompt: counted
  EXPECT_EQ(r[3], 0.5f);
  // The same over the last two tokens only (llama.cpp's repeat_last_n).
  std::vector<float> w = {1.0f, 2.0f, -2.0f, 0.5f, 0.0f, 4.0f};
  rep.repeat_last_n = 2;
  AdjustLogits(rep, context, 3, w);
  EXPECT_EQ(w[5], 4.0f);
  EXPECT_EQ(w[1], 1.0f);
  EXPECT_EQ(w[2], -4.0f);
  // Presence once, frequency per occurrence, over generated tokens only.
  std::vector<float> p = {1.0f, 2.0f, -2.0f, 0.5f, 0.0f, 4.0f};
  LogitAdjust pf;
  pf.presence_penalty = 0.5f;
  pf.frequency_penalty = 0.25f;
  AdjustLogits(pf, context, 3, p);
  EXPECT_FLOAT_EQ(p[1], 2.0f - 0.5f - 0.5f);  // generated twice
  EXPECT_FLOAT_EQ(p[2], -2.0f - 0.5f - 0.25f);
  EXPECT_EQ(p[5], 4.0f);  // only in the prompt
  EXPECT_FALSE(LogitAdjust{}.active());
}

}  // namespace
}  // namespace pc
