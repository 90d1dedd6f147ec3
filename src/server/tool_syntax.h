// Tool calls as the model's own chat template writes them. The syntax is not
// looked up by family: it is read off the template by rendering probe
// conversations (an assistant turn with one call, with two calls, and with
// plain content) and comparing the texts. A call's region is then
//   head  unit(call 1)  sep  unit(call 2) ...  tail
// where a unit is literal text with holes for the function name, the
// arguments (a JSON value) and, where the template prints it, the call id:
//   Hermes/Qwen: <tool_call>\n{"name": NAME, "arguments": ARGS}\n</tool_call>
//   Llama 3.x:   {"name": "NAME", "parameters": ARGS}
//   Mistral:     [TOOL_CALLS][ {"name": "NAME", "arguments": ARGS, "id": "ID"} ]
// Templates that write one element per argument instead of one JSON value
// (Qwen3-Coder, GLM, MiniMax M2, Seed-OSS, Gemma 4, ...) get an ARGS hole of
// that form, derived the same way (tool_args.h); replies' arguments are
// turned into a JSON object. A call's running number where the template
// prints one (Kimi K2) is a hole of its own.
//
// The same syntax parses replies (whitespace around JSON punctuation is
// forgiven) and builds the grammar that forces a call (structured/sequence).
// Thread-safety: immutable after Derive; all methods are const.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "server/chat_template.h"
#include "server/tool_args.h"
#include "structured/sequence.h"

namespace pc {

struct ToolCall {
  std::string id, name;
  std::string arguments;  // the JSON text as the model wrote it
};

// A reasoning model's block before its calls: required when the prompt left
// it open (inside), else optional; free text up to its close marker.
struct ToolReasoning {
  std::string open, close;
  bool inside = false;
};

class ToolSyntax {
 public:
  // kIndex: the call's number in its turn (0, 1, ...; Kimi K2's functions.NAME:0).
  enum class Hole : uint8_t { kName, kArgs, kId, kIndex };

  // Reads the syntax off a template; !supported() when it cannot (reason()).
  static ToolSyntax Derive(const ChatTemplate& t);

  bool supported() const { return !unit_holes_.empty(); }
  const std::string& reason() const { return reason_; }
  // Whether the template wants function.arguments as an object (clients
  // send a JSON string: it is parsed before rendering), else as the string.
  bool args_as_object() const { return args_as_object_; }
  // The bytes that start a call in a reply (its first non-space literal;
  // the separator between calls when the unit starts with the name).
  const std::string& trigger() const { return trigger_; }
  // The unit starts with the name (functionary's "NAME\nARGS" after the
  // ">>>" its generation prompt ends with): a reply that begins with a
  // tool's name and the unit's next literal is a call, and later calls follow
  // the separator (the trigger).
  bool anchored() const { return anchored_; }
  // For an anchored syntax, whether text (a reply's beginning) starts with a
  // call to one of tools (null: any name): 1 yes, 0 no, -1 not decided yet.
  int StartsWithCall(std::string_view text, const nlohmann::json* tools) const;
  // Where the call whose trigger is at trigger_at starts: earlier than the
  // trigger when header words of the unit (below) precede it.
  size_t CallStart(std::string_view text, size_t trigger_at) const;
  // The first byte a stream must hold back: the text from there on could
  // still begin a call (a prefix of the trigger, or header words before it).
  size_t HoldFrom(std::string_view text) const;
  // The parts as JSON (head, unit literals and holes, sep, tail), for
  // debugging templates.
  nlohmann::json Describe() const;

  struct Parsed {
    std::string content;          // the text before the first call (and any after the calls)
    std::vector<ToolCall> calls;  // complete calls
    // Streaming: the call being written (name known), its arguments so far.
    bool partial = false;
    ToolCall partial_call;
  };
  // A reply's content and calls. A call cut short (no closing literal) is
  // kept when its arguments are a whole JSON value; a reply where no call
  // parses is all content. ids come from make_id(i) unless the text has one.
  // tools: the request's (each argument written as an element is typed by
  // its tool's parameters: a string parameter's value stays a string).
  Parsed Parse(std::string_view text, const std::function<std::string(size_t)>& make_id,
               const nlohmann::json* tools = nullptr) const;
  // One element per argument (Qwen3-Coder's <parameter=...>), else null.
  const ArgSyntax* per_argument() const { return args_ ? &*args_ : nullptr; }

  // The grammar of one or more calls (one when !parallel) to the tools
  // named in `names` (empty: any of `tools`), arguments validated against
  // each tool's parameters; ids: the call ids to write where the syntax has
  // them. Errors name the tool whose parameters cannot be enforced.
  using Reasoning = ToolReasoning;
  Result<std::shared_ptr<const structured::SeqGrammar>> Grammar(const nlohmann::json& tools, const std::string& only,
                                                                bool parallel, const std::vector<std::string>& ids,
                                                                const Reasoning& reasoning = {}) const;

 private:
  struct Unit;
  bool MatchLiteral(std::string_view text, size_t* pos, std::string_view lit) const;
  size_t ParseUnit(std::string_view text, size_t pos, ToolCall* call, bool* partial, const nlohmann::json* tools) const;

  std::string head_, sep_, tail_;
  std::vector<std::string> unit_lits_;  // unit_holes_.size() + 1 literals around the holes
  bool ProbeRegions(const ChatTemplate& t, std::string* one, std::string* two);
  bool ArgsHole(const ChatTemplate& t, std::string* one, std::string* two, size_t* a0, size_t* a1,
                std::string* beta_args);
  std::vector<Hole> unit_holes_;
  std::string trigger_, reason_;
  // Header words: when the literal between the name and the arguments ends
  // in a tag (gpt-oss's "<|channel|>commentary json<|message|>"), replies
  // may write its words in another place or with other tags among them
  // ("<|channel|>commentary to=functions.f <|constrain|>json<|message|>"):
  // after the name, anything short on one line up to the tag is taken as
  // that literal, and the words right before the trigger belong to the call.
  bool anchored_ = false;
  size_t loose_lit_ = SIZE_MAX;  // index into unit_lits_ (SIZE_MAX: none)
  std::string loose_tag_;
  std::vector<std::string> lead_words_;
  void DeriveHeaderWords();
  size_t MatchLooseHeader(std::string_view text, size_t pos, bool* short_text) const;
  bool args_as_object_ = true;
  std::optional<ArgSyntax> args_;  // arguments written one element each
  bool multi_ = false;       // the template writes several calls in one turn
  int max_whitespace_ = 2;   // per gap inside arguments (structured/sequence.h)
};

}  // namespace pc
