// A cache hit ahead of the step in progress (engine.h, StepInFlight): a
// mostly cached prompt that arrives during a long prefill step without
// decodes has the step paused between two layers, gets its first token in a
// step of its own run there, and neither its output nor the paused
// prompt's changes.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "base/check.h"
#include "engine/engine.h"
#include "engine/stream_output.h"
#include "model/make_model.h"
#include "test_model.h"

namespace pc {
namespace {

using test::Drain;
using test::Output;

EngineRequest Greedy(std::vector<int32_t> prompt, int n) { return test::Greedy(std::move(prompt), n, 3); }

// The value of an unlabelled metric (-1 when absent).
double Metric(Engine& e, const std::string& name) {
  const std::string text = e.RenderMetrics();
  const size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
}

TEST(EngineDrop, AHitArrivingDuringALongPrefillStepGoesFirst) {
  // Enough layers and width that a 2,000-token step takes a while anywhere.
  test::MadeModel l = test::MakeTestModel({"engine-drop", 256, 6, 8, 4, 512, true, 4096}, TensorType::kQ8_0, 512);
  const std::vector<int32_t> cached = test::Prompt(1, 200), miss = test::Prompt(2, 2000);
  std::vector<int32_t> hit = cached;
  for (int32_t t : test::Prompt(3, 17)) hit.push_back(t);  // 192 tokens cached in whole blocks, 25 to compute
  EngineOptions eo;
  eo.max_batch_tokens = 2048;  // the miss alone: one step of all its tokens
  eo.max_step_ms = 25;
  eo.prefill_profile = {{0, 0.05}, {2000, 0.08}};  // priced from the start (ms per token)
  Output want_cached, want_hit, want_miss;
  {
    EngineOptions plain = eo;
    plain.drop_steps_for_hits = false;
    Engine e(*l.model, *l.tok, plain);
    want_cached = Drain(*e.Submit(Greedy(cached, 4)).stream);
    want_hit = Drain(*e.Submit(Greedy(hit, 4)).stream);
    want_miss = Drain(*e.Submit(Greedy(miss, 4)).stream);
    EXPECT_GE(want_hit.num_cached, 192u);
    EXPECT_EQ(Metric(e, "promptcache_steps_dropped_total"), 0);
    EXPECT_EQ(Metric(e, "promptcache_steps_paused_total"), 0);
  }
  Engine e(*l.model, *l.tok, eo);
  EXPECT_EQ(Drain(*e.Submit(Greedy(cached, 4)).stream).ids, want_cached.ids);
  const double before = Metric(e, "promptcache_step_predicted_ms");
  std::shared_ptr<RequestStream> miss_stream = e.Submit(Greedy(miss, 4)).stream;
  // The miss's step is planned (its prediction published) just before its
  // forward pass starts; the hit comes right after.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (Metric(e, "promptcache_step_predicted_ms") == before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::shared_ptr<RequestStream> hit_stream = e.Submit(Greedy(hit, 4)).stream;
  const std::optional<StreamEvent> first = hit_stream->Next(60000);
  ASSERT_TRUE(first.has_value() && !first->done);
  // The hit had its first token while the miss had none yet: the miss's
  // step was paused for the hit's and went on after it, nothing dropped.
  EXPECT_FALSE(miss_stream->Next(0).has_value());
  Output got_hit = Drain(*hit_stream);
  got_hit.ids.insert(got_hit.ids.begin(), first->token);
  got_hit.tops.insert(got_hit.tops.begin(), first->top);
  const Output got_miss = Drain(*miss_stream);
  EXPECT_EQ(Metric(e, "promptcache_steps_paused_total"), 1);
  EXPECT_EQ(Metric(e, "promptcache_steps_dropped_total"), 0);
  EXPECT_EQ(Metric(e, "promptcache_dropped_step_seconds_total"), 0);
  EXPECT_EQ(got_hit.num_cached, want_hit.num_cached);
  EXPECT_EQ(got_hit.ids, want_hit.ids);
  EXPECT_EQ(got_hit.tops, want_hit.tops);
  EXPECT_EQ(got_miss.ids, want_miss.ids);
  EXPECT_EQ(got_miss.tops, want_miss.tops);
}

}  // namespace
}  // namespace pc
