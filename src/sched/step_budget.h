// How much prompt a step may prefill so that the step, and with it every
// running stream's inter-token gap, stays near a target duration, on any
// CPU. Pure bookkeeping: the engine reports each step's composition and
// measured duration; the budget prices a step by what it holds:
//
//   decode_ms  = fixed_ms + n_decode * per_seq_ms + attn_ms * sum(context)
//   prefill_ms = sum over prompt tokens at position p of (base_ms + attn_ms * p)
//                + pass_ms * (the chunk's first position), per chunk
//
// attn_ms is the attention cost of one query against one cached position
// (ms); a prefill token deep in a long prompt costs base_ms + attn_ms * p,
// several times a shallow one on a slow CPU, so chunks are sized by the
// position they start at. pass_ms is what a chunk pays once for each cached
// position before it, whatever its length: the K/V behind it read and
// widened once for all its rows (on a 2-core Zen 5, bench-135m: a one-token
// step at depth 4,736 took 14 ms against 3.3 ms at depth 0, while a token
// deep in a long chunk costs 2 ms). Where the costs come from:
// - the calibrated prefill curve (position -> ms per token, measured at
//   start: SetPrefillProfile) fixes base_ms and attn_ms before any step ran,
//   and one-token steps at depth 0 and deep fix pass_ms (SetKvPass);
// - measured steps refine them: the decode line is a least-squares fit in
//   n_decode through recent decode-only steps (older ones weigh less; the
//   weights are read once per step, so the fixed part is most of a small
//   batch's time); the prefill pair is a least-squares fit through recent
//   mixed steps' prefill part (the step less its predicted decodes), held
//   toward the calibrated values where the steps do not tell them apart.
//
// The budget of a step (PrefillBudget, in ms, priced by PrefillTokensWithin):
//   with decodes: max(target - decode_ms, decode_ms)   (when the decodes
//     alone fill the target, prefill still gets as long as they take, so
//     queued prompts advance at half the machine's speed)
//   without decodes: nobody streams, but a step is what an arriving request
//     (a cache hit) waits behind: target - fixed_ms, stretched until the
//     step's fixed part (fixed_ms, the weights read once, plus the chunk's
//     K/V pass at the depth of the prompt whose turn comes first: what a
//     one-token step there costs)
//     is a tenth of the step (prefill at 90% of its long-chunk speed), but
//     never past twice the target; once a prompt completes in the step
//     (its first token waits for the step's end), only to the target
//     (after_first_token_ms); a lone prompt (nothing else
//     running or waiting) takes the whole step's tokens: no one waits on
//     it, and one arriving meanwhile waits one such step at most.
//   finishing a prompt: a tenant at its fair share may complete a prompt
//     whose remainder fits in a step of twice the target (finish_ms).
// A turn always gets at least one token (prompts always advance); before
// any cost is known, min_chunk tokens. When even the decodes or that one
// token cannot fit the target, steps_over_target() counts it.
// Between tenants (Scheduler::Plan) the step offers three budgets: the one
// above for a tenant at its fair share, the target's remainder alone (no
// half-the-machine floor) for a tenant past its share, and the whole token
// budget for a tenant far below it.
// Thread-safety: none; owned by the engine loop.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace pc {

struct StepBudgetOptions {
  double target_ms = 0;     // 0: no target (every step may use max_tokens)
  size_t max_tokens = 256;  // tokens per step (decode + prefill)
  size_t min_chunk = 16;    // prefill tokens a turn takes before any cost is known
  double smoothing = 0.2;   // weight of the newest prefill cost measurement
};

class StepBudget;

// What a step may prefill, by the standing of the tenant whose turn it is
// (see above): token caps always, time caps when `cost` prices chunks.
struct PrefillBudget {
  size_t shared = SIZE_MAX;         // tokens, at its fair share (or the only tenant)
  size_t within_target = SIZE_MAX;  // tokens, past its share: what the target leaves
  size_t room = SIZE_MAX;           // tokens, far below its share: the step's tokens
  double shared_ms = std::numeric_limits<double>::infinity();
  double within_target_ms = std::numeric_limits<double>::infinity();
  // Once a prompt completes its prefill in the step, the step's prefill so
  // far may grow only to this: its first token waits for the step's end, and
  // a step without decodes runs past the target only for prefill speed.
  double after_first_token_ms = std::numeric_limits<double>::infinity();
  // A prompt whose whole remainder fits in this (the step's prefill so far
  // included) completes in the step, past shared_ms: the step then runs to
  // at most twice the target, once, instead of the prompt's first token
  // waiting whole steps for its last few tokens (a short prompt arriving
  // while others decode would take three or four steps on a slow CPU).
  double finish_ms = 0;
  const StepBudget* cost = nullptr;  // null: the token caps alone
};

// A step's composition, as the budget prices it.
struct StepShape {
  size_t n_decode = 0;
  double decode_context = 0;  // sum over decoding sequences of their cached positions
  size_t n_prefill = 0;
  double prefill_positions = 0;  // sum over prefilled tokens of their positions

  size_t chunks = 0;
  double chunk_depth = 0;  // sum over chunks of their first position (each pays one K/V pass)

  void AddDecode(size_t pos) { ++n_decode, decode_context += static_cast<double>(pos); }
  // Prompt tokens [pos, pos + n).
  void AddChunk(size_t pos, size_t n) {
    const double nd = static_cast<double>(n);
    n_prefill += n;
    prefill_positions += nd * static_cast<double>(pos) + 0.5 * nd * (nd - 1);
    ++chunks;
    chunk_depth += static_cast<double>(pos);
  }
};

// Whether a step in progress should be dropped (its work done so far lost)
// so that requests that just arrived, cheap because their prompt is mostly
// cached, get their first tokens in a step of their own (with the running
// decodes) at once. It pays when that step ends before the step in
// progress would (predicted_ms - elapsed_ms > arrival_step_ms): the arrival
// gains the rest of the step in progress, and the dropped step's decodes,
// which ride the arrival's step, get their tokens no later than it would
// have given them (so a step already past the target may be dropped too: a
// hit 12 ms into a 36 ms step with a decode waited 22 ms when the loss had
// to fit one target). What the dropped step's prompt chunks wait more is the
// time lost plus the arrival's step, under the step's own predicted length,
// once (the engine never drops the two steps that follow a drop). No
// target: never. All in ms; pure.
inline bool DropStepPays(double elapsed_ms, double predicted_ms, double arrival_step_ms, double target_ms) {
  return target_ms > 0 && predicted_ms - elapsed_ms > arrival_step_ms;
}

// What a step in progress does for such arrivals (ForHitArrival):
//   kWait: nothing; they go in the next step;
//   kPause: their step runs between two of its layers, then it goes on
//     where it stood (nothing lost);
//   kDrop: DropStepPays (a step with decodes, when droppable).
// A step pauses when what the arrivals gain (the rest of the step,
// remaining_ms) exceeds what those it holds lose: each decode's next token
// waits for the arrivals' step (pause_step_ms). So does each ending
// prompt's first token, but that one has already waited at least the whole
// step (its chunk is in it from the start), so each side is weighed by its
// own latency: the arrivals' wait as a share of their step (remaining_ms /
// pause_step_ms) against the prompt's as a share of its first token's
// (pause_step_ms / predicted_ms, each). (2026-12-07: a hit of 6 tokens
// waited 9.9 ms for the end of a 72 ms step ending a 457-token miss, its
// first token 15.8 ms where its own step took 6.0; pausing would have
// delayed the miss's first token, 1 s into its prefill, by 6 ms.) Always,
// then, when it holds neither (a lone prompt's long step); with decodes
// too, early in a step (2026-12-06: a hit 26 ms into a
// 49 ms step with one decode was dropped, and its 8 tokens then rode that
// decode in a step of 15.5 ms, twice its own). It pauses too whenever its
// decodes' next token, the pauses so far and this one included
// (paused_ms + pause_step_ms on top of predicted_ms), still comes within
// twice the target, the bound the step budget is held to on average
// (kPauseBudgetTargets): a wait inside that budget is what a step may cost
// its decodes anyway, while the hit would wait the whole rest of the step
// (2026-12-07: hits of 8 and 15 tokens waited 6.4 and 7.5 ms for steps
// with one decode whose pause would have stretched them from about 25 to
// 36 ms). Where pausing does not pay, a step with decodes is dropped when
// that pays. All in ms; pure.
enum class HitArrival { kWait, kPause, kDrop };

// A step's whole time as its progress implies: elapsed_ms over the share
// of its work done (its layers, 0 to 1) once at least kMinProgressForRate
// is done, else the prediction. ForHitArrival weighs what remains of the
// step; read off the prediction alone, a step running slower than predicted
// seemed to be ending while layers were left (2026-12-07, a Zen 5 guest whose
// speed moves by a third within minutes: a hit waited 12.8 ms for the end of
// a 169 ms step predicted at 143, its own step 10.9 ms). All in ms; pure.
inline constexpr double kMinProgressForRate = 0.1;
inline double StepMsByProgress(double predicted_ms, double elapsed_ms, double done) {
  return done >= kMinProgressForRate && done <= 1 ? elapsed_ms / done : predicted_ms;
}
inline constexpr double kPauseBudgetTargets = 2.0;
inline HitArrival ForHitArrival(double elapsed_ms, double predicted_ms, double paused_ms, size_t step_decodes,
                                size_t prompts_ending, double pause_step_ms, double drop_step_ms, bool droppable,
                                double target_ms) {
  if (target_ms <= 0) return HitArrival::kWait;
  const double remaining_ms = predicted_ms - elapsed_ms;
  const bool within_budget = predicted_ms + paused_ms + pause_step_ms <= kPauseBudgetTargets * target_ms;
  const bool decodes_pay = remaining_ms > pause_step_ms * static_cast<double>(step_decodes);
  const bool prompts_pay =
      remaining_ms * predicted_ms > static_cast<double>(prompts_ending) * pause_step_ms * pause_step_ms;
  if (remaining_ms > 0 && (within_budget || (decodes_pay && prompts_pay))) return HitArrival::kPause;
  if (step_decodes > 0 && droppable && DropStepPays(elapsed_ms, predicted_ms, drop_step_ms, target_ms)) {
    return HitArrival::kDrop;
  }
  return HitArrival::kWait;
}

class StepBudget {
 public:
  explicit StepBudget(const StepBudgetOptions& opt) : opt_(opt) {}

  // The calibrated prefill curve: (position, ms per token) samples, any
  // order; a least-squares line through them seeds base_ms and attn_ms.
  // Call SetKvPass first: the samples are then taken to come from chunks of
  // calibration_chunk tokens, and their pass share is taken off.
  void SetPrefillProfile(std::vector<std::pair<double, double>> samples);
  // The K/V pass a chunk pays per cached position before it, ms (measured:
  // CostModel::kv_pass_ms_per_position); 0: none priced.
  void SetKvPass(double ms_per_position, size_t calibration_chunk);

  // The budget of a step that decodes n_decode sequences whose cached
  // positions sum to decode_context; prefill_depth: where the prompt whose
  // turn comes first stands (sizes a step without decodes).
  PrefillBudget Prefill(size_t n_decode, double decode_context = 0, size_t prefill_depth = 0, bool lone = false) const;
  // Tokens of a prompt at position 0 that the shared budget allows (tests,
  // reports): Prefill(n_decode) priced at depth 0.
  size_t PrefillTokens(size_t n_decode) const;

  // Predicted time of prefilling tokens [pos, pos + n), ms.
  double PrefillMs(size_t pos, size_t n) const;
  // Predicted time of a whole step, ms (its fixed part when it has no decodes).
  double StepMs(const StepShape& step) const;
  // The most tokens from pos whose prefill fits in ms (0 when none does).
  size_t PrefillTokensWithin(double ms, size_t pos) const;
  // Predicted time of a step decoding n sequences alone, ms; 0 until a
  // decode step has been timed.
  double DecodeMs(size_t n_decode, double decode_context = 0) const;
  // The part of every step that does not depend on its tokens (the weights
  // read once), ms: what a one-sequence decode step costs; 0 until measured.
  double StepFixedMs() const;
  // How long a step without decodes may be (see above), ms, its prompt at depth.
  double PrefillOnlyStepMs(double depth = 0) const;

  // A finished step and its measured duration.
  void Observe(const StepShape& step, double ms);
  void Observe(size_t n_decode, size_t n_prefill, double ms) { Observe(StepShape{n_decode, 0, n_prefill, 0}, ms); }

  // Prefill cost per token at position 0 and per position, ms (< 0 until known).
  double prefill_ms_per_token() const { return base_ms_; }
  double attention_ms_per_position() const { return attn_ms_; }
  bool knows_prefill_cost() const { return base_ms_ > 0; }
  // The step target, ms (0: none).
  double target_ms() const { return opt_.target_ms; }
  double kv_pass_ms_per_position() const { return pass_ms_; }

 private:
  void ObserveDecode(size_t n_decode, double ms);
  void ObservePrefill(double n, double positions, double ms);
  size_t FloorTokens(size_t room) const;

  StepBudgetOptions opt_;
  // Decode steps: decayed sums of 1, n, n^2, ms and n * ms, and the line
  // fitted through them (both < 0 until a decode step has been timed).
  double w_ = 0, wn_ = 0, wnn_ = 0, wt_ = 0, wnt_ = 0;
  double fixed_ms_ = -1;    // per decode step
  double per_seq_ms_ = -1;  // per decode sequence
  // Prefill: decayed sums over mixed steps of n^2, n*s, s^2, n*y, s*y
  // (n tokens, s their summed positions, y the prefill part in ms) and the
  // calibrated prior the fit is held toward.
  double pnn_ = 0, pns_ = 0, pss_ = 0, pny_ = 0, psy_ = 0, pw_ = 0;
  double prior_base_ms_ = -1, prior_attn_ms_ = 0;
  double base_ms_ = -1;  // per prefill token at position 0; < 0 until known
  double attn_ms_ = 0;   // per query token per cached position
  double pass_ms_ = 0;   // per chunk per cached position before it
  size_t calibration_chunk_ = 0;
};

}  // namespace pc
