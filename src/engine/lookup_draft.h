// Prompt-lookup drafts: guesses of a request's next tokens taken from its
// own tokens (prompt and output so far), verified by the model in one
// forward pass over [last token, drafts...] (engine.cc). Outputs that copy
// spans of their prompt (answers quoting a document, code edits, extraction)
// then advance several tokens per step; the model still decides every
// token (each is sampled from its own logits, in order, with the request's
// sampler), so the output is the one plain decoding gives, drafts or not.
//
// FindLookupDraft: the last n tokens (n from max_ngram down to min_ngram,
// longest first) are searched for earlier in the sequence, most recent
// occurrence first; the tokens that followed it are the draft.
//
// DraftController decides how many to draft, per request: a drafted token
// at depth i (1-based) is used only if the i - 1 before it were accepted,
// so with a per-token acceptance rate a it pays when a^i exceeds what one
// more verified token costs relative to a decode step (cost_ratio: prefill
// per token over a decode step's time; a fraction on a CPU, where decode
// reads all weights per token). The rate is a moving average of what this
// request accepted; when not even one token pays, drafting pauses for a
// number of steps that doubles on every failed retry.
// Thread-safety: pure functions; a controller belongs to one request.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace pc {

struct DraftOptions {
  size_t max_tokens = 0;  // drafted tokens per step at most; 0: drafting off
  size_t max_ngram = 4;   // lookup key lengths tried, longest first
  size_t min_ngram = 1;
};

// "none" or "lookup[:N]" (N drafted tokens at most, default 8).
Result<DraftOptions> ParseDraftSpec(const std::string& spec);

// Up to max_tokens tokens that followed the most recent earlier occurrence
// of tokens' last n tokens (see above); empty when nothing matches.
std::vector<int32_t> FindLookupDraft(std::span<const int32_t> tokens, const DraftOptions& opt, size_t max_tokens);

class DraftController {
 public:
  explicit DraftController(size_t max_tokens) : max_tokens_(max_tokens) {}

  // Tokens to draft this step (0: skip it), given what one verified token
  // costs relative to a decode step. Counts a skipped step.
  size_t Want(double cost_ratio);
  // A verification of `drafted` tokens accepted the first `accepted`.
  void Observe(size_t drafted, size_t accepted);
  double acceptance() const { return rate_; }

 private:
  size_t max_tokens_;
  double rate_ = 0.8;  // per-token acceptance, optimistic until measured
  size_t pause_steps_ = 0, pause_len_ = 4;
  bool probe_due_ = false;
};

}  // namespace pc
