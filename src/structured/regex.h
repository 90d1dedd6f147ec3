// Regular expressions (the ECMA-262 subset JSON Schema's `pattern` and our
// string formats use) compiled to a deterministic automaton over UTF-8 bytes,
// for constrained decoding: a prefix of a string is viable exactly when the
// automaton is not dead after it (states that cannot reach acceptance are
// pruned at compile time).
//
// Supported: literals (UTF-8), escapes (\d \w \s and their negations, \n \t
// \r \f \v \0 \xHH \uHHHH \u{H..}, escaped punctuation), classes with ranges
// and negation, `.`, groups ((...), (?:...), (?<name>...)), alternation,
// quantifiers * + ? {n} {n,} {n,m} (lazy forms: same language), and the
// anchors ^ and $. Not supported (an error naming it): backreferences,
// lookaround, word boundaries, flags.
//
// Thread-safety: a compiled ByteDfa is immutable; share it freely.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace pc::structured {

class ByteDfa {
 public:
  static constexpr int32_t kDead = -1;
  static constexpr int32_t kStart = 0;
  int32_t Next(int32_t state, uint8_t byte) const { return next_[size_t(state) * n_classes_ + byte_class_[byte]]; }
  bool Accepting(int32_t state) const { return accept_[size_t(state)] != 0; }
  int32_t n_states() const { return int32_t(accept_.size()); }
  // The fewest code points from state to acceptance (UTF-8 continuation
  // bytes count nothing).
  uint32_t MinCharsToAccept(int32_t state) const { return min_chars_[size_t(state)]; }
  // Runs the whole of text from the start state.
  bool Matches(std::string_view text) const;

 private:
  friend class DfaBuilder;
  std::array<uint8_t, 256> byte_class_{};
  int n_classes_ = 1;
  std::vector<int32_t> next_;   // [state][class]
  std::vector<uint8_t> accept_;  // [state]
  std::vector<uint32_t> min_chars_;  // [state]
};

struct RegexLimits {
  size_t max_pattern_bytes = 4096;
  size_t max_nfa_states = 50000;
  size_t max_dfa_states = 3000;
};

// search: JSON Schema semantics (the pattern may match anywhere in the
// string: `^`/`$` anchor it); otherwise the whole string must match.
Result<ByteDfa> CompileRegex(std::string_view pattern, bool search, const RegexLimits& limits = {});

}  // namespace pc::structured
