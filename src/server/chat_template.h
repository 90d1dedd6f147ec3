// Chat templates: OpenAI messages -> the prompt text a chat model was
// trained on, rendered by our Jinja interpreter (src/jinja) from the model's
// own `tokenizer.chat_template`, a file (`serve --chat-template-file`), or
// a built-in template for models that ship none (chatml, llama2, llama3,
// mistral, zephyr; `serve --chat-template NAME`).
//
// Variables given to the template: messages, add_generation_prompt,
// bos_token, eos_token, enable_thinking (true but for Apertus), date_string
// ("30 Nov 2026") and datetime, then any extra request variables
// (chat_template_kwargs); strftime_now uses the real date unless one is
// pinned. A bos_token text at the very start of the render is removed: the
// tokenizer adds BOS itself where the vocabulary asks for it. Without a
// generation prompt, a final assistant message is continued (the prompt ends
// right after its content, as for a prefilled reply; on a reasoning model
// after a closed, empty reasoning block: server/reasoning_block.h). A
// template that raises on a system message gets it merged into the first
// user message; so does one that renders it without its text. A template
// that reads tool results from an assistant turn's `tool_responses` and
// has no handling of its own for `tool` messages (llama.cpp's Gemma 4) gets
// the `tool` messages after that turn folded into it.
//
// No special-token injection: text a client sends in a message (all roles
// but assistant, whose content is the model's own output replayed) never
// becomes a control token. Before rendering, every special-token text in
// such content gets an invisible break (U+E000) after its first byte; after
// rendering the breaks are removed and their positions kept, and the
// tokenizer refuses a special-token match across any of them, so that text
// is tokenized as the plain text it is while the template's own markers stay
// special.
// Thread-safety: a ChatTemplate is immutable after set-up; Render may run
// concurrently.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>

#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "jinja/jinja.h"
#include "server/reasoning_block.h"
#include "tokenizer/tokenizer.h"

namespace pc {

// A rendered prompt: its text and the byte positions where special-token
// matches are not allowed (see above).
struct ChatPrompt {
  std::string text;
  std::vector<size_t> breaks;
};

class ChatTemplate {
 public:
  // source: Jinja text; name: how to call it in messages.
  static Result<ChatTemplate> FromSource(std::string_view source, std::string name);
  // Our built-in templates by name (chatml, llama2, llama3, mistral, zephyr).
  static Result<ChatTemplate> Builtin(std::string_view name);
  static std::vector<std::string> BuiltinNames();

  const std::string& name() const { return name_; }
  // The reasoning block's markers its family uses (open empty: none).
  const ReasoningStyle& reasoning() const { return reasoning_; }
  const std::string& bos_token() const { return bos_; }
  const std::string& eos_token() const { return eos_; }
  void set_bos_token(std::string s) { bos_ = std::move(s); }
  void set_eos_token(std::string s) { eos_ = std::move(s); }
  void set_date(std::optional<std::tm> date) { date_ = date; }
  // The texts of tok's special tokens, used to break them in message contents.
  void set_tokenizer(const Tokenizer* tok) { tok_ = tok; }

  // messages: an array of objects (role, content, and whatever else the
  // client sent: tool_calls, name, ...). extra: more variables (tools, ...).
  // Errors are the template's (raise_exception, type errors) or its limits.
  // Objects keep their keys in the order given (ordered_json): a tool's
  // {"type", "function": {"name", "description", "parameters"}} reaches the
  // prompt as the client wrote it, as the model saw it in training.
  Result<ChatPrompt> Render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                            const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;
  Result<ChatPrompt> Render(const nlohmann::json& messages, bool add_generation_prompt,
                            const nlohmann::json& extra = nlohmann::json::object()) const {
    return Render(nlohmann::ordered_json(messages), add_generation_prompt, nlohmann::ordered_json(extra));
  }
  // The template's text for whole turns (a final assistant message closed,
  // never continued; no generation prompt, no special-token breaks): for
  // reading the template's own syntax off probe conversations.
  Result<std::string> RenderTurns(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& extra) const {
    return RenderText(messages, false, extra);
  }

 private:
  Result<std::string> RenderText(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                 const nlohmann::ordered_json& extra) const;
  bool HandlesToolRole(const TemplateRender& render) const;
  Result<std::string> ContinueFinal(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& extra) const;
  std::string name_;
  jinja::Template tmpl_;
  std::string bos_ = "<s>", eos_ = "</s>";
  std::optional<std::tm> date_;
  ReasoningStyle reasoning_;
  bool thinking_by_default_ = true;
  bool drops_system_ = false;  // renders a system message without its text (merged into the first user turn)
  bool folds_tool_results_ = false;  // reads results from an assistant turn's `tool_responses`
  const Tokenizer* tok_ = nullptr;
};

// The chat template a model asks for (tokenizer.chat_template, with its BOS
// and EOS texts), else chatml. Errors if the model's template does not parse.
Result<ChatTemplate> ChatTemplateForModel(const GgufFile& gguf, const Tokenizer& tok);

}  // namespace pc
