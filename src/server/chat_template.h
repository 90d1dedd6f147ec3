// Chat templates: turns OpenAI messages into the prompt text a chat model was
// trained on. We recognise the common families from the model's
// `tokenizer.chat_template` (a Jinja string we do not execute) by their
// marker tokens; `serve --chat-template NAME` overrides the choice.
// Templates leave out the leading BOS: the tokenizer adds it when the
// vocabulary asks for one. The rendered text holds control tokens such as
// <|im_start|>, so it is encoded with parse_special.
// Thread-safety: pure functions.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pc {

enum class ChatTemplate { kChatML, kLlama2, kLlama3, kMistral, kZephyr };

struct ChatMessage {
  std::string role;  // system, user, assistant (developer is treated as system)
  std::string content;
};

// "chatml", "llama2", "llama3", "mistral", "zephyr".
std::optional<ChatTemplate> ChatTemplateFromName(std::string_view name);
const char* ChatTemplateName(ChatTemplate t);
// The family of a Jinja template string; nullopt if none matches.
std::optional<ChatTemplate> DetectChatTemplate(std::string_view jinja);
// Prompt text for the messages, ending where the assistant's reply begins.
std::string RenderChat(ChatTemplate t, const std::vector<ChatMessage>& messages);

}  // namespace pc
