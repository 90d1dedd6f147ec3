// The engine over 8-bit K/V (--kv-type q8_0): a prefix hit gives the cold
// run's logprobs bit for bit (the blocks hold what a cold run writes), the
// pool holds 64/34 times the tokens of F16 in the same bytes, drafts keep
// outputs unchanged, and quality stays near F16's.
#include <gtest/gtest.h>

#include <cmath>

#include "base/check.h"
#include "engine/engine.h"
#include "engine/stream_output.h"
#include "model/make_model.h"
#include "test_model.h"

namespace pc {
namespace {

test::MadeModel MakeModel64() {  // heads of 64 dims (Q8_0 needs a multiple of 32)
  return test::MakeTestModel({"engine-kv8", 256, 2, 4, 2, 256, true, 2048}, TensorType::kQ8_0, 512);
}

std::vector<int32_t> Prompt(int i, size_t n) {
  std::vector<int32_t> p = {1};
  for (size_t k = 1; k < n; ++k) p.push_back(static_cast<int32_t>(3 + (i * 131 + k * 17 + k * k) % 500));
  return p;
}

using test::Drain;
using test::Output;

Output RunOne(Engine& e, std::vector<int32_t> prompt, bool use_cache, int draft = 0) {
  EngineRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = 12;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  r.top_logprobs = 10;
  r.use_cache = use_cache;
  r.draft_tokens = draft;
  SubmitOutcome sub = e.Submit(std::move(r));
  PC_CHECK(sub.stream != nullptr);
  return Drain(*sub.stream);
}

void ExpectBitEqual(const Output& a, const Output& b, const std::string& what) {
  ASSERT_EQ(a.ids, b.ids) << what;
  for (size_t t = 0; t < a.tops.size(); ++t) {
    for (size_t j = 0; j < a.tops[t].size(); ++j) {
      EXPECT_EQ(a.tops[t][j].first, b.tops[t][j].first) << what;
      EXPECT_EQ(a.tops[t][j].second, b.tops[t][j].second) << what << " token " << t;
    }
  }
}

EngineOptions Options(KvDtype dtype) {
  EngineOptions o;
  o.cache.dtype = dtype;
  o.cache.mem_bytes = size_t{8} << 20;
  return o;
}

TEST(EngineKv8, AHitGivesTheColdRunsLogprobsBitForBit) {
  test::MadeModel m = MakeModel64();
  Engine e(*m.model, *m.tok, Options(KvDtype::kQ8_0));
  const std::vector<int32_t> p = Prompt(1, 150);
  const Output cold = RunOne(e, p, /*use_cache=*/false);
  const Output first = RunOne(e, p, true), hit = RunOne(e, p, true);
  EXPECT_GE(hit.num_cached, 144u);
  ExpectBitEqual(first, cold, "first");
  ExpectBitEqual(hit, cold, "full hit");
  // A partial hit: the prompt's blocks and 40 new tokens, against cold.
  std::vector<int32_t> longer = p;
  for (int i = 0; i < 40; ++i) longer.push_back(7 + i);
  const Output partial = RunOne(e, longer, true), partial_cold = RunOne(e, longer, false);
  EXPECT_GE(partial.num_cached, 144u);
  ExpectBitEqual(partial, partial_cold, "partial hit");
  ExpectBitEqual(RunOne(e, longer, true, /*draft=*/6), partial_cold, "drafts");
}

TEST(EngineKv8, ThePoolHoldsAlmostTwiceTheTokensAndQualityStaysNearF16) {
  test::MadeModel m = MakeModel64();
  Engine e8(*m.model, *m.tok, Options(KvDtype::kQ8_0));
  Engine e16(*m.model, *m.tok, Options(KvDtype::kF16));
  const EngineSnapshot s8 = e8.Snapshot(), s16 = e16.Snapshot();
  EXPECT_NEAR(static_cast<double>(s8.num_blocks) / static_cast<double>(s16.num_blocks), 64.0 / 34, 0.02);
  // Top-10 logprobs of the same greedy continuation under both types.
  double worst = 0;
  for (int i = 0; i < 3; ++i) {
    const Output a = RunOne(e8, Prompt(10 + i, 200), false), b = RunOne(e16, Prompt(10 + i, 200), false);
    for (size_t t = 0; t < a.tops.size() && a.ids[t] == b.ids[t]; ++t) {
      for (size_t j = 0; j < 10; ++j) {
        for (const auto& [id, lp] : b.tops[t]) {
          if (id == a.tops[t][j].first) worst = std::max(worst, std::fabs(static_cast<double>(lp - a.tops[t][j].second)));
        }
      }
    }
  }
  EXPECT_GT(worst, 0) << "the two types gave identical logprobs: the 8-bit path did not run";
  EXPECT_LT(worst, 0.05);
}

}  // namespace
}  // namespace pc
