// The step loop's idle spin (EngineOptions::idle_spin_ms): with nothing to
// run it keeps itself and the pool awake for a while; a request arriving
// meanwhile is served as it would be otherwise, the spin ends at it, and an
// engine destroyed mid-spin stops at once and lets the model's workers sleep.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "engine/stream_output.h"
#include "model/make_model.h"
#include "test_model.h"

namespace pc {
namespace {

using test::Drain;
using test::Output;

double Metric(Engine& e, const std::string& name) {
  const std::string text = e.RenderMetrics();
  const size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
}

// Waits up to a minute for a metric to reach at least `want`.
bool Becomes(Engine& e, const std::string& name, double want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (Metric(e, name) < want) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(EngineIdle, ARequestArrivingDuringTheIdleSpinIsServedAsWithout) {
  test::MadeModel l = test::MakeTestModel({"engine-idle", 64, 2, 4, 2, 128, true, 512}, TensorType::kQ8_0, 512);
  const std::vector<int32_t> first = test::Prompt(1, 40), second = test::Prompt(2, 30);
  Output want_first, want_second;
  {
    Engine e(*l.model, *l.tok, EngineOptions{});
    want_first = Drain(*e.Submit(test::Greedy(first, 5, 3)).stream);
    want_second = Drain(*e.Submit(test::Greedy(second, 5, 3)).stream);
    EXPECT_EQ(Metric(e, "promptcache_idle_spin_seconds_total"), 0);  // off by default
  }
  EngineOptions eo;
  eo.idle_spin_ms = 60'000;  // a minute: every gap below is inside one spin
  const auto t0 = std::chrono::steady_clock::now();
  {
    Engine e(*l.model, *l.tok, eo);
    // (The loop may already have spun once, at start, until this arrival.)
    const Output got_first = Drain(*e.Submit(test::Greedy(first, 5, 3)).stream);
    // Once the loop spins again, the next arrival ends the spin and is served.
    ASSERT_TRUE(Becomes(e, "promptcache_idle_spinning", 1));
    const double spins = Metric(e, "promptcache_idle_spins_total");
    const double spun = Metric(e, "promptcache_idle_spin_seconds_total");  // counted when a spin ends
    const Output got_second = Drain(*e.Submit(test::Greedy(second, 5, 3)).stream);
    EXPECT_EQ(got_first.ids, want_first.ids);
    EXPECT_EQ(got_first.tops, want_first.tops);
    EXPECT_EQ(got_second.ids, want_second.ids);
    EXPECT_EQ(got_second.tops, want_second.tops);
    EXPECT_GT(Metric(e, "promptcache_idle_spin_seconds_total"), spun);  // that spin, ended by the arrival
    ASSERT_TRUE(Becomes(e, "promptcache_idle_spins_total", spins + 1));  // and spins again
  }  // destroyed while spinning again
  // Not a speed bound: the spin would have held the destructor for a minute.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(50));
  // Nor do the model's workers spin on for a minute: they sleep again.
  const ThreadPool& pool = l.model->pool();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (pool.num_sleeping() != pool.num_threads() - 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(pool.num_sleeping(), pool.num_threads() - 1);
}

}  // namespace
}  // namespace pc
