#include "sched/cheap_first.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace pc {

namespace {

// Slack (room - passed) of the entries not yet placed, by arrival position:
// min over a prefix, add to a prefix, remove one. A segment tree with lazy
// adds: O(log n) each, so ordering a queue of thousands stays cheap.
class SlackTree {
 public:
  explicit SlackTree(const std::vector<double>& slack) : n_(slack.size()) {
    size_ = 1;
    while (size_ < n_) size_ *= 2;
    min_.assign(2 * size_, kNone);
    add_.assign(2 * size_, 0);
    for (size_t i = 0; i < n_; ++i) min_[size_ + i] = slack[i];
    for (size_t i = size_ - 1; i >= 1; --i) min_[i] = std::min(min_[2 * i], min_[2 * i + 1]);
  }
  double MinBefore(size_t end) const { return Min(1, 0, size_, end); }
  void AddBefore(size_t end, double delta) { Add(1, 0, size_, end, delta); }
  void Remove(size_t i) { Set(1, 0, size_, i); }

 private:
  static constexpr double kNone = std::numeric_limits<double>::infinity();
  double Min(size_t node, size_t lo, size_t hi, size_t end) const {
    if (end <= lo) return kNone;
    if (hi <= end) return min_[node];
    const size_t mid = (lo + hi) / 2;
    return add_[node] + std::min(Min(2 * node, lo, mid, end), Min(2 * node + 1, mid, hi, end));
  }
  void Add(size_t node, size_t lo, size_t hi, size_t end, double delta) {
    if (end <= lo) return;
    if (hi <= end) {
      min_[node] += delta;
      add_[node] += delta;
      return;
    }
    const size_t mid = (lo + hi) / 2;
    Add(2 * node, lo, mid, end, delta);
    Add(2 * node + 1, mid, hi, end, delta);
    min_[node] = add_[node] + std::min(min_[2 * node], min_[2 * node + 1]);
  }
  void Set(size_t node, size_t lo, size_t hi, size_t i) {
    if (hi - lo == 1) {
      min_[node] = kNone;
      return;
    }
    const size_t mid = (lo + hi) / 2;
    if (i < mid) Set(2 * node, lo, mid, i);
    else Set(2 * node + 1, mid, hi, i);
    min_[node] = add_[node] + std::min(min_[2 * node], min_[2 * node + 1]);
  }
  size_t n_, size_;
  std::vector<double> min_, add_;  // subtree minimum (own add included); pending add for the children
};

}  // namespace

std::vector<size_t> CheapFirstOrder(std::span<const QueueEntry> entries, int64_t now_ns, double allowance) {
  const size_t n = entries.size();
  std::vector<size_t> by_cost(n);
  std::iota(by_cost.begin(), by_cost.end(), size_t{0});
  auto per_request = [&](size_t i) { return entries[i].cost_ms / static_cast<double>(std::max<size_t>(entries[i].beneficiaries, 1)); };
  std::stable_sort(by_cost.begin(), by_cost.end(), [&](size_t a, size_t b) { return per_request(a) < per_request(b); });
  std::vector<double> slack(n);  // what each may still be passed by, ms
  for (size_t i = 0; i < n; ++i) {
    // Its first-come-first-served time to its first token is at least its
    // wait so far plus its own prefill: the allowance is a share of that.
    const double wait_ms = static_cast<double>(now_ns - entries[i].arrival_ns) / 1e6;
    slack[i] = allowance * (std::max(wait_ms, 0.0) + entries[i].cost_ms) - entries[i].passed_ms;
  }
  SlackTree tree(slack);
  std::vector<bool> placed(n, false);
  std::vector<size_t> order;
  order.reserve(n);
  for (size_t c : by_cost) {
    // Everyone before it not yet placed must have room for its cost.
    if (entries[c].cost_ms > tree.MinBefore(c)) continue;
    placed[c] = true;
    order.push_back(c);
    tree.Remove(c);
    tree.AddBefore(c, -entries[c].cost_ms);
  }
  for (size_t j = 0; j < n; ++j) {
    if (!placed[j]) order.push_back(j);
  }
  return order;
}

}  // namespace pc
