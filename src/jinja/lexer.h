// Template source -> tags and tokens. Lex cuts text from {{ }}, {% %} and
// {# #} tags and applies whitespace control as Jinja does with trim_blocks
// and lstrip_blocks on ('-' strips all whitespace on that side, '+' keeps
// it; a block or comment tag alone on its line takes the line's indent and
// its newline with it); comments are dropped. Tokenize cuts one tag's
// content into names, literals and operators for the parser (parser.h).
// Thread-safety: pure functions.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "jinja/value.h"

namespace pc::jinja {

struct Tag {
  char type;  // 't' text, 'v' {{ }}, 'b' {% %}
  std::string content;
  int line;
};

Result<std::vector<Tag>> Lex(std::string_view src);

struct Tok {
  enum Kind { kName, kString, kInt, kFloat, kOp, kEnd } kind;
  std::string text;
  Value value;
};

// line: the tag's line, for messages.
Result<std::vector<Tok>> Tokenize(std::string_view s, int line);

}  // namespace pc::jinja
