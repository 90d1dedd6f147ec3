#include "model/attn_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

namespace pc {
namespace {

// The items for one sequence's rows [0, rows) at positions depth ..
// depth + rows - 1: one item, every head.
std::vector<AttnItem> OneItem(size_t rows, size_t depth) { return {{0, rows, 1, 0, {}, depth + rows}}; }

// Cut by K/V head alone (what the forward pass did before the row cuts).
std::vector<AttnItem> ByHeads(const std::vector<AttnItem>& items, const AttnHeads& h) {
  return CutAttnItemsByHead(items, h);
}

// Every (row, K/V head) of the input in exactly one item; head ranges of
// items with fewer queries a head than the lane kernels take stay whole.
void ExpectCovers(const std::vector<AttnItem>& in, const std::vector<AttnItem>& out, const AttnHeads& h) {
  std::map<std::pair<size_t, size_t>, int> seen;
  for (const AttnItem& it : out) {
    ASSERT_LT(it.r0, it.r1);
    ASSERT_LT(it.heads.begin, it.heads.End(h));
    if (it.heads.end != 0) {
      EXPECT_GE((it.r1 - it.r0) * h.group(), kLanesMinQueries) << it.r0 << ".." << it.r1;
    }
    for (size_t r = it.r0; r < it.r1; ++r) {
      for (size_t g = it.heads.begin; g < it.heads.End(h); ++g) ++seen[{r, g}];
    }
  }
  size_t want = 0;
  for (const AttnItem& it : in) {
    for (size_t r = it.r0; r < it.r1; ++r) {
      for (size_t g = 0; g < h.n_kv_head; ++g) {
        EXPECT_EQ(seen[std::make_pair(r, g)], 1) << "row " << r << " head " << g;
        ++want;
      }
    }
  }
  EXPECT_EQ(seen.size(), want);
}

TEST(AttnPlan, CoversEveryRowAndHeadOnce) {
  for (const AttnHeads h : {AttnHeads{9, 3, 64}, AttnHeads{4, 2, 32}, AttnHeads{32, 8, 128}, AttnHeads{8, 8, 64},
                            AttnHeads{14, 2, 64}, AttnHeads{64, 8, 64}}) {
    for (size_t threads : {1, 2, 3, 4, 8}) {
      for (size_t rows = 1; rows <= 32; ++rows) {
        for (size_t depth : {0, 80, 448}) {
          SCOPED_TRACE(testing::Message() << h.n_head << "/" << h.n_kv_head << " heads, " << threads << " threads, "
                                          << rows << " rows at " << depth);
          const std::vector<AttnItem> in = OneItem(rows, depth);
          const std::vector<AttnItem> out = BalanceAttnItems(in, h, threads);
          ExpectCovers(in, out, h);
          // Never a longer longest thread than the cut by heads alone.
          EXPECT_LE(AttnMakespan(out, h, threads), AttnMakespan(ByHeads(in, h), h, threads) * (1 + 1e-9));
          for (size_t i = 1; i < out.size(); ++i) EXPECT_GE(AttnItemCost(out[i - 1], h), AttnItemCost(out[i], h));
        }
      }
    }
  }
}

TEST(AttnPlan, SeveralSequences) {
  const AttnHeads h{9, 3, 64};
  // Three sequences: a 6-token hit at depth 80, a decode at 300, 20 rows at 200.
  const std::vector<AttnItem> in = {{0, 6, 1, 0, {}, 86}, {6, 7, 1, 1, {}, 301}, {7, 27, 1, 2, {}, 220}};
  const std::vector<AttnItem> out = BalanceAttnItems(in, h, 2);
  ExpectCovers(in, out, h);
  EXPECT_LE(out.size(), 4u * 2 + in.size() * h.n_kv_head);
}

// bench-135m's heads (9 over 3 K/V heads) on two threads: a cache hit's 8
// new rows at depth 448 cut by head alone leave one thread two heads and
// the other one. Two items of 4 rows and every head (12 queries a head:
// one lane group each) even them and read whole K/V rows; cutting a head's
// rows in two instead (heads 1 and 2 whole, head 0 as 4 + 4 rows) evens
// them too, but reads head slices, priced higher.
TEST(AttnPlan, EvensThreeHeadsOnTwoThreads) {
  const AttnHeads h{9, 3, 64};
  const std::vector<AttnItem> in = OneItem(8, 448);
  const std::vector<AttnItem> heads = ByHeads(in, h), out = BalanceAttnItems(in, h, 2);
  ASSERT_EQ(heads.size(), 3u);
  ASSERT_EQ(out.size(), 2u);
  for (const AttnItem& it : out) {
    EXPECT_EQ(it.heads.End(h) - it.heads.begin, h.n_kv_head);
    EXPECT_EQ(it.r1 - it.r0, 4u);
  }
  const double before = AttnMakespan(heads, h, 2), after = AttnMakespan(out, h, 2);
  EXPECT_LT(after, 0.8 * before) << before << " -> " << after;
  // The head cut the plan used before: dearer by the model.
  AttnItem a = heads[0], b = heads[0];
  a.r1 = b.r0 = 4;
  const std::vector<AttnItem> head_cut = {heads[1], heads[2], a, b};
  EXPECT_LT(after, AttnMakespan(head_cut, h, 2));
  // The lane groups in all do not grow: one a head in each item.
  size_t groups = 0;
  for (const AttnItem& it : out) groups += (it.heads.End(h) - it.heads.begin) * ((it.r1 - it.r0) * h.group() > kLaneTile ? 2 : 1);
  EXPECT_EQ(groups, 6u);
}

// A head's slice of each row costs more to widen than its share of whole
// rows: an item of every head is cheaper than its heads as items of their own.
TEST(AttnPlan, WholeRowsWidenCheaperThanHeadSlices) {
  for (const AttnHeads h : {AttnHeads{9, 3, 64}, AttnHeads{32, 8, 128}, AttnHeads{14, 2, 64}}) {
    for (size_t rows : {4, 8, 16, 32}) {
      const std::vector<AttnItem> in = OneItem(rows, 448);
      double sum = 0;
      for (const AttnItem& it : ByHeads(in, h)) sum += AttnItemCost(it, h);
      if (ByHeads(in, h).size() == 1) continue;  // too few queries to cut by head
      EXPECT_LT(AttnItemCost(in[0], h), sum) << h.n_head << "/" << h.n_kv_head << " heads, " << rows << " rows";
    }
  }
}

// 15 rows at depth 272 (a hit of the Mooncake replay) on two threads: two
// items of every head, 7 and 8 rows (two lane groups a head each).
TEST(AttnPlan, FifteenRowsAsTwoItemsOfWholeRows) {
  const AttnHeads h{9, 3, 64};
  const std::vector<AttnItem> out = BalanceAttnItems(OneItem(15, 272), h, 2);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].heads.End(h) - out[0].heads.begin, h.n_kv_head);
  EXPECT_EQ(out[1].heads.End(h) - out[1].heads.begin, h.n_kv_head);
  EXPECT_EQ((out[0].r1 - out[0].r0) + (out[1].r1 - out[1].r0), 15u);
  EXPECT_DOUBLE_EQ(AttnItemCost(out[0], h), AttnItemCost(out[1], h));
}

// On eight threads whole-row pieces run out (8 rows give two of 4 rows at
// most): the same rows gain more once every head is cut in two rows (one
// cut head leaves the two others as long as before): all three are.
TEST(AttnPlan, CutsAcrossAPlateau) {
  const AttnHeads h{9, 3, 64};
  const std::vector<AttnItem> in = OneItem(8, 448);
  const std::vector<AttnItem> out = BalanceAttnItems(in, h, 8);
  EXPECT_EQ(out.size(), 6u);
  for (const AttnItem& it : out) EXPECT_EQ(it.heads.End(h) - it.heads.begin, 1u);
  EXPECT_LT(AttnMakespan(out, h, 8), 0.75 * AttnMakespan(ByHeads(in, h), h, 8));
}

// A lone decode row with 3 queries a head stays one item over every head
// (it runs one row at a time, attend_cols); with 8 queries a head (gpt-oss:
// 64 over 8) it is cut by head.
TEST(AttnPlan, DecodeRows) {
  const std::vector<AttnItem> small = BalanceAttnItems(OneItem(1, 448), {9, 3, 64}, 2);
  ASSERT_EQ(small.size(), 1u);
  EXPECT_EQ(small[0].heads.end, 0u);
  const std::vector<AttnItem> wide = BalanceAttnItems(OneItem(1, 448), {64, 8, 64}, 2);
  EXPECT_EQ(wide.size(), 8u);
}

// One thread: nothing to even; the item stays whole (every head, whole rows).
TEST(AttnPlan, OneThreadNoCuts) {
  const AttnHeads h{9, 3, 64};
  for (size_t rows : {8, 25, 32}) {
    const std::vector<AttnItem> out = BalanceAttnItems(OneItem(rows, 448), h, 1);
    ASSERT_EQ(out.size(), 1u) << rows;
    EXPECT_EQ(out[0].heads.end, 0u);
  }
}

// Split-KV units of one item of `rows` rows at positions depth .. depth +
// rows - 1: one unit a span, priced by the positions it reads there.
std::vector<AttnItem> SpanUnits(size_t rows, size_t depth) {
  std::vector<AttnItem> units;
  const size_t end = depth + rows;
  for (size_t sp = 0; sp * kAttnSpan < end; ++sp) {
    units.push_back({0, rows, 1, sp, {}, std::min(end, (sp + 1) * kAttnSpan) - sp * kAttnSpan});
  }
  return units;
}

// Every row of every unit (span) in exactly one piece, each piece whole in
// heads and keeping its unit's span and pricing.
void ExpectCoversUnits(const std::vector<AttnItem>& units, const std::vector<AttnItem>& out) {
  std::map<std::pair<size_t, size_t>, int> seen;  // (span, row)
  for (const AttnItem& it : out) {
    ASSERT_LT(it.r0, it.r1);
    EXPECT_EQ(it.heads.end, 0u);
    EXPECT_EQ(it.num_spans, 1u);
    ASSERT_LT(it.first_part, units.size());
    EXPECT_EQ(it.positions, units[it.first_part].positions);
    for (size_t r = it.r0; r < it.r1; ++r) ++seen[{it.first_part, r}];
  }
  size_t want = 0;
  for (const AttnItem& u : units) {
    for (size_t r = u.r0; r < u.r1; ++r, ++want) EXPECT_EQ((seen[std::make_pair(u.first_part, r)]), 1) << u.first_part << " " << r;
  }
  EXPECT_EQ(seen.size(), want);
}

// A short chunk just past a span boundary (22 rows at depth 512: a full
// span and 22 positions) has its full span cut so two threads share it;
// 16 rows at depth 1072 (two full spans and one of 64) stay whole, as any
// cut widens more lane groups than it evens out (measured 1.2x slower);
// one thread cuts nothing; decode rows are never cut. Costliest first.
TEST(AttnPlan, SpanUnitsCutOnlyWhereTheThreadsEvenOut) {
  const AttnHeads h{9, 3, 64};
  const std::vector<AttnItem> boundary = SpanUnits(22, 512);
  ASSERT_EQ(boundary.size(), 2u);
  const std::vector<AttnItem> cut = BalanceSpanUnits(boundary, h, 2);
  ExpectCoversUnits(boundary, cut);
  EXPECT_GT(cut.size(), boundary.size());
  EXPECT_LT(AttnMakespan(cut, h, 2), 0.7 * AttnMakespan(boundary, h, 2));
  for (size_t i = 1; i < cut.size(); ++i) EXPECT_GE(AttnItemCost(cut[i - 1], h), AttnItemCost(cut[i], h)) << i;
  const std::vector<AttnItem> deep = SpanUnits(16, 1072);
  ASSERT_EQ(deep.size(), 3u);
  const std::vector<AttnItem> kept = BalanceSpanUnits(deep, h, 2);
  ExpectCoversUnits(deep, kept);
  EXPECT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept.back().first_part, 2u);  // the short span last
  EXPECT_EQ(BalanceSpanUnits(boundary, h, 1).size(), boundary.size());
  const std::vector<AttnItem> decode = SpanUnits(1, 2000);
  EXPECT_EQ(BalanceSpanUnits(decode, h, 2).size(), decode.size());
}

// The split-KV merges: every row of every item in exactly one piece, in
// order; each item in at most `threads` pieces whose sizes differ by at
// most one cut (a hit's 16 rows over 2 threads: 8 and 8; 25 over 3: 9, 9, 7).
TEST(AttnPlan, MergePiecesCoverEachItemsRowsOnce) {
  const std::vector<AttnItem> items = {{0, 16, 3, 0, {}, 1088}, {16, 41, 2, 3, {}, 900}, {41, 42, 4, 5, {}, 2000}};
  for (size_t threads : {1, 2, 3, 8}) {
    const std::vector<AttnMergePiece> pieces = CutMergePieces(items, threads);
    std::map<size_t, size_t> per_item;
    size_t next_item = 0, next_row = 0;
    for (const AttnMergePiece& p : pieces) {
      ASSERT_LT(p.item, items.size());
      if (p.item != next_item) {
        EXPECT_EQ(next_row, items[next_item].r1) << threads;  // the previous item ended whole
        EXPECT_EQ(p.item, next_item + 1) << threads;
        next_item = p.item;
        next_row = items[p.item].r0;
      }
      EXPECT_EQ(p.r0, next_row) << threads;
      EXPECT_LT(p.r0, p.r1) << threads;
      next_row = p.r1;
      ++per_item[p.item];
    }
    EXPECT_EQ(next_item, items.size() - 1);
    EXPECT_EQ(next_row, items.back().r1);
    for (const auto& [item, n] : per_item) EXPECT_LE(n, std::max<size_t>(threads, 1)) << item;
  }
  const std::vector<AttnMergePiece> two = CutMergePieces({items[0]}, 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].r1 - two[0].r0, 8u);
  EXPECT_EQ(two[1].r1 - two[1].r0, 8u);
  const std::vector<AttnMergePiece> three = CutMergePieces({items[1]}, 3);
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(three[0].r1 - three[0].r0, 9u);
  EXPECT_EQ(three[2].r1 - three[2].r0, 7u);
  EXPECT_TRUE(CutMergePieces({}, 2).empty());
}

}  // namespace
}  // namespace pc
