// Constrained decoding in the engine: a request's JSON-schema state masks
// the logits before sampling (refused tokens at -inf, end of generation
// only where the value may end) and advances by each sampled token.
// Thread-safety: one per engine, used by its loop thread only.
#pragma once
#include <memory>
#include <span>
#include <vector>

#include "structured/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace pc {

class GrammarMasker {
 public:
  explicit GrammarMasker(const Tokenizer& tok);
  // *out = logits with what `state` refuses at -inf; false if it allows
  // nothing at all (a schema with no way on: the caller fails the request).
  bool Mask(const structured::JsonMatcher& state, std::span<const float> logits, std::vector<float>* out);
  // Advances state past token; true when the value is complete (nothing but
  // the end of generation may follow).
  bool Advance(structured::JsonMatcher* state, int32_t token) const;

 private:
  const Tokenizer& tok_;
  structured::TokenIndex index_;
  structured::MaskComputer masks_;
  structured::TokenMask mask_;
};

}  // namespace pc
