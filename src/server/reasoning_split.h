// Reasoning apart from content in a generated chat reply: the text inside
// the family's reasoning block (server/reasoning_block.h: `<think>` ...
// `</think>`, `[THINK]` ... `[/THINK]`, ...) goes to reasoning_content, the
// rest to content, as text streams in (a marker may arrive split across
// tokens: its possible beginning is held back until it is decided).
//   - A reply may open the block first thing (after whitespace); a prompt
//     that ends inside an open block (a template that opens it for the
//     model) starts the reply inside.
//   - Whitespace right after the close is dropped from the content, and so
//     is the text the template writes between the block and the answer
//     (`trail`: gpt-oss's `<|start|>assistant<|channel|>final<|message|>`)
//     when the reply writes it; other text there (a tool call) is content.
//   - A reply that answers without a block may open with `direct` (the
//     trail less what the generation prompt already wrote: gpt-oss's
//     `<|channel|>final<|message|>`), dropped as well.
// Thread-safety: one per response.
#pragma once
#include <string>
#include <string_view>
#include <utility>

namespace pc {

class ReasoningSplitter {
 public:
  ReasoningSplitter(std::string open, std::string close, bool starts_inside, std::string trail = {},
                    std::string direct = {});
  // (reasoning, content) released by this text.
  std::pair<std::string, std::string> Push(std::string_view text);
  // What is held back, at the end of the reply.
  std::pair<std::string, std::string> Flush();

 private:
  enum class State { kBefore, kInside, kAfterClose, kAfterTrail, kContent };
  // Drops `lit` at the start of held_ (true, next state set); false with
  // *wait when held_ may still become it.
  bool Take(const std::string& lit, State next, bool* wait);
  std::string open_, close_, trail_, direct_;
  State state_;
  std::string held_;
};

}  // namespace pc
