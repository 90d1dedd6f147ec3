#include "server/reasoning_block.h"

#include <array>

namespace pc {
namespace {

// Families by the markers their templates contain; the first match wins.
// The fixed spellings are the reference engine's (renders.jsonl); for the
// plain <think> families the template's own rendering of an empty
// `reasoning_content` wins where it has one (Qwen3 and MiniCPM write
// "<think>\n\n</think>\n\n", Bielik "<think>\n\n</think>\n").
struct Family {
  std::array<const char*, 2> has;  // all present (nullptr: unused)
  const char* lacks;               // absent (nullptr: unused)
  ReasoningStyle style;
};

const Family kFamilies[] = {
    // gpt-oss (harmony): reasoning is the "analysis" channel's message.
    {{"<|channel|>analysis", nullptr}, nullptr, {"<|channel|>analysis", "<|end|>", "", false, true, false}},
    // ByteDance Seed-OSS.
    {{"<seed:think>", nullptr}, nullptr, {"<seed:think>", "</seed:think>", "<seed:think></seed:think>\n", false, false, false}},
    // Gemma 4: the thought channel.
    {{"<|channel>thought", nullptr}, nullptr, {"<|channel>thought", "<channel|>", "<|channel>thought\n<channel|>", false, false, false}},
    // GLM 4.5/4.6: the block follows `<|assistant|>` directly.
    {{"<|assistant|>", "<think>"}, nullptr, {"<think>", "</think>", "<think></think>\n", false, false, true}},
    // LFM2 and Kimi K2 templates do not spell the block; their models use it.
    {{"<|tool_list_start|>", nullptr}, nullptr, {"<think>", "</think>", "<think></think>", false, false, false}},
    {{"<|im_middle|>", nullptr}, nullptr, {"<think>", "</think>", "<think></think>", false, false, false}},
    // Devstral (Mistral's tool format without call ids): [THINK] blocks.
    {{"[SYSTEM_PROMPT]", "[ARGS]"}, "[CALL_ID]", {"[THINK]", "[/THINK]", "[THINK][/THINK]", false, false, false}},
    // Every other template that writes <think> (Qwen3, QwQ, DeepSeek R1,
    // SmolLM3, Granite 3.3, MiniMax M2, Nemotron, Bielik, MiniCPM, ...).
    {{"<think>", nullptr}, nullptr, {"<think>", "</think>", "<think></think>", true, false, false}},
};

bool OnlySpace(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

// The empty block as the template renders it: the probe text from the
// family's open marker to the content, with the probe marker removed.
std::string BlockFromProbe(std::string_view probe, std::string_view content, const ReasoningStyle& style) {
  const size_t mark = probe.find(kReasoningProbe);
  if (mark == std::string_view::npos || probe.size() < content.size() ||
      probe.substr(probe.size() - content.size()) != content) {
    return "";
  }
  const size_t open = probe.rfind(style.open, mark);
  const size_t end = probe.size() - content.size();
  if (open == std::string_view::npos || end < mark + kReasoningProbe.size()) return "";
  std::string block(probe.substr(open, end - open));
  block.erase(mark - open, kReasoningProbe.size());
  if (block.find(style.close) == std::string::npos) return "";
  return block;
}

}  // namespace

ReasoningStyle ReasoningStyleOf(std::string_view src) {
  for (const Family& f : kFamilies) {
    bool match = f.lacks == nullptr || src.find(f.lacks) == std::string_view::npos;
    for (const char* s : f.has) match = match && (s == nullptr || src.find(s) != std::string_view::npos);
    if (match) return f.style;
  }
  return {};
}

bool BringsOwnReasoning(const nlohmann::ordered_json& m, const ReasoningStyle& style) {
  for (const char* key : {"reasoning_content", "thinking"}) {
    if (m.contains(key) && m[key].is_string() && !m[key].get<std::string>().empty()) return true;
  }
  if (style.via_thinking_field && m.contains("thinking")) return true;
  const auto c = m.find("content");
  return c != m.end() && c->is_string() && !style.close.empty() &&
         c->get<std::string>().find(style.close) != std::string::npos;
}

std::string CloseReasoningBlock(std::string head, std::string_view content, std::string_view probe,
                                const ReasoningStyle& style) {
  if (style.open.empty() || style.via_thinking_field) return head;
  const size_t open = head.rfind(style.open);
  if (open != std::string::npos) {
    const std::string_view after = std::string_view(head).substr(open + style.open.size());
    // The header opened a block the template leaves open: close it.
    if (OnlySpace(after)) return head + style.close;
    // The template rendered an empty block of its own: replaced below.
    const size_t close = after.find(style.close);
    if (close != std::string_view::npos && OnlySpace(after.substr(close + style.close.size()))) {
      head.erase(open);
      if (style.drop_space_before) {
        while (!head.empty() && OnlySpace(std::string_view(head).substr(head.size() - 1))) head.pop_back();
      }
    }
  }
  std::string block = style.prefer_probe ? BlockFromProbe(probe, content, style) : "";
  if (block.empty()) block = style.fixed_block;
  return head + block;
}

}  // namespace pc
