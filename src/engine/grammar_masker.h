// Constrained decoding in the engine: a request's grammar state (a JSON
// schema, or a tool call's literal-and-JSON sequence: structured/sequence.h)
// masks the logits before sampling (refused tokens at -inf, end of
// generation only where the sentence may end) and advances by each sampled
// token. Control tokens stand for their text where a literal spells it.
// Thread-safety: one per engine, used by its loop thread only.
#pragma once
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "structured/sequence.h"
#include "tokenizer/tokenizer.h"

namespace pc {

class GrammarMasker {
 public:
  explicit GrammarMasker(const Tokenizer& tok);
  // *out = logits with what `state` refuses at -inf; false if it allows
  // nothing at all (a grammar with no way on: the caller fails the request).
  bool Mask(const structured::SeqMatcher& state, std::span<const float> logits, std::vector<float>* out);
  // Advances state past token; true when the sentence is complete (nothing
  // but the end of generation may follow).
  bool Advance(structured::SeqMatcher* state, int32_t token) const;
  // The bytes a token stands for in a grammar (control tokens: their text).
  std::string_view Bytes(int32_t token) const { return masks_.Bytes(token); }

 private:
  const Tokenizer& tok_;
  structured::TokenIndex index_;
  structured::SeqMaskComputer masks_;
  structured::TokenMask mask_;
};

}  // namespace pc
