// Prefill cost measured on the model itself: the curve the tier stack's
// load-or-recompute decision and the step budget's prices start from. It
// runs forward passes, so it lives above the model (the cache below only
// receives the numbers). Thread-safety: uses the model; call before the
// engine starts.
#pragma once
#include <functional>

#include "kvcache/tier_stack.h"
#include "model/forward.h"

namespace pc {

// Times prefill of a chunk of tokens at several positions (the K/V behind
// each position need not be meaningful for timing): position 0 and the
// deepest always, the others until max_ms have passed; then one-token steps
// at position 0 and the deepest (the K/V pass per position). About a second
// on a small model. rounds: timed passes per position after a warm-up one,
// the median kept; past max_ms a position takes one (a large model's start
// is not held up). One timed pass per position was what serve used until
// 2026-12-06: on a 2-core Zen 5 guest its price at position 16 spread
// 0.82-1.46 ms a token over 12 starts at the AVX2 level, and the step
// budget keeps a share of that price for the whole run (docs/BENCHMARKS.md).
CostModel CalibratePrefill(Model& model, const CacheOptions& opt, size_t chunk_tokens = 32, double max_ms = 3000,
                           int rounds = 3);

// Runs a pass of `tokens` tokens, its first layer, from inside another
// pass's keep_going, so the buffers a nested pass uses (Model::Forward
// keeps a set per level: the engine runs a cache hit's step inside a
// paused one) are grown and touched before the first such step instead of
// during it: made at first use they cost that step page faults (an 8-token
// hit at depth 448 ran in 10.7 ms inside a paused step, 7.3-8.4 ms after,
// 6.7-7.9 outside one, on a 2-core Zen 5 guest).
void WarmNestedPass(Model& model, const CacheOptions& opt, size_t tokens);

// The median of up to `rounds` results of pass(), ms: at least one, and no
// more once out_of_time() says so (asked after each pass).
double MedianPassMs(const std::function<double()>& pass, int rounds, const std::function<bool()>& out_of_time);

// What a step costs by how many tokens it holds, at depth 0: the weights
// stream once per step whatever its size, and a small batch's matrix
// products run below the speed of a long chunk's, so a step of n tokens is
// neither n one-token steps nor n times a long chunk's per-token price
// (bench-135m Q8_0, Xeon with AVX-512, 2 threads: 1 token 3.2 ms, 64 tokens
// 0.67 ms per token, 256 tokens 0.57). Steps of 1, 2, 4, ... max_tokens
// tokens of one sequence (logits for the last: the prefill shape), the
// extra cost of one more row of logits (a decode step asks one per
// sequence), and the draw of a token from a row.
struct BatchCurve {
  std::vector<std::pair<double, double>> step_ms_by_tokens;  // (tokens in the step, ms)
  double logits_ms_per_row = 0;
  // A draw from one row of logits with the OpenAI API's defaults
  // (temperature 1, no top-k/top-p): the engine samples every row it asked for.
  double sample_ms_per_row = 0;
  double greedy_ms_per_row = 0;  // the same row at temperature 0 (argmax)
};
BatchCurve CalibrateBatchSizes(Model& model, const CacheOptions& opt, size_t max_tokens = 256);

}  // namespace pc
