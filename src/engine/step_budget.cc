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
  const double decode_ms = decode_ms_ > 0 ? decode_ms_ * static_cast<double>(n_decode) : 0;
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
    const double decode_ms = decode_ms_ > 0 ? decode_ms_ * static_cast<double>(n_decode) : 0;
    const double tokens = std::floor(std::max(opt_.target_ms - decode_ms, 0.0) / prefill_ms_);
    b.within_target = std::clamp(static_cast<size_t>(std::min(tokens, 1e9)), std::min(opt_.min_chunk, b.room), b.shared);
  }
  return b;
}

void StepBudget::Observe(size_t n_decode, size_t n_prefill, double ms) {
  if (!(ms > 0) || (n_decode == 0 && n_prefill == 0)) return;
  const double w = opt_.smoothing;
  auto blend = [w](double old, double now) { return old < 0 ? now : (1 - w) * old + w * now; };
  if (n_prefill == 0) {
    decode_ms_ = blend(decode_ms_, ms / static_cast<double>(n_decode));
    return;
  }
  // A mixed step: what the decode sequences would have cost alone (as last
  // measured) is taken off; the rest is the prefill's. A step whose decode
  // estimate exceeds its duration says little about prefill: take a quarter
  // of it rather than nothing.
  const double decode_part = decode_ms_ > 0 ? decode_ms_ * static_cast<double>(n_decode) : 0;
  const double prefill_part = std::max(ms - decode_part, 0.25 * ms);
  prefill_ms_ = blend(prefill_ms_, prefill_part / static_cast<double>(n_prefill));
}

}  // namespace pc
