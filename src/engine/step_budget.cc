#include "engine/step_budget.h"

#include <algorithm>
#include <cmath>

namespace pc {

size_t StepBudget::PrefillTokens(size_t n_decode) const {
  const size_t room = opt_.max_tokens > n_decode ? opt_.max_tokens - n_decode : 0;
  if (opt_.target_ms <= 0 || n_decode == 0) return room;
  const size_t floor_tokens = std::min(opt_.min_chunk, room);
  // Before any mixed step has been timed, take the minimum: the first
  // measurement then says what a token costs.
  if (prefill_ms_ <= 0) return floor_tokens;
  const double decode_ms = DecodeMs(n_decode);
  // When the decodes alone take most of the target, the target cannot be
  // met anyway; prefill still gets as much time as the decodes, so queued
  // prompts keep advancing at half the machine instead of a block a step.
  const double left_ms = std::max(opt_.target_ms - decode_ms, decode_ms);
  if (left_ms <= 0) return floor_tokens;
  const double tokens = std::floor(left_ms / prefill_ms_);
  return std::clamp(static_cast<size_t>(std::min(tokens, 1e9)), floor_tokens, room);
}

PrefillBudget StepBudget::Prefill(size_t n_decode) const {
  PrefillBudget b;
  b.room = opt_.max_tokens > n_decode ? opt_.max_tokens - n_decode : 0;
  b.shared = PrefillTokens(n_decode);
  b.within_target = b.shared;
  if (opt_.target_ms > 0 && n_decode > 0 && prefill_ms_ > 0) {
    const double tokens = std::floor(std::max(opt_.target_ms - DecodeMs(n_decode), 0.0) / prefill_ms_);
    b.within_target = std::clamp(static_cast<size_t>(std::min(tokens, 1e9)), std::min(opt_.min_chunk, b.room), b.shared);
  }
  return b;
}

double StepBudget::DecodeMs(size_t n_decode) const {
  if (n_decode == 0 || per_seq_ms_ < 0) return 0;
  return fixed_ms_ + per_seq_ms_ * static_cast<double>(n_decode);
}

// A weighted least-squares line through the decode steps, the newest weighing
// most (each older step 0.9x the next: about the last 10 count). While the
// steps seen lately had (nearly) one batch size, they fix only the mean: the
// line keeps its slope and passes through it. The first slope is the whole
// time per sequence (no fixed part), the estimate that errs long.
void StepBudget::ObserveDecode(size_t n_decode, double ms) {
  constexpr double kKeep = 0.9;
  const double n = static_cast<double>(n_decode);
  w_ = kKeep * w_ + 1;
  wn_ = kKeep * wn_ + n;
  wnn_ = kKeep * wnn_ + n * n;
  wt_ = kKeep * wt_ + ms;
  wnt_ = kKeep * wnt_ + n * ms;
  const double mean_n = wn_ / w_, mean_t = wt_ / w_;
  const double var_n = wnn_ / w_ - mean_n * mean_n;
  double slope = per_seq_ms_ >= 0 ? per_seq_ms_ : mean_t / mean_n;
  if (var_n >= 0.25) slope = (wnt_ / w_ - mean_n * mean_t) / var_n;
  // Neither a negative cost per sequence nor a negative fixed part.
  per_seq_ms_ = std::clamp(slope, 0.0, mean_t / mean_n);
  fixed_ms_ = mean_t - per_seq_ms_ * mean_n;
}

void StepBudget::Observe(size_t n_decode, size_t n_prefill, double ms) {
  if (!(ms > 0) || (n_decode == 0 && n_prefill == 0)) return;
  if (n_prefill == 0) {
    ObserveDecode(n_decode, ms);
    return;
  }
  const double w = opt_.smoothing;
  auto blend = [w](double old, double now) { return old < 0 ? now : (1 - w) * old + w * now; };
  // A mixed step: what the decode sequences would have cost alone (as
  // measured) is taken off; the rest is the prefill's. A step whose decode
  // estimate exceeds its duration says little about prefill: take a quarter
  // of it rather than nothing.
  const double decode_part = DecodeMs(n_decode);
  const double prefill_part = std::max(ms - decode_part, 0.25 * ms);
  prefill_ms_ = blend(prefill_ms_, prefill_part / static_cast<double>(n_prefill));
}

}  // namespace pc
