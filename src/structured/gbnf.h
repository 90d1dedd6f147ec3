// llama.cpp's GBNF grammars: the second front end of the structured-output
// engine (the server's `grammar` field). Text is compiled into rules of
// alternatives of elements (a code-point class, or a reference to a rule);
// repetitions (* + ? {m,n}) and groups become helper rules. A GbnfMatcher
// runs the grammar as a pushdown automaton over bytes: a set of stacks of
// positions, advanced per code point (UTF-8 decoded as bytes arrive, with a
// partial code point checked against what the stacks accept).
//
// Syntax: `name ::= alternatives` rules separated by newlines (inside
// parentheses a rule continues over lines), `root` the start; elements are
// "literals" (escapes \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH), [classes]
// with ranges and ^, `.` (any code point), rule names, ( groups ), and the
// postfixes * + ? {m} {m,} {m,n}; # starts a comment. Refused with a message:
// undefined rules, a missing root, left recursion, token references
// (<[id]>), and grammars past the limits below.
//
// Thread-safety: a GbnfGrammar is immutable; a GbnfMatcher is a value.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace pc::structured {

struct GbnfElem {
  int32_t rule = -1;          // a rule reference, or
  uint32_t ranges_begin = 0;  // a class: [begin, end) in GbnfGrammar::ranges
  uint32_t ranges_end = 0;
  bool negate = false;
  bool is_rule() const { return rule >= 0; }
};

struct GbnfGrammar {
  struct Alt {
    std::vector<GbnfElem> elems;
  };
  struct Rule {
    std::string name;
    std::vector<Alt> alts;
  };
  std::vector<Rule> rules;
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // inclusive code-point ranges
  int32_t root = -1;
  bool Matches(const GbnfElem& e, uint32_t cp) const;
  // Whether some code point in [lo, hi] matches e.
  bool MatchesAny(const GbnfElem& e, uint32_t lo, uint32_t hi) const;
};

struct GbnfLimits {
  size_t max_text_bytes = 1 << 20;
  size_t max_rules = 20000;
  size_t max_elems = 200000;
  int max_repeat = 1000;  // m and n in {m,n}
};

Result<std::shared_ptr<const GbnfGrammar>> CompileGbnf(std::string_view text, const GbnfLimits& limits = {});

class GbnfMatcher {
 public:
  static constexpr size_t kMaxStacks = 1024;  // ambiguity bound: extra stacks are dropped
  static constexpr size_t kMaxDepth = 512;     // a stack deeper than this is dropped
  GbnfMatcher() = default;
  explicit GbnfMatcher(const GbnfGrammar* g);

  bool Advance(uint8_t byte, GbnfMatcher* out) const;
  bool Consume(std::string_view bytes);
  bool CanEnd() const;    // a whole sentence so far
  bool Complete() const;  // whole, and nothing may follow
  bool dead() const { return stacks_.empty(); }

 private:
  struct Pos {
    int32_t rule, alt, elem;
    bool operator==(const Pos&) const = default;
    bool operator<(const Pos& o) const {
      return rule != o.rule ? rule < o.rule : alt != o.alt ? alt < o.alt : elem < o.elem;
    }
  };
  using Stack = std::vector<Pos>;  // back(): the element to match next
  void Expand(Stack stack, std::vector<Stack>* out, int depth) const;
  bool AdvanceCodePoint(uint32_t cp, GbnfMatcher* out) const;
  void Normalize();

  const GbnfGrammar* g_ = nullptr;
  std::vector<Stack> stacks_;  // each ends at a class element, or is empty (accept)
  uint32_t cp_ = 0;            // a code point being read: its bits so far
  uint8_t need_ = 0;           // continuation bytes still owed
  uint8_t len_ = 0;            // its whole length in bytes
};

}  // namespace pc::structured
