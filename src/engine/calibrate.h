// Prefill cost measured on the model itself: the curve the tier stack's
// load-or-recompute decision and the step budget's prices start from. It
// runs forward passes, so it lives above the model (the cache below only
// receives the numbers). Thread-safety: uses the model; call before the
// engine starts.
#pragma once
#include "kvcache/tier_stack.h"
#include "model/forward.h"

namespace pc {

// Times prefill of a chunk of tokens at several positions (the K/V behind
// each position need not be meaningful for timing): position 0 and the
// deepest always, the others until max_ms have passed; then one-token steps
// at position 0 and the deepest (the K/V pass per position). About a second
// on a small model.
CostModel CalibratePrefill(Model& model, const CacheOptions& opt, size_t chunk_tokens = 32, double max_ms = 3000);

}  // namespace pc
