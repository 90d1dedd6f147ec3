#include "server/chat_template.h"

namespace pc {

std::optional<ChatTemplate> ChatTemplateFromName(std::string_view name) {
  if (name == "chatml") return ChatTemplate::kChatML;
  if (name == "llama2") return ChatTemplate::kLlama2;
  if (name == "llama3") return ChatTemplate::kLlama3;
  if (name == "mistral") return ChatTemplate::kMistral;
  if (name == "zephyr") return ChatTemplate::kZephyr;
  return std::nullopt;
}

const char* ChatTemplateName(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::kChatML: return "chatml";
    case ChatTemplate::kLlama2: return "llama2";
    case ChatTemplate::kLlama3: return "llama3";
    case ChatTemplate::kMistral: return "mistral";
    case ChatTemplate::kZephyr: return "zephyr";
  }
  return "chatml";
}

std::optional<ChatTemplate> DetectChatTemplate(std::string_view jinja) {
  auto has = [&](std::string_view s) { return jinja.find(s) != std::string_view::npos; };
  if (has("<|im_start|>")) return ChatTemplate::kChatML;
  if (has("<|start_header_id|>")) return ChatTemplate::kLlama3;
  if (has("<|user|>") && has("<|assistant|>")) return ChatTemplate::kZephyr;
  if (has("[INST]") && has("<<SYS>>")) return ChatTemplate::kLlama2;
  if (has("[INST]")) return ChatTemplate::kMistral;
  return std::nullopt;
}

namespace {

bool IsSystem(const ChatMessage& m) { return m.role == "system" || m.role == "developer"; }

std::string RenderChatML(const std::vector<ChatMessage>& ms) {
  std::string out;
  for (const ChatMessage& m : ms) {
    out += "<|im_start|>" + std::string(IsSystem(m) ? "system" : m.role) + "\n" + m.content + "<|im_end|>\n";
  }
  return out + "<|im_start|>assistant\n";
}

std::string RenderLlama3(const std::vector<ChatMessage>& ms) {
  std::string out;
  for (const ChatMessage& m : ms) {
    out += "<|start_header_id|>" + std::string(IsSystem(m) ? "system" : m.role) + "<|end_header_id|>\n\n" + m.content +
           "<|eot_id|>";
  }
  return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

std::string RenderZephyr(const std::vector<ChatMessage>& ms) {
  std::string out;
  for (const ChatMessage& m : ms) out += "<|" + std::string(IsSystem(m) ? "system" : m.role) + "|>\n" + m.content + "</s>\n";
  return out + "<|assistant|>\n";
}

// Llama-2 and Mistral: user turns in [INST] ... [/INST], the system prompt
// folded into the first user turn (<<SYS>> block for Llama-2, a paragraph for
// Mistral), each finished exchange closed by </s> and the next opened by <s>.
std::string RenderInst(const std::vector<ChatMessage>& ms, bool llama2) {
  std::string system, out;
  bool first_user = true, need_bos = false;
  for (const ChatMessage& m : ms) {
    if (IsSystem(m)) {
      system += (system.empty() ? "" : "\n") + m.content;
      continue;
    }
    if (m.role == "assistant") {
      out += (llama2 ? " " : "") + m.content + "</s>";
      need_bos = true;
      continue;
    }
    std::string content = m.content;
    if (first_user && !system.empty()) {
      content = llama2 ? "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content : system + "\n\n" + content;
    }
    first_user = false;
    out += (need_bos ? "<s>" : "") + std::string("[INST] ") + content + " [/INST]";
    need_bos = false;
  }
  return out;
}

}  // namespace

std::string RenderChat(ChatTemplate t, const std::vector<ChatMessage>& messages) {
  switch (t) {
    case ChatTemplate::kChatML: return RenderChatML(messages);
    case ChatTemplate::kLlama3: return RenderLlama3(messages);
    case ChatTemplate::kZephyr: return RenderZephyr(messages);
    case ChatTemplate::kLlama2: return RenderInst(messages, true);
    case ChatTemplate::kMistral: return RenderInst(messages, false);
  }
  return RenderChatML(messages);
}

}  // namespace pc
