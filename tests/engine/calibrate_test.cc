// The calibration's timing rule: a median of passes, held to the time
// limit (what the step budget's starting prices rest on).
#include "engine/calibrate.h"

#include <gtest/gtest.h>

#include <vector>

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

}  // namespace
}  // namespace pc
