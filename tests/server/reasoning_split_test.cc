// Reasoning apart from content, fed as a stream would feed it: markers cut
// at every byte, blocks opened by the reply or left open by the prompt.
#include <gtest/gtest.h>

#include "server/reasoning_split.h"

namespace pc {
namespace {

// Feeds text in pieces of `step` bytes; returns (reasoning, content).
std::pair<std::string, std::string> Split(const std::string& text, size_t step, bool inside,
                                          const std::string& open = "<think>", const std::string& close = "</think>",
                                          const std::string& trail = "", const std::string& direct = "") {
  ReasoningSplitter s(open, close, inside, trail, direct);
  std::string r, c;
  for (size_t i = 0; i < text.size(); i += step) {
    auto [a, b] = s.Push(text.substr(i, step));
    r += a;
    c += b;
  }
  auto [a, b] = s.Flush();
  return {r + a, c + b};
}

TEST(ReasoningSplit, EveryCutGivesTheSameParts) {
  const std::pair<std::string, std::pair<std::string, std::string>> cases[] = {
      {"<think>plan a, b</think>\n\nThe answer.", {"plan a, b", "The answer."}},
      {"\n<think>x < y </thin k</think>Done", {"x < y </thin k", "Done"}},
      {"No block here <think> later", {"", "No block here <think> later"}},
      {"<thin", {"", "<thin"}},  // an unfinished marker at the end is content
      {"<think>still thinking", {"still thinking", ""}},
  };
  for (const auto& [text, want] : cases)
    for (size_t step = 1; step <= text.size(); ++step) EXPECT_EQ(Split(text, step, false), want) << text << " step " << step;
}

TEST(ReasoningSplit, APromptLeftOpenStartsInside) {
  for (size_t step = 1; step < 8; ++step) {
    EXPECT_EQ(Split("weigh it[/THINK] Yes.", step, true, "[THINK]", "[/THINK]"), std::make_pair(std::string("weigh it"), std::string("Yes.")));
    EXPECT_EQ(Split("only reasoning", step, true), std::make_pair(std::string("only reasoning"), std::string("")));
  }
}

// gpt-oss's channels: the template writes a header between the block and the
// answer (the trail), and a reply may answer without a block (direct); a
// different header there (a tool call) stays content for the call parser.
TEST(ReasoningSplit, TheHeaderBeforeTheAnswerIsDropped) {
  const std::string open = "<|channel|>analysis<|message|>", close = "<|end|>";
  const std::string trail = "<|start|>assistant<|channel|>final<|message|>", direct = "<|channel|>final<|message|>";
  const std::string call = "<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}";
  const std::pair<std::string, std::pair<std::string, std::string>> cases[] = {
      {open + "weigh it<|end|>" + trail + "Yes.", {"weigh it", "Yes."}},
      {direct + "Yes.", {"", "Yes."}},
      {open + "t<|end|>" + call, {"t", call}},
      {open + "t<|end|><|start|>assistant", {"t", "<|start|>assistant"}},  // ended inside the header
      {"<|channel|>fin", {"", "<|channel|>fin"}},
      {"Plain words.", {"", "Plain words."}},
  };
  for (const auto& [text, want] : cases)
    for (size_t step = 1; step <= text.size(); ++step)
      EXPECT_EQ(Split(text, step, false, open, close, trail, direct), want) << text << " step " << step;
}

}  // namespace
}  // namespace pc
