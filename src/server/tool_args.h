// Tool calls whose arguments are not one JSON value but one element per
// argument, read off the template like the rest of the call (tool_syntax.h):
//   Qwen3-Coder  <parameter=KEY>\nVALUE\n</parameter>\n
//   GLM 4.x      <arg_key>KEY</arg_key>\n<arg_value>VALUE</arg_value>\n
//   MiniMax M2   <parameter name="KEY">VALUE</parameter>\n
//   Gemma 4      KEY:<|"|>VALUE<|"|>  joined by ","  (strings quoted)
//   GigaChat 3.5 <X|parameter name="KEY" string="true">VALUE</X|parameter>
//                (string="false"> before a value that is not a string)
// An argument is key_before KEY key_after VALUE value_after, arguments are
// joined by sep; a string VALUE is written between str_open and str_close
// (raw text, or a JSON string when json_strings), any other value as its
// JSON text between other_open and other_close (most templates: nothing).
// Derived from three probe renders: one string argument, two, and one
// integer.
// Thread-safety: plain values and pure functions.
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "structured/sequence.h"

namespace pc {

// Matching a template's literal text in a reply: whitespace in the literal
// matches any run (or none); before a literal and around JSON punctuation
// the text may add whitespace of its own. kShort: the text ends first.
enum class MatchResult { kYes, kNo, kShort };
MatchResult MatchToolLiteral(std::string_view text, size_t* pos, std::string_view lit);
inline bool IsToolSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
inline bool IsJsonPunct(char c) { return c == '{' || c == '}' || c == '[' || c == ']' || c == ':' || c == ',' || c == '"'; }
inline size_t CommonToolPrefix(std::string_view a, std::string_view b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}
inline size_t CommonToolSuffix(std::string_view a, std::string_view b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[a.size() - 1 - n] == b[b.size() - 1 - n]) ++n;
  return n;
}

struct ArgSyntax {
  std::string key_before, key_after, value_after, sep;
  std::string str_open, str_close;
  std::string other_open, other_close;  // around a value that is not a string
  bool json_strings = false;
  // Whether the template prints lists and objects as JSON (else as Python's
  // repr, or in its own quotes): replies are read in any of these; a forced
  // call writes them as JSON, the one form a schema is enforced in.
  bool compound_json = true;

  // One argument as the template writes it.
  std::string Render(const std::string& key, const nlohmann::json& value) const;
  // The text that ends a value written raw (value_after's first non-space
  // run; empty when nothing follows a value but sep or the block's end).
  std::string Terminator() const;
  nlohmann::json Describe() const;
};

// The probe keys and string values (Derive's renders use them).
inline constexpr std::string_view kArgProbeKeys[2] = {"k_alpha", "k_beta"};
inline constexpr std::string_view kArgProbeValues[2] = {"sv_alpha", "sv_beta"};

struct ArgProbe {
  ArgSyntax syntax;
  std::string region;  // the call region with {k_alpha: "sv_alpha"}
  size_t block_begin = 0, block_end = 0;  // where that argument went in it
};

// region(args): the call region of one call to the probe function with those
// arguments (an object), or an error. Fails with a reason when the renders
// do not show one element per argument.
Result<ArgProbe> DeriveArgSyntax(const std::function<Result<std::string>(const nlohmann::json&)>& region);

// An argument block from pos. params: the tool's parameters schema (for
// which values are strings; null: values that parse as JSON are JSON).
// Returns the position after the block, or npos when the text ends inside it
// (*short_text) or does not match; *args_json gets the arguments as a JSON
// object's text, closed only when the block is whole, so that the text of
// a block cut short is a prefix of the whole one's.
size_t ParseArgBlock(const ArgSyntax& s, std::string_view text, size_t pos, const nlohmann::json* params,
                     std::string* args_json, bool* short_text);

// Edges from `from` to `to` writing an argument block for a tool's
// parameters: properties in the schema's order, required ones always,
// optional ones or not; strings free text up to the terminator (their enum
// values when they have one), other values JSON of their own schema.
Status AddArgBlock(const ArgSyntax& s, structured::SeqGrammar* g, int32_t from, int32_t to,
                   const nlohmann::json& params);

}  // namespace pc
