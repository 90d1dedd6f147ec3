// A Jinja template interpreter for the chat templates models ship in their
// GGUF files (tokenizer.chat_template): the language as Python's Jinja2
// runs it with trim_blocks and lstrip_blocks on (the Hugging Face chat
// renderer's settings): if/elif/else, for with loop.* and else and
// break/continue, set (incl. block set and namespace attributes), macros,
// filter blocks, filters, tests, string/list/dict methods, slicing,
// whitespace control, raise_exception and strftime_now.
//
// Templates are untrusted input: every render is bounded in work (loop
// iterations and calls), call depth and output size, and any violation or
// template error ends the render with a message, never a crash or a hang.
// Thread-safety: a parsed Template is immutable; Render may run
// concurrently on one Template.
#pragma once
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "jinja/value.h"

namespace pc::jinja {


// How a render that ran out of steps (RenderOptions::max_steps) begins its
// message: callers that render the same template again can tell that the
// next render would cost the whole budget too.
inline constexpr std::string_view kStepLimitMessage = "the template does too much work";
inline bool IsStepLimit(const Status& s) { return !s.ok() && s.message().starts_with(kStepLimitMessage); }

struct RenderOptions {
  // Loop iterations + macro calls + statements executed. Real templates take
  // a few thousand for long conversations; a hostile one stops within ~0.1 s.
  size_t max_steps = 250'000;
  size_t max_output_bytes = 4 << 20;
  int max_call_depth = 64;           // nested macro calls
  std::optional<std::tm> now;        // strftime_now's clock (default: the local time)
};

class Template {
 public:
  static Result<Template> Parse(std::string_view source);
  // context: an object whose keys are the template's variables. Errors:
  // raise_exception's message, undefined names used as objects, type
  // errors, limits.
  Result<std::string> Render(const Value& context, const RenderOptions& opt = {}) const;

 private:
  std::shared_ptr<const void> body_;  // the syntax tree (ast.h Body)
};

}  // namespace pc::jinja
