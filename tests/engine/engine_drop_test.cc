// A cache hit ahead of the step in progress (engine.h, StepInFlight): a
// mostly cached prompt that arrives during a long prefill step, with or
// without a decode in it, has the step paused between two layers, gets its
// first token in a step of its own run there, and neither its output nor
// the paused requests' changes.
#include <gtest/gtest.h>

#include <algorithm>
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

// The rest of a stream whose first event was `first`, with it.
Output DrainAfter(const StreamEvent& first, RequestStream& stream) {
  Output o = Drain(stream);
  o.ids.insert(o.ids.begin(), first.token);
  o.tops.insert(o.tops.begin(), first.top);
  return o;
}

void ExpectSameOutput(const Output& got, const Output& want) {
  EXPECT_EQ(got.ids, want.ids);
  EXPECT_EQ(got.tops, want.tops);
}

// What both tests share: a 200-token prompt to cache, a hit on its 192
// whole-block tokens with 25 more to compute, a 2,000-token miss, a short
// prompt to decode from, and a model with enough layers and width that a
// 2,000-token step takes a while anywhere.
struct DropCase {
  test::MadeModel l = test::MakeTestModel({"engine-drop", 256, 6, 8, 4, 512, true, 4096}, TensorType::kQ8_0, 512);
  std::vector<int32_t> cached = test::Prompt(1, 200), miss = test::Prompt(2, 2000), talk = test::Prompt(4, 20), hit;
  EngineOptions eo;
  explicit DropCase(double max_step_ms) {
    hit = cached;
    for (int32_t t : test::Prompt(3, 17)) hit.push_back(t);
    eo.max_batch_tokens = 2048;
    eo.max_step_ms = max_step_ms;
    eo.prefill_profile = {{0, 0.05}, {2000, 0.08}};  // priced from the start (ms per token)
  }
};

// Each request's output alone, on an engine that never pauses or drops.
struct Wanted {
  Output cached, hit, miss, talk;
};
Wanted Alone(DropCase& c, int talk_tokens) {
  EngineOptions plain = c.eo;
  plain.drop_steps_for_hits = false;
  Engine e(*c.l.model, *c.l.tok, plain);
  Wanted w;
  w.cached = Drain(*e.Submit(Greedy(c.cached, 4)).stream);
  w.hit = Drain(*e.Submit(Greedy(c.hit, 4)).stream);
  w.miss = Drain(*e.Submit(Greedy(c.miss, 4)).stream);
  if (talk_tokens > 0) w.talk = Drain(*e.Submit(Greedy(c.talk, talk_tokens)).stream);
  EXPECT_GE(w.hit.num_cached, 192u);
  EXPECT_EQ(Metric(e, "promptcache_steps_dropped_total"), 0);
  EXPECT_EQ(Metric(e, "promptcache_steps_paused_total"), 0);
  return w;
}

TEST(EngineDrop, AHitArrivingDuringALongPrefillStepGoesFirst) {
  DropCase c(25);  // with max_batch_tokens 2,048, the miss alone: one step of all its tokens
  const Wanted want = Alone(c, 0);
  Engine e(*c.l.model, *c.l.tok, c.eo);
  EXPECT_EQ(Drain(*e.Submit(Greedy(c.cached, 4)).stream).ids, want.cached.ids);
  const double before = Metric(e, "promptcache_step_predicted_ms");
  std::shared_ptr<RequestStream> miss_stream = e.Submit(Greedy(c.miss, 4)).stream;
  // The miss's step is planned (its prediction published) just before its
  // forward pass starts; the hit comes right after.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (Metric(e, "promptcache_step_predicted_ms") == before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::shared_ptr<RequestStream> hit_stream = e.Submit(Greedy(c.hit, 4)).stream;
  const std::optional<StreamEvent> first = hit_stream->Next(60000);
  ASSERT_TRUE(first.has_value() && !first->done);
  // The hit had its first token while the miss had none yet: the miss's
  // step was paused for the hit's and went on after it, nothing dropped.
  EXPECT_FALSE(miss_stream->Next(0).has_value());
  const Output got_hit = DrainAfter(*first, *hit_stream);
  EXPECT_EQ(Metric(e, "promptcache_steps_paused_total"), 1);
  EXPECT_EQ(Metric(e, "promptcache_steps_dropped_total"), 0);
  EXPECT_EQ(Metric(e, "promptcache_dropped_step_seconds_total"), 0);
  EXPECT_EQ(got_hit.num_cached, want.hit.num_cached);
  ExpectSameOutput(got_hit, want.hit);
  ExpectSameOutput(Drain(*miss_stream), want.miss);
}

TEST(EngineDrop, AHitArrivingDuringALongStepWithADecodeGoesFirst) {
  DropCase c(2000);  // the decode and all of the miss in one step
  const Wanted want = Alone(c, 400);
  Engine e(*c.l.model, *c.l.tok, c.eo);
  EXPECT_EQ(Drain(*e.Submit(Greedy(c.cached, 4)).stream).ids, want.cached.ids);
  std::shared_ptr<RequestStream> talk_stream = e.Submit(Greedy(c.talk, 400)).stream;
  const std::optional<StreamEvent> talk_first = talk_stream->Next(60000);  // decoding from here on
  ASSERT_TRUE(talk_first.has_value() && !talk_first->done);
  // The step that takes the miss's 2,000 tokens is priced far above the
  // decode steps before it, whatever the build's speed (under sanitizers,
  // two tests at a time, decode steps were priced 9-15 ms).
  double decode_ms = 0;
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
       std::chrono::steady_clock::now() < until;) {
    decode_ms = std::max(decode_ms, Metric(e, "promptcache_step_predicted_ms"));
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::shared_ptr<RequestStream> miss_stream = e.Submit(Greedy(c.miss, 4)).stream;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (Metric(e, "promptcache_step_predicted_ms") < std::max(10.0, 4 * decode_ms) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::shared_ptr<RequestStream> hit_stream = e.Submit(Greedy(c.hit, 4)).stream;
  const std::optional<StreamEvent> first = hit_stream->Next(60000);
  ASSERT_TRUE(first.has_value() && !first->done);
  EXPECT_FALSE(miss_stream->Next(0).has_value());  // its step was paused, not ended
  ExpectSameOutput(DrainAfter(*first, *hit_stream), want.hit);
  ExpectSameOutput(Drain(*miss_stream), want.miss);
  ExpectSameOutput(DrainAfter(*talk_first, *talk_stream), want.talk);  // its decode waited, unchanged
  EXPECT_EQ(Metric(e, "promptcache_steps_paused_total"), 1);
  EXPECT_EQ(Metric(e, "promptcache_steps_dropped_total"), 0);
}

}  // namespace
}  // namespace pc
