// LogitsMemo: rows kept bit for bit under their keys, the least recently
// used one's slot given to a new key past the budget, none without one.
#include "kvcache/logits_memo.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace pc {
namespace {

constexpr size_t kRow = 1000;

std::vector<float> RowOf(int seed) {
  std::vector<float> r(kRow);
  for (size_t i = 0; i < kRow; ++i) r[i] = static_cast<float>(seed) * 1000.0f + static_cast<float>(i) * 0.37f - 11.0f;
  r[7] = -INFINITY;  // masked logits survive too
  return r;
}

Hash128 Key(int i) { return Hash128{static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull, static_cast<uint64_t>(i) + 1}; }

bool Holds(LogitsMemo& m, int i) {
  std::vector<float> got;
  if (!m.Get(Key(i), &got)) return false;
  const std::vector<float> want = RowOf(i);
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), kRow * sizeof(float))) << "row " << i;
  return true;
}

TEST(LogitsMemo, KeepsRowsExactlyAndDropsTheLeastRecentlyUsed) {
  LogitsMemo m(3 * kRow * sizeof(float) + 5, kRow);  // three rows
  EXPECT_EQ(m.capacity(), 3u);
  for (int i : {1, 2, 3}) m.Put(Key(i), RowOf(i));
  EXPECT_EQ(m.size(), 3u);
  EXPECT_TRUE(Holds(m, 1));  // now the most recent: 2 is the oldest
  m.Put(Key(4), RowOf(4));
  EXPECT_EQ(m.size(), 3u);
  EXPECT_FALSE(Holds(m, 2));
  for (int i : {1, 3, 4}) EXPECT_TRUE(Holds(m, i));
  // Many more keys through the three slots: only the last three stay, each
  // with its own row (a slot handed over is rewritten whole).
  for (int i = 5; i < 40; ++i) m.Put(Key(i), RowOf(i));
  for (int i = 1; i < 37; ++i) EXPECT_FALSE(Holds(m, i)) << i;
  for (int i : {37, 38, 39}) EXPECT_TRUE(Holds(m, i));
  EXPECT_EQ(m.bytes(), 3 * kRow * sizeof(float));
}

TEST(LogitsMemo, ThePromptAgainReplacesItsRow) {
  LogitsMemo m(2 * kRow * sizeof(float), kRow);
  m.Put(Key(1), RowOf(9));
  m.Put(Key(2), RowOf(2));
  m.Put(Key(1), RowOf(1));
  EXPECT_EQ(m.size(), 2u);
  EXPECT_TRUE(Holds(m, 1));
  EXPECT_TRUE(Holds(m, 2));
}

TEST(LogitsMemo, MissLeavesTheOutputAlone) {
  LogitsMemo m(kRow * sizeof(float), kRow);
  std::vector<float> out = {1.0f, 2.0f};
  EXPECT_FALSE(m.Get(Key(5), &out));
  EXPECT_EQ(out, (std::vector<float>{1.0f, 2.0f}));
}

TEST(LogitsMemo, NoBudgetKeepsNothingAndASmallOneKeepsOneRow) {
  LogitsMemo none(0, kRow);
  none.Put(Key(1), RowOf(1));
  EXPECT_EQ(none.capacity(), 0u);
  EXPECT_FALSE(Holds(none, 1));
  LogitsMemo one(10, kRow);  // less than a row: still one
  EXPECT_EQ(one.capacity(), 1u);
  one.Put(Key(1), RowOf(1));
  one.Put(Key(2), RowOf(2));
  EXPECT_FALSE(Holds(one, 1));
  EXPECT_TRUE(Holds(one, 2));
}

}  // namespace
}  // namespace pc
