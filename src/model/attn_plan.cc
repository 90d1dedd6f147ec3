#include "model/attn_plan.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

namespace pc {
namespace {

// A head's K and V tile widened, in lane-group tile passes (attn_plan.h):
// read as whole rows (an item of every head) or as one head's slice of each
// row (an item of some heads).
constexpr double kWidenWholeRows = 0.5;
constexpr double kWidenHeadSlice = 1.5;

size_t Groups(size_t rows, const AttnHeads& h) { return (rows * h.group() + kLaneTile - 1) / kLaneTile; }
size_t Heads(const AttnItem& it, const AttnHeads& h) { return it.heads.End(h) - it.heads.begin; }
bool WholeRows(const AttnItem& it, const AttnHeads& h) { return Heads(it, h) == h.n_kv_head; }
// The fewest rows whose queries of one head still run on the lane kernels.
size_t MinPieceRows(const AttnHeads& h) { return (kLanesMinQueries + h.group() - 1) / h.group(); }

void SortByCost(std::vector<AttnItem>* items, const AttnHeads& h) {
  std::stable_sort(items->begin(), items->end(), [&](const AttnItem& a, const AttnItem& b) {
    return AttnItemCost(a, h) > AttnItemCost(b, h);
  });
}

// Inserts x after every item that costs at least as much (the order stays
// costliest first, ties in insertion order).
void InsertByCost(std::vector<AttnItem>* items, const AttnItem& x, const AttnHeads& h) {
  const double c = AttnItemCost(x, h);
  auto at = std::find_if(items->begin(), items->end(), [&](const AttnItem& y) { return AttnItemCost(y, h) < c; });
  items->insert(at, x);
}

// Whether item `it` may be cut in rows: rows for two pieces of MinPieceRows
// (each piece's queries still run on the lane kernels).
bool Cuttable(const AttnItem& it, const AttnHeads& h) { return it.r1 - it.r0 >= 2 * MinPieceRows(h); }

// Its two pieces: cut after a multiple of the rows that fill whole lane
// groups, or at half its rows (every piece keeps MinPieceRows), whichever
// leaves the costlier piece cheaper; at a tie, fewer lane groups.
std::pair<AttnItem, AttnItem> BestCut(const AttnItem& it, const AttnHeads& h) {
  const size_t n = it.r1 - it.r0, low = MinPieceRows(h), unit = AttnLaneRows(h);
  std::pair<AttnItem, AttnItem> best;
  double best_max = 0;
  size_t best_groups = 0;
  auto consider = [&](size_t at) {
    if (at < low || at + low > n) return;
    AttnItem a = it, b = it;
    a.r1 = b.r0 = it.r0 + at;
    const double worst = std::max(AttnItemCost(a, h), AttnItemCost(b, h));
    const size_t groups = Groups(at, h) + Groups(n - at, h);
    if (best_groups == 0 || worst < best_max || (worst == best_max && groups < best_groups)) {
      best = {a, b};
      best_max = worst;
      best_groups = groups;
    }
  };
  for (size_t at = unit; at < n; at += unit) consider(at);
  consider(n / 2);
  return best;
}

// The costliest cuttable item's rows in two, again and again (BestCut), of
// the plans met on the way the one with the shortest longest thread (at a
// tie the earlier); at most 4 * threads items. Cutting across a plateau:
// one head of three cut on four threads gains nothing until the other two
// are cut too; so up to as many cuts without gain as there are items.
std::vector<AttnItem> CutRows(std::vector<AttnItem> out, const AttnHeads& h, size_t threads) {
  SortByCost(&out, h);
  std::vector<AttnItem> best = out;
  double best_span = AttnMakespan(out, h, threads);
  for (size_t idle = 0; out.size() < 4 * threads && idle < out.size(); ++idle) {
    auto it = std::find_if(out.begin(), out.end(), [&](const AttnItem& x) { return Cuttable(x, h); });
    if (it == out.end()) break;
    const std::pair<AttnItem, AttnItem> pieces = BestCut(*it, h);
    out.erase(it);
    InsertByCost(&out, pieces.first, h);
    InsertByCost(&out, pieces.second, h);
    const double span = AttnMakespan(out, h, threads);
    if (span < best_span * 0.995) {
      best = out;
      best_span = span;
      idle = static_cast<size_t>(-1);  // the loop's ++ makes it 0
    }
  }
  return best;
}

}  // namespace

double AttnItemCost(const AttnItem& it, const AttnHeads& h) {
  const double tiles = static_cast<double>((it.positions + kAttnTile - 1) / kAttnTile);
  const double widen = WholeRows(it, h) ? kWidenWholeRows : kWidenHeadSlice;
  return tiles * static_cast<double>(Heads(it, h)) * (static_cast<double>(Groups(it.r1 - it.r0, h)) + widen);
}

double AttnMakespan(const std::vector<AttnItem>& items, const AttnHeads& h, size_t threads) {
  // Each item goes to the thread that finishes first: a min-heap of loads.
  std::priority_queue<double, std::vector<double>, std::greater<double>> load;
  for (size_t t = 0; t < std::max<size_t>(1, std::min(threads, items.size())); ++t) load.push(0);
  double longest = 0;
  for (const AttnItem& it : items) {
    const double done = load.top() + AttnItemCost(it, h);
    load.pop();
    load.push(done);
    longest = std::max(longest, done);
  }
  return longest;
}

std::vector<AttnItem> CutAttnItemsByHead(const std::vector<AttnItem>& items, const AttnHeads& h) {
  std::vector<AttnItem> out;
  for (const AttnItem& it : items) {
    if ((it.r1 - it.r0) * h.group() < kLanesMinQueries || it.heads.end != 0) {
      out.push_back(it);
      continue;
    }
    for (size_t g = 0; g < h.n_kv_head; ++g) {
      AttnItem head = it;
      head.heads = {g, g + 1};
      out.push_back(head);
    }
  }
  return out;
}

std::vector<AttnItem> BalanceAttnItems(const std::vector<AttnItem>& items, const AttnHeads& h, size_t threads) {
  // Two starts: every head in its own item (the K/V heads spread over the
  // threads), and the items as they are (each reads whole K/V rows); each
  // then has its costliest rows cut while that shortens the longest thread.
  std::vector<AttnItem> by_head = CutRows(CutAttnItemsByHead(items, h), h, threads);
  std::vector<AttnItem> whole = CutRows(items, h, threads);
  // At a tie the whole rows: their widening was the cheaper measured.
  return AttnMakespan(by_head, h, threads) < AttnMakespan(whole, h, threads) ? by_head : whole;
}

std::vector<AttnItem> BalanceSpanUnits(const std::vector<AttnItem>& units, const AttnHeads& h, size_t threads) {
  // Whole rows only: units cut by head would share a span's state, and an
  // empty span writes every head's (and split-KV items by head measured 7%
  // slower for 30 rows at depth 864).
  return CutRows(units, h, threads);
}

std::vector<AttnMergePiece> CutMergePieces(const std::vector<AttnItem>& items, size_t threads) {
  std::vector<AttnMergePiece> pieces;
  const size_t parts = std::max<size_t>(threads, 1);
  for (size_t i = 0; i < items.size(); ++i) {
    const size_t rows = items[i].r1 - items[i].r0, cut = std::max<size_t>((rows + parts - 1) / parts, 1);
    for (size_t r = items[i].r0; r < items[i].r1; r += cut) pieces.push_back({i, r, std::min(items[i].r1, r + cut)});
  }
  return pieces;
}

}  // namespace pc
