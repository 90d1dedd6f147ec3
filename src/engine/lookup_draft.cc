#include "engine/lookup_draft.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace pc {

Result<DraftOptions> ParseDraftSpec(const std::string& spec) {
  DraftOptions o;
  if (spec.empty() || spec == "none") return o;
  const std::string kind = spec.substr(0, spec.find(':'));
  if (kind != "lookup") return Errorf("unknown draft kind '{}' (none, lookup[:N])", spec);
  o.max_tokens = 8;
  if (spec.size() > kind.size()) {
    const std::string n = spec.substr(kind.size() + 1);
    char* end = nullptr;
    const long v = std::strtol(n.c_str(), &end, 10);
    if (n.empty() || *end != '\0' || v < 1 || v > 64) return Errorf("draft length '{}' must be 1..64", n);
    o.max_tokens = static_cast<size_t>(v);
  }
  return o;
}

std::vector<int32_t> FindLookupDraft(std::span<const int32_t> tokens, const DraftOptions& opt, size_t max_tokens) {
  const size_t len = tokens.size();
  if (max_tokens == 0 || opt.min_ngram == 0) return {};
  for (size_t n = std::min(opt.max_ngram, len > 0 ? len - 1 : 0); n >= opt.min_ngram; --n) {
    const std::span<const int32_t> key = tokens.subspan(len - n);
    // Occurrences [s, s + n) with at least one token after them, before the key.
    for (size_t s = len - n; s-- > 0;) {
      if (tokens[s + n - 1] != key[n - 1] || !std::equal(key.begin(), key.end() - 1, tokens.begin() + static_cast<std::ptrdiff_t>(s))) {
        continue;
      }
      const size_t from = s + n, to = std::min(len, from + max_tokens);
      return {tokens.begin() + static_cast<std::ptrdiff_t>(from), tokens.begin() + static_cast<std::ptrdiff_t>(to)};
    }
    if (n == 1) break;
  }
  return {};
}

size_t DraftController::Want(double cost_ratio) {
  if (max_tokens_ == 0) return 0;
  if (pause_steps_ > 0) {
    --pause_steps_;
    return 0;
  }
  const double c = std::clamp(cost_ratio, 0.02, 1.0);
  size_t k = 0;
  for (double p = rate_; k < max_tokens_ && p >= c; p *= rate_) ++k;
  if (k > 0) {
    pause_len_ = 4;
    return k;
  }
  if (probe_due_) {  // a retry after a pause: one token re-measures the rate
    probe_due_ = false;
    return 1;
  }
  pause_steps_ = pause_len_;
  pause_len_ = std::min<size_t>(pause_len_ * 2, 1024);
  probe_due_ = true;
  return 0;
}

void DraftController::Observe(size_t drafted, size_t accepted) {
  // Each accepted token is a success; the first rejected one a failure; the
  // tokens after it were never tested.
  constexpr double kWeight = 0.15;
  for (size_t i = 0; i < accepted; ++i) rate_ += kWeight * (1 - rate_);
  if (accepted < drafted) rate_ -= kWeight * rate_;
}

}  // namespace pc
