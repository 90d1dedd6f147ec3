// How a forward pass cuts the tiled attention of one layer into work items
// for the thread pool: pure arithmetic over row counts and head shapes, no
// K/V and no threads (tests/model/attn_plan_test.cc).
// Thread-safety: pure functions.
#pragma once
#include <cstddef>
#include <vector>

#include "kernels/attention.h"

namespace pc {

// Attention work: rows [r0, r1) of one sequence, K/V heads `heads` (every
// head when heads.end is 0), spans numbered from first_part in the split-KV
// parts; positions: 1 + the largest position of its rows (what it reads).
struct AttnItem {
  size_t r0 = 0, r1 = 0, num_spans = 1, first_part = 0;
  KvHeadRange heads;
  size_t positions = 0;
  bool operator==(const AttnItem& o) const {
    return r0 == o.r0 && r1 == o.r1 && num_spans == o.num_spans && first_part == o.first_part &&
           heads.begin == o.heads.begin && heads.end == o.heads.end && positions == o.positions;
  }
};

// What an item costs, in units of one lane group's pass over one tile of
// 16 positions: per K/V head of the item, its lane groups plus the
// widening of that head's K and V tile. The widening is priced by how the
// item reads K/V, not by its instruction count (which is a sixth of a
// group pass): an item of every head reads whole rows, one stream of
// contiguous memory (half a group pass a head); an item of some heads
// reads each row's slice of its heads, a strided stream that was the
// slowest part of a cache hit's attention (1.5 group passes a head). On
// the 2-core Zen 5 guest, `bench-model -t 2`, 8 rows at depth 448 ran
// 4-7% faster as two items of 4 rows and every head than as heads 1 and 2
// whole and head 0 in two 4-row pieces, 15 rows at depth 272 3-7%
// (docs/BENCHMARKS.md, twenty-sixth session).
double AttnItemCost(const AttnItem& it, const AttnHeads& h);

// The longest a thread works when `threads` threads claim `items` in order,
// each taking the next as it finishes one (ThreadPool::ParallelForEach).
double AttnMakespan(const std::vector<AttnItem>& items, const AttnHeads& h, size_t threads);

// Each item whose queries a head run on the lane kernels (kLanesMinQueries)
// and that holds every head cut into one item per K/V head; the others as
// they are.
std::vector<AttnItem> CutAttnItemsByHead(const std::vector<AttnItem>& items, const AttnHeads& h);

// Items of one span each, cut so `threads` threads finish together. Two
// starts are cut and compared: every item whose queries fill lane groups
// cut by K/V head (CutAttnItemsByHead: the heads spread over the threads,
// each reading its heads' slices), and the items as they are (each reading
// whole rows). From each start, the costliest item's rows are cut in two,
// again and again: at a multiple of the rows that fill whole lane groups,
// or in halves, each piece keeping at least kLanesMinQueries queries a
// head (the lane kernels take head ranges; fewer queries run every head a
// row at a time). Items whose queries fill no lane group stay whole. Of
// the plans met on the way (at most 4 * threads items; the cutting stops
// after as many cuts without gain as there are items, enough to cut every
// item of the costliest level), the one with the shortest longest thread
// by the cost model above; between the two starts' best the cheaper, at a
// tie the whole rows. Returned costliest first, so claiming them in order
// is longest-first scheduling. A head's or a row's results never depend on
// which item computes them (AttendSpan), so the cut changes no bits.
std::vector<AttnItem> BalanceAttnItems(const std::vector<AttnItem>& items, const AttnHeads& h, size_t threads);

// Split-KV: `units` are the spans of some items, one unit each (num_spans
// 1, first_part the span's part, positions those it reads in its span:
// AttnSpanPositions). Returned costliest first, the costliest units' rows
// cut in two (as BalanceAttnItems cuts, whole rows only) while that
// shortens the longest thread. A short chunk just past a span boundary is
// one full span and one short one: whole, one thread ran nearly all of it
// (`bench-model -t 2`, 22 rows at depth 512: 17.1 ms against 14.3 at depth
// 488). Cut only where the cost model gains: every span of 16 rows at
// depth 1072 cut in two ran 1.2x slower (docs/BENCHMARKS.md). Pieces keep
// their unit's first_part; each writes its rows' part of the span's state.
std::vector<AttnItem> BalanceSpanUnits(const std::vector<AttnItem>& units, const AttnHeads& h, size_t threads);

// Rows [r0, r1) of items[item]: where a split-KV pass merges each item's
// spans, its rows cut in `threads` pieces of nearly equal size (in item
// order, each item's rows in order). A query's merge reads only its own
// states, so any cut gives the same bits.
struct AttnMergePiece {
  size_t item = 0, r0 = 0, r1 = 0;
};
std::vector<AttnMergePiece> CutMergePieces(const std::vector<AttnItem>& items, size_t threads);

}  // namespace pc
