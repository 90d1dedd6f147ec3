// How many prompt tokens the next step may prefill so that the step, and
// with it every running stream's inter-token gap, stays near a target
// duration. Pure bookkeeping: the engine reports each step's composition and
// measured duration; the budget learns two costs from them: what a decode
// step of n sequences takes, fixed_ms + n * per_seq_ms (a least-squares
// line through recent steps without prefill, older steps weighing less:
// the weights are read once per step, so the fixed part is most of a small
// batch's time) and milliseconds per prefill token (what the rest of a mixed
// step took, exponentially weighted).
//
//   decode_ms = fixed_ms + n_decode * per_seq_ms
//   budget = max(target_ms - decode_ms, decode_ms) / prefill_ms_per_token
//
// (when the decodes alone fill the target, prefill gets as long as they
// take: queued prompts keep advancing at half the machine's speed rather
// than one block a step),
// clamped to [min_chunk, max_tokens - n_decode], so prompts always advance.
// With no decode in the step nobody waits on it: the whole token budget.
// Between tenants (Scheduler::Plan) the step offers three budgets: the one
// above for a tenant at its fair share, the target's remainder alone (no
// half-the-machine floor) for a tenant past its share, and the whole token
// budget for a tenant far below it.
// Until a cost has been measured, a conservative first guess stands in.
// Thread-safety: none; owned by the engine loop.
#pragma once
#include <cstddef>
#include <cstdint>

namespace pc {

struct StepBudgetOptions {
  double target_ms = 0;     // 0: no target (every step may use max_tokens)
  size_t max_tokens = 256;  // tokens per step (decode + prefill)
  size_t min_chunk = 16;    // prefill tokens a step may always take
  double smoothing = 0.2;   // weight of the newest prefill cost measurement
};

// Prefill tokens a step may take, by the standing of the tenant whose turn
// it is (see above). within_target <= shared <= room.
struct PrefillBudget {
  size_t shared = SIZE_MAX;         // at its fair share (or the only tenant)
  size_t within_target = SIZE_MAX;  // past its share: what the target leaves
  size_t room = SIZE_MAX;           // far below its share: the step's tokens
};

class StepBudget {
 public:
  explicit StepBudget(const StepBudgetOptions& opt) : opt_(opt) {}

  // Prefill tokens for a step that also decodes n_decode sequences.
  size_t PrefillTokens(size_t n_decode) const;
  PrefillBudget Prefill(size_t n_decode) const;
  // A finished step: its decode sequences, prefill tokens and duration.
  void Observe(size_t n_decode, size_t n_prefill, double ms);

  // What a step decoding n sequences alone is expected to take, in ms; 0
  // until a decode step has been timed.
  double DecodeMs(size_t n_decode) const;
  double prefill_ms_per_token() const { return prefill_ms_; }

 private:
  void ObserveDecode(size_t n_decode, double ms);

  StepBudgetOptions opt_;
  // Decode steps: decayed sums of 1, n, n^2, ms and n * ms, and the line
  // fitted through them (both < 0 until a decode step has been timed).
  double w_ = 0, wn_ = 0, wnn_ = 0, wt_ = 0, wnt_ = 0;
  double fixed_ms_ = -1;    // per decode step
  double per_seq_ms_ = -1;  // per decode sequence
  double prefill_ms_ = -1;  // per prefill token; < 0 until measured
};

}  // namespace pc
