#include "model/attn_plan.h"

#include <algorithm>

namespace pc {
namespace {

// A head's K and V tile widened, in lane-group tile passes (attn_plan.h).
constexpr double kWidenCost = 1.0 / 6;

size_t Groups(size_t rows, const AttnHeads& h) { return (rows * h.group() + kLaneTile - 1) / kLaneTile; }
size_t Heads(const AttnItem& it, const AttnHeads& h) { return it.heads.End(h) - it.heads.begin; }
// The fewest rows whose queries of one head still run on the lane kernels.
size_t MinPieceRows(const AttnHeads& h) { return (kLanesMinQueries + h.group() - 1) / h.group(); }

void SortByCost(std::vector<AttnItem>* items, const AttnHeads& h) {
  std::stable_sort(items->begin(), items->end(), [&](const AttnItem& a, const AttnItem& b) {
    return AttnItemCost(a, h) > AttnItemCost(b, h);
  });
}

// Where item `it` may be cut in two: after a multiple of the rows that fill
// whole lane groups, or at half its rows; every piece keeps MinPieceRows.
std::vector<size_t> CutPoints(const AttnItem& it, const AttnHeads& h) {
  const size_t n = it.r1 - it.r0, low = MinPieceRows(h);
  std::vector<size_t> at;
  if (it.heads.end == 0 || n < 2 * low) return at;  // every head (a few queries), or too few rows
  for (size_t a = AttnLaneRows(h); a + low <= n; a += AttnLaneRows(h)) {
    if (a >= low) at.push_back(a);
  }
  if (std::find(at.begin(), at.end(), n / 2) == at.end()) at.push_back(n / 2);
  return at;
}

size_t TotalGroups(const std::vector<AttnItem>& items, const AttnHeads& h) {
  size_t total = 0;
  for (const AttnItem& it : items) total += Heads(it, h) * Groups(it.r1 - it.r0, h);
  return total;
}

}  // namespace

double AttnItemCost(const AttnItem& it, const AttnHeads& h) {
  const double tiles = static_cast<double>((it.positions + kAttnTile - 1) / kAttnTile);
  return tiles * static_cast<double>(Heads(it, h)) * (static_cast<double>(Groups(it.r1 - it.r0, h)) + kWidenCost);
}

double AttnMakespan(const std::vector<AttnItem>& items, const AttnHeads& h, size_t threads) {
  std::vector<double> load(std::max<size_t>(1, std::min(threads, items.size())), 0.0);
  for (const AttnItem& it : items) *std::min_element(load.begin(), load.end()) += AttnItemCost(it, h);
  return *std::max_element(load.begin(), load.end());
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
  std::vector<AttnItem> out = CutAttnItemsByHead(items, h);
  SortByCost(&out, h);
  double best = AttnMakespan(out, h, threads);
  while (out.size() < 4 * threads) {
    // The costliest item that can be cut, at its best cut.
    auto it = std::find_if(out.begin(), out.end(), [&](const AttnItem& x) { return !CutPoints(x, h).empty(); });
    if (it == out.end()) break;
    std::vector<AttnItem> chosen;
    double chosen_span = best;
    for (size_t at : CutPoints(*it, h)) {
      std::vector<AttnItem> trial(out.begin(), it);
      trial.insert(trial.end(), it + 1, out.end());
      AttnItem a = *it, b = *it;
      a.r1 = b.r0 = it->r0 + at;
      trial.push_back(a);
      trial.push_back(b);
      SortByCost(&trial, h);
      const double span = AttnMakespan(trial, h, threads);
      // A shorter longest thread; at a tie, fewer lane groups in all.
      if (span < chosen_span * 0.995 ||
          (!chosen.empty() && span <= chosen_span && TotalGroups(trial, h) < TotalGroups(chosen, h))) {
        chosen = std::move(trial);
        chosen_span = std::min(chosen_span, span);
      }
    }
    if (chosen.empty()) break;
    out = std::move(chosen);
    best = chosen_span;
  }
  return out;
}

}  // namespace pc
