#include "sched/step_budget.h"

#include <algorithm>
#include <cmath>

namespace pc {

namespace {
// A step without decodes may grow until its fixed per-step part (the
// weights read once, plus the chunk's K/V pass at its depth: what a
// one-token step there costs) is this share of it, so prefill runs at 90% of
// its speed in long chunks; but to at most twice the target, so that a
// request arriving meanwhile (a cache hit) waits at most that. A lone prompt
// (no one waiting) is not bounded (Prefill's `lone`). At eight times the
// target, mooncake's overload replay on an AVX2 build (Intel, 2 cores) had a
// mean step of 64 ms and a p90 of 96 ms against a 25 ms target.
constexpr double kMaxFixedShare = 0.1;
constexpr double kPrefillOnlyTargets = 2;
// Weight of the calibrated prior, in recent steps' worth of evidence.
constexpr double kPriorSteps = 1;
}  // namespace

void StepBudget::SetKvPass(double ms_per_position, size_t calibration_chunk) {
  pass_ms_ = std::max(ms_per_position, 0.0);
  calibration_chunk_ = calibration_chunk;
}

void StepBudget::SetPrefillProfile(std::vector<std::pair<double, double>> samples) {
  if (samples.empty()) return;
  // Each sample is a chunk's time per token: its pass (at the chunk's first
  // position, the sample's less half a chunk) is not the tokens'.
  if (pass_ms_ > 0 && calibration_chunk_ > 0) {
    const double c = static_cast<double>(calibration_chunk_);
    for (auto& [x, y] : samples) y = std::max(y - pass_ms_ * std::max(x - 0.5 * c, 0.0) / c, 0.25 * y);
  }
  // Least-squares line ms = base + attn * position through the samples.
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : samples) {
    n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  const double var = sxx / n - (sx / n) * (sx / n);
  double attn = var > 1e-9 ? (sxy / n - (sx / n) * (sy / n)) / var : 0.0;
  attn = std::max(attn, 0.0);
  double base = sy / n - attn * sx / n;
  if (base <= 0) {  // a curve steeper than linear near 0: keep it positive at the first sample
    base = std::max(samples.front().second * 0.5, 1e-6);
  }
  prior_base_ms_ = base;
  prior_attn_ms_ = attn;
  if (pw_ == 0) {
    base_ms_ = base;
    attn_ms_ = attn;
  }
}

double StepBudget::PrefillMs(size_t pos, size_t n) const {
  if (!knows_prefill_cost()) return static_cast<double>(n);  // unknown: a token stands for a millisecond
  StepShape chunk;
  chunk.AddChunk(pos, n);
  return base_ms_ * static_cast<double>(n) + attn_ms_ * chunk.prefill_positions + (n > 0 ? pass_ms_ * chunk.chunk_depth : 0.0);
}

double StepBudget::StepMs(const StepShape& step) const {
  const double prefill = knows_prefill_cost() ? base_ms_ * static_cast<double>(step.n_prefill) +
                                                   attn_ms_ * step.prefill_positions + pass_ms_ * step.chunk_depth
                                             : static_cast<double>(step.n_prefill);
  return (step.n_decode > 0 ? DecodeMs(step.n_decode, step.decode_context) : StepFixedMs()) + prefill;
}

size_t StepBudget::PrefillTokensWithin(double ms, size_t pos) const {
  if (std::isinf(ms) && ms > 0) return SIZE_MAX;
  if (knows_prefill_cost()) ms -= pass_ms_ * static_cast<double>(pos);  // the chunk's own pass
  if (!(ms > 0)) return 0;
  double n;
  if (!knows_prefill_cost()) {
    n = ms;
  } else if (attn_ms_ <= 0) {
    n = ms / base_ms_;
  } else {
    // (attn/2) n^2 + (base + attn * (pos - 1/2)) n <= ms
    const double b = base_ms_ + attn_ms_ * (static_cast<double>(pos) - 0.5);
    n = (-b + std::sqrt(b * b + 2 * attn_ms_ * ms)) / attn_ms_;
  }
  return static_cast<size_t>(std::clamp(std::floor(n), 0.0, 1e9));
}

double StepBudget::DecodeMs(size_t n_decode, double decode_context) const {
  if (n_decode == 0 || per_seq_ms_ < 0) return 0;
  return fixed_ms_ + per_seq_ms_ * static_cast<double>(n_decode) + std::max(attn_ms_, 0.0) * decode_context;
}

double StepBudget::StepFixedMs() const { return DecodeMs(1); }

double StepBudget::PrefillOnlyStepMs(double depth) const {
  const double fixed_ms = StepFixedMs() + pass_ms_ * std::max(depth, 0.0);
  return std::clamp(fixed_ms / kMaxFixedShare, opt_.target_ms, kPrefillOnlyTargets * opt_.target_ms);
}

size_t StepBudget::FloorTokens(size_t room) const { return std::min(opt_.min_chunk, room); }

PrefillBudget StepBudget::Prefill(size_t n_decode, double decode_context, size_t prefill_depth, bool lone) const {
  PrefillBudget b;
  b.room = opt_.max_tokens > n_decode ? opt_.max_tokens - n_decode : 0;
  b.shared = b.within_target = b.room;
  if (opt_.target_ms <= 0 || (lone && n_decode == 0)) return b;
  if (!knows_prefill_cost()) {
    // Before a mixed step has been timed, a step with decodes takes the
    // minimum: the first measurement then says what a token costs.
    if (n_decode > 0) b.shared = b.within_target = FloorTokens(b.room);
    return b;
  }
  b.cost = this;
  if (n_decode > 0) {
    const double decode_ms = DecodeMs(n_decode, decode_context);
    b.shared_ms = std::max(opt_.target_ms - decode_ms, decode_ms);
    b.within_target_ms = std::max(opt_.target_ms - decode_ms, 0.0);
    b.finish_ms = std::max(b.shared_ms, 2 * opt_.target_ms - decode_ms);
  } else {
    b.shared_ms = b.within_target_ms = PrefillOnlyStepMs(static_cast<double>(prefill_depth)) - StepFixedMs();
    b.after_first_token_ms = std::max(opt_.target_ms - StepFixedMs(), 0.0);
    b.finish_ms = std::max(b.shared_ms, 2 * opt_.target_ms - StepFixedMs());
  }
  return b;
}

size_t StepBudget::PrefillTokens(size_t n_decode) const {
  const PrefillBudget b = Prefill(n_decode);
  if (!b.cost) return b.shared;
  return std::clamp(PrefillTokensWithin(b.shared_ms, 0), std::min<size_t>(1, b.room), b.shared);
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

// Ridge-regularised least squares for y = base * n + attn * s over recent
// steps (each older one (1 - smoothing) times the next), held toward the
// calibrated (base, attn) with the weight of kPriorSteps average steps; with
// no calibration, toward no attention cost, weakly. Positions that never
// vary (one prompt depth) leave attn at its prior.
void StepBudget::ObservePrefill(double n, double s, double y) {
  const double keep = 1 - opt_.smoothing;
  pw_ = keep * pw_ + 1;
  pnn_ = keep * pnn_ + n * n;
  pns_ = keep * pns_ + n * s;
  pss_ = keep * pss_ + s * s;
  pny_ = keep * pny_ + n * y;
  psy_ = keep * psy_ + s * y;
  const bool calibrated = prior_base_ms_ > 0;
  const double weight = calibrated ? kPriorSteps : 0.1 * kPriorSteps;
  const double a0 = calibrated ? prior_base_ms_ : pny_ / pnn_;
  const double b0 = calibrated ? prior_attn_ms_ : 0.0;
  const double la = weight * pnn_ / pw_, lb = weight * pss_ / pw_;
  const double m00 = pnn_ + la, m11 = pss_ + lb, m01 = pns_;
  const double r0 = pny_ + la * a0, r1 = psy_ + lb * b0;
  const double det = m00 * m11 - m01 * m01;
  double a, b;
  if (m11 <= 0 || det <= 1e-12 * m00 * m11) {  // positions never seen: attn stays at its prior
    b = b0;
    a = (r0 - m01 * b) / m00;
  } else {
    a = (r0 * m11 - r1 * m01) / det;
    b = (r1 * m00 - r0 * m01) / det;
  }
  if (b < 0) b = 0, a = r0 / m00;
  if (a <= 0) a = std::max(1e-6, a0 * 0.1), b = std::max((r1 - m01 * a) / m11, 0.0);
  base_ms_ = a;
  attn_ms_ = b;
}

void StepBudget::Observe(const StepShape& step, double ms) {
  if (!(ms > 0) || (step.n_decode == 0 && step.n_prefill == 0)) return;
  const double passes = pass_ms_ * step.chunk_depth;  // priced apart (SetKvPass), not fitted
  if (step.n_decode == 0) {  // prefill alone: the step's fixed part is not the prompt's
    ObservePrefill(static_cast<double>(step.n_prefill), step.prefill_positions,
                   std::max(ms - StepFixedMs() - passes, 0.25 * ms));
    return;
  }
  if (step.n_prefill == 0) {
    ObserveDecode(step.n_decode, std::max(ms - std::max(attn_ms_, 0.0) * step.decode_context, 0.05 * ms));
    return;
  }
  // A mixed step: what the decode sequences would have cost alone (as
  // predicted) is taken off; the rest is the prefill's. A step whose decode
  // estimate exceeds its duration says little about prefill: take a quarter
  // of it rather than nothing.
  const double decode_part = DecodeMs(step.n_decode, step.decode_context);
  const double prefill_part = std::max(ms - decode_part - passes, 0.25 * ms);
  ObservePrefill(static_cast<double>(step.n_prefill), step.prefill_positions, prefill_part);
}

}  // namespace pc
