// What `ignore_eos` means (llama.cpp's meaning, and the references'): an
// end-of-generation token is never chosen, so a request runs to max_tokens,
// while the reported logprobs keep the distribution that made it likely.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/engine.h"
#include "engine/stream_output.h"
#include "test_model.h"

namespace pc {
namespace {

TEST(EngineSampling, IgnoreEosNeverChoosesEndOfGenerationButReportsIt) {
  test::MadeModel m = test::MakeTestModel({"engine-sampling", 64, 2, 4, 2, 128, true, 512}, TensorType::kF32, 256);
  const std::vector<int32_t> eog = m.tok->vocab().end_of_generation;
  ASSERT_FALSE(eog.empty());
  Engine e(*m.model, *m.tok, EngineOptions{});
  for (float temperature : {0.0f, 1.0f}) {
    for (bool ignore : {false, true}) {
      EngineRequest r;
      r.prompt = {1, 20, 21, 22, 23};
      r.max_tokens = 12;
      r.sampling.temperature = temperature;
      r.sampling.seed = 5;
      r.ignore_eos = ignore;
      r.top_logprobs = 2;
      for (int32_t id : eog) r.adjust.bias.emplace_back(id, 40.0f);  // end-of-generation by far the likeliest
      const test::Output out = test::Drain(*e.Submit(std::move(r)).stream);
      if (!ignore) {  // the first token ends it (the end-of-generation token itself is not streamed)
        EXPECT_TRUE(out.ids.empty()) << "temperature " << temperature;
        EXPECT_EQ(out.finish, FinishReason::kStop);
        continue;
      }
      ASSERT_EQ(out.ids.size(), 12u) << "temperature " << temperature;
      EXPECT_EQ(out.finish, FinishReason::kLength);
      for (size_t t = 0; t < out.ids.size(); ++t) {
        EXPECT_EQ(std::find(eog.begin(), eog.end(), out.ids[t]), eog.end()) << "token " << t;
        ASSERT_FALSE(out.tops[t].empty());
        EXPECT_NE(std::find(eog.begin(), eog.end(), out.tops[t][0].first), eog.end()) << "token " << t;
        EXPECT_GT(out.tops[t][0].second, -1e-3f);  // the biased distribution, as computed
      }
    }
  }
}

}  // namespace
}  // namespace pc
