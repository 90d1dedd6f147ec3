#include <cmath>
#include <map>

#include "model/sampler.h"
#include "test_support.h"

namespace pc {
namespace {

TEST(Sampler, GreedyPicksTheLargestLowestIdOnTies) {
  const std::vector<float> logits = {0.1f, 3.0f, -1.0f, 3.0f};
  EXPECT_EQ(Argmax(logits), 1);
  Sampler s(SamplingParams{0.0f, 40, 0.95f, 1});
  for (int i = 0; i < 10; ++i) EXPECT_EQ(s.Sample(logits), 1);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferentTokens) {
  std::vector<float> logits(100);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i % 7) * 0.3f;
  auto draw = [&](uint64_t seed) {
    Sampler s(SamplingParams{1.0f, 0, 1.0f, seed});
    std::vector<int32_t> out;
    for (int i = 0; i < 50; ++i) out.push_back(s.Sample(logits));
    return out;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
}

TEST(Sampler, TopKOneAndTinyTopPAreGreedy) {
  std::vector<float> logits = {1.0f, 2.0f, 5.0f, 4.9f};
  Sampler k1(SamplingParams{1.0f, 1, 1.0f, 7});
  Sampler p0(SamplingParams{1.0f, 0, 0.01f, 7});
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(k1.Sample(logits), 2);
    EXPECT_EQ(p0.Sample(logits), 2);
  }
}

TEST(Sampler, FrequenciesFollowTheSoftmax) {
  // Two tokens with logits differing by ln(3): expect a 3:1 split.
  const std::vector<float> logits = {0.0f, std::log(3.0f), -50.0f};
  Sampler s(SamplingParams{1.0f, 0, 1.0f, 99});
  std::map<int32_t, int> counts;
  for (int i = 0; i < 20000; ++i) ++counts[s.Sample(logits)];
  EXPECT_NEAR(counts[1] / 20000.0, 0.75, 0.02);
  EXPECT_EQ(counts[2], 0);
}

TEST(Sampler, TopKExcludesTheTail) {
  const std::vector<float> logits = {1.0f, 1.0f, 1.0f, 0.9f};
  Sampler s(SamplingParams{2.0f, 3, 1.0f, 5});
  for (int i = 0; i < 2000; ++i) EXPECT_NE(s.Sample(logits), 3);
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

}  // namespace
}  // namespace pc
