// The reasoning block of a continued reply.
//
// A chat whose last message is the assistant's is continued: the prompt ends
// right after that message's content (a prefilled reply). On a model that
// reasons before it answers, the prefilled text is the answer, so its turn
// must show a reasoning block that is already closed; otherwise the model
// takes the prefilled answer for the start of its reasoning. Templates do
// not all render such a block for a message that carries no reasoning, so,
// as the reference engine does (../shared/templates/renders.jsonl), the
// block is written in the family's own spelling between the turn's header
// and the content:
//   - a header that ends inside an open block (`<think>\n`) gets its close;
//   - a family whose template renders a message's `reasoning_content` gets
//     the template's own rendering of an empty one (a probe render with a
//     marker text, the marker then removed);
//   - gpt-oss (harmony) gets an empty `thinking` field, which its template
//     renders as an empty analysis message;
//   - the other families named in kFamilies get their fixed spelling.
// A message that brings its own reasoning (a `reasoning_content` or
// `thinking` field, or `</think>` in its content) is left as it is.
// Thread-safety: pure functions.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace pc {

struct ReasoningStyle {
  std::string open, close;  // the block's markers; empty: no reasoning family
  std::string fixed_block;  // the empty block in the family's fixed spelling
  bool prefer_probe = false;  // the template's own spelling of an empty block, when it has one, wins
  bool via_thinking_field = false;
  bool drop_space_before = false;  // the block replaces the space before it (GLM)
};

// The style a chat template's source implies (matched on its markers).
ReasoningStyle ReasoningStyleOf(std::string_view template_source);

// True when the final message already carries reasoning of its own.
bool BringsOwnReasoning(const nlohmann::ordered_json& message, const ReasoningStyle& style);

// The marker text put in `reasoning_content` for the probe render.
inline constexpr std::string_view kReasoningProbe = "PCREASONINGPROBE";

// head: the continued prompt up to (not including) the content. probe: the
// same prompt rendered with kReasoningProbe as the message's reasoning
// (empty when the template does not render it). Returns the new head.
std::string CloseReasoningBlock(std::string head, std::string_view content, std::string_view probe,
                                const ReasoningStyle& style);

}  // namespace pc
