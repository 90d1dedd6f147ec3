// The reasoning block of a chat template, read off the template itself.
//
// Where a template shows reasoning, its markers are found by probe renders
// (DeriveReasoningStyle), never by a table of known families:
//   A. the template renders a message's reasoning field: an assistant turn
//      rendered with a probe text as `reasoning_content` (or `thinking`, as
//      gpt-oss reads it) shows the open marker right before the probe and
//      the close right after it;
//   B. it does not, but its generation prompt ends with an open tag whose
//      closing twin (`<x>` / `</x>`, `[X]` / `[/X]`) the source also spells,
//      or one named for reasoning as in C (DeepSeek R1, QwQ: `<think>\n`);
//   C. neither, but the source spells a tag pair named for reasoning (a name
//      holding "think", "thought" or "reason": Granite 3.3's `<think>`,
//      Devstral's `[THINK]`);
//   D. neither, but the generation prompt with `enable_thinking: false` ends
//      with an empty block the default one lacks (Gemma 4's thought channel).
// Otherwise the template has no reasoning block.
//
// Continuing a reply (a chat whose last message is the assistant's: the
// prompt ends right after that content) on a template with a block: the
// prefilled text is the answer, so its turn shows a closed, empty block
// first, unless the message brings reasoning of its own. Under A the
// template spells that block: the turn is rendered with the probe as its
// reasoning and the probe erased (whitespace the template puts between the
// turn's header, as the generation prompt ends it, and the block is dropped:
// GLM's "\n<think>"). Under B-D a head that ends inside an open block gets
// its close; a head ending with an empty block of the template's own gets
// the derived empty block in its place; any other head gets the empty block
// appended. (The reference engine keys this on model families; it agrees on
// every shared template except LFM2 and Kimi K2, whose templates show no
// reasoning at all and get none here: docs/TEMPLATES.md.)
// Thread-safety: pure functions.
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace pc {

struct ReasoningStyle {
  std::string open, close;    // the block's markers; empty: the template has none
  std::string empty_block;    // B-D: the closed, empty block written before a continued reply
  bool rendered = false;      // A: the template renders a message's reasoning field
  bool via_thinking_field = false;  // A, through `thinking` only (gpt-oss), not `reasoning_content`
  bool drop_space_before = false;   // A: whitespace between the turn header and the block goes
  // For splitting generated replies (server/reasoning_split.h): the close's
  // first tag alone (`close` grows over the tags after it until it is
  // unique in a render: gpt-oss's `<|end|><|start|>assistant<|channel|>`);
  // under A the text the template writes between that tag and the answer
  // (`trail`: `<|start|>assistant<|channel|>final<|message|>`); and, with
  // or without a block, the header a plain assistant turn writes between
  // the generation prompt and its content (`direct`: functionary's `all\n`,
  // gpt-oss's `<|channel|>final<|message|>`), which opens a reply that
  // answers at once and is not content.
  std::string split_close, trail, direct;
};

// Renders messages (ordered JSON) with add_generation_prompt and extra
// variables, as ChatTemplate does.
using TemplateRender =
    std::function<Result<std::string>(const nlohmann::ordered_json&, bool, const nlohmann::ordered_json&)>;

// The style the template shows (rules A-D above); source: its Jinja text.
ReasoningStyle DeriveReasoningStyle(std::string_view source, const TemplateRender& render);

// True when the final message already carries reasoning of its own.
bool BringsOwnReasoning(const nlohmann::ordered_json& message, const ReasoningStyle& style);

// The text put in the reasoning field for probe renders.
inline constexpr std::string_view kReasoningProbe = "PCREASONINGPROBE";

// Rule A: probe_render is the continued prompt rendered with kReasoningProbe
// as the final message's reasoning. Returns it with the probe erased (and
// the whitespace before the block dropped where the style says), or "" when
// the probe is not in it.
std::string EraseReasoningProbe(std::string probe_render, const ReasoningStyle& style);

// Rules B-D: head is the continued prompt up to (not including) the content.
// Returns the head with a closed, empty block at its end.
std::string CloseReasoningBlock(std::string head, const ReasoningStyle& style);

}  // namespace pc
