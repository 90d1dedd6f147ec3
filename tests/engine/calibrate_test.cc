// The calibration's timing rule: a median of passes, held to the time
// limit (what the step budget's starting prices rest on).
#include "engine/calibrate.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "test_model.h"

namespace pc {
namespace {

// A pass that returns the next of `times` and counts its calls.
struct Passes {
  std::vector<double> times;
  size_t calls = 0;
  double operator()() { return times[calls++ % times.size()]; }
};

TEST(CalibrateMedian, TakesTheMedianOfItsRounds) {
  Passes p{{5.0, 1.0, 3.0}};
  EXPECT_DOUBLE_EQ(MedianPassMs(std::ref(p), 3, [] { return false; }), 3.0);  // not the first, not the least
  EXPECT_EQ(p.calls, 3u);
  Passes even{{8.0, 2.0, 4.0, 6.0}};
  EXPECT_DOUBLE_EQ(MedianPassMs(std::ref(even), 4, [] { return false; }), 5.0);
}

TEST(CalibrateMedian, OnePassOnceOutOfTime) {
  Passes p{{5.0, 1.0, 3.0}};
  EXPECT_DOUBLE_EQ(MedianPassMs(std::ref(p), 3, [] { return true; }), 5.0);
  EXPECT_EQ(p.calls, 1u);
  // Time running out after the second pass: the two taken.
  Passes q{{5.0, 1.0, 3.0}};
  EXPECT_DOUBLE_EQ(MedianPassMs(std::ref(q), 3, [&q] { return q.calls >= 2; }), 3.0);
  EXPECT_EQ(q.calls, 2u);
  Passes r{{7.0}};
  EXPECT_DOUBLE_EQ(MedianPassMs(std::ref(r), 0, [] { return false; }), 7.0);  // at least one
  EXPECT_EQ(r.calls, 1u);
}

// Warming the nested pass's buffers (a layer of a pass inside another's
// keep_going, dropped there) leaves what the model computes as it was: a
// pass before and after it, and a pass paused for another inside it, give
// the same bits.
TEST(WarmNestedPass, LeavesTheModelsResultsAsTheyWere) {
  test::MadeModel l = test::MakeTestModel({"warm-nested", 128, 3, 4, 2, 256, true, 2048}, TensorType::kQ8_0, 512);
  Model& m = *l.model;
  const ModelConfig& c = m.config();
  CacheOptions opt;
  KvStore kv(static_cast<size_t>(c.n_layer), static_cast<size_t>(c.kv_dim()), opt.block_size, 8, opt.dtype);
  std::vector<int32_t> table(kv.num_blocks());
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  auto pass = [&](size_t first, size_t n) {
    std::vector<BatchToken> b;
    for (size_t i = first; i < first + n; ++i) b.push_back({static_cast<int32_t>(5 + i * 7 % 400), static_cast<int32_t>(i), table, true});
    return b;
  };
  std::vector<float> before, after, paused, inside;
  m.Forward(pass(0, 20), kv, &before);
  WarmNestedPass(m, opt, 64);
  m.Forward(pass(0, 20), kv, &after);
  ASSERT_EQ(before.size(), after.size());
  EXPECT_EQ(0, std::memcmp(before.data(), after.data(), before.size() * sizeof(float)));
  bool ran = false;
  EXPECT_TRUE(m.Forward(pass(0, 20), kv, &paused, [&] {
    if (!ran) m.Forward(pass(20, 30), kv, &inside);
    ran = true;
    return true;
  }));
  ASSERT_EQ(before.size(), paused.size());
  EXPECT_EQ(0, std::memcmp(before.data(), paused.data(), before.size() * sizeof(float)));
  EXPECT_EQ(inside.size(), 30 * static_cast<size_t>(c.n_vocab));
}

}  // namespace
}  // namespace pc
