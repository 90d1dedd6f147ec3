// Reasoning apart from content, fed as a stream would feed it: markers cut
// at every byte, blocks opened by the reply or left open by the prompt.
#include <gtest/gtest.h>

#include "server/reasoning_split.h"

namespace pc {
namespace {

// Feeds text in pieces of `step` bytes; returns (reasoning, content).
std::pair<std::string, std::string> Split(const std::string& text, size_t step, bool inside,
                                          const std::string& open = "<think>", const std::string& close = "</think>") {
  ReasoningSplitter s(open, close, inside);
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

}  // namespace
}  // namespace pc
