// Untrusted chat templates (a GGUF's tokenizer.chat_template or
// --chat-template-file) parsed and rendered over fixed conversations (one
// ending in a reply to continue): never
// a crash, a hang or unbounded memory; errors are messages. The interpreter's
// limits on loop iterations, call depth and output size bound every render.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "server/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::json kMessages = nlohmann::json::parse(
      R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi <|im_start|>"},)"
      R"( {"role": "assistant", "content": "Hello.", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},)"
      R"( {"role": "user", "content": [1, 2.5, null, {"k": "v"}]}])");
  // A final assistant message: the continued-reply path (common-prefix cut,
  // reasoning block of the template's family, probe render).
  static const nlohmann::json kContinued = nlohmann::json::parse(
      R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hel"}])");
  const std::string source(reinterpret_cast<const char*>(data), size);
  pc::Result<pc::ChatTemplate> t = pc::ChatTemplate::FromSource(source, "fuzz");
  if (!t.ok()) return 0;
  t->set_bos_token("<s>");
  t->set_eos_token("</s>");
  (void)t->Render(kMessages, true);
  (void)t->Render(kMessages, false);
  (void)t->Render(kContinued, false);
  return 0;
}
