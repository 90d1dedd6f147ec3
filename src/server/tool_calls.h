// Tool calls in requests and responses: the OpenAI fields (tools,
// tool_choice, parallel_tool_calls) checked, assistant turns with calls made
// ready for the template, and a reply's calls taken apart as it streams.
// Thread-safety: ParseToolFields and the helpers are pure; a ToolCallStream
// belongs to one response.
#pragma once
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "server/tool_syntax.h"

namespace pc {

struct ToolRequest {
  enum class Choice { kNone, kAuto, kRequired, kNamed };
  nlohmann::json tools = nlohmann::json::array();  // [{type: function, function: {name, description?, parameters?}}]
  Choice choice = Choice::kAuto;
  std::string named;     // kNamed: the function
  bool parallel = true;  // parallel_tool_calls
};

// The tool fields of a body (nullopt without tools); on a bad field, *param
// and *error name it.
std::optional<ToolRequest> ParseToolFields(const nlohmann::json& body, std::string* param, std::string* error);

// Assistant messages' tool_calls as the template wants them: arguments as
// objects (clients send JSON strings) or as strings.
void NormalizeToolCalls(nlohmann::ordered_json* messages, bool args_as_object);

// Call ids: "call_" + 9 alphanumerics would break Mistral's templates (which
// demand exactly 9), so ids are 9 alphanumerics from seed.
std::vector<std::string> MakeToolCallIds(uint64_t seed, size_t n);

// A reply's content and calls as tokens arrive: text before a possible call
// marker flows out as content; from the marker on it is held and parsed on
// every push, and the calls go out as OpenAI's delta.tool_calls (the call's
// index, id and name first, then its arguments in fragments as written). The
// fragments of a call add up to the arguments Finish reports.
class ToolCallStream {
 public:
  // tools: the request's, outliving the stream (or null).
  ToolCallStream(const ToolSyntax* syntax, std::vector<std::string> ids, const nlohmann::json* tools = nullptr)
      : syntax_(syntax), ids_(std::move(ids)), tools_(tools) {}
  struct Delta {
    std::string content;
    nlohmann::json tool_calls = nlohmann::json::array();  // delta.tool_calls entries
  };
  Delta Push(const std::string& text);
  // The rest at the end; *calls: every call of the whole reply, the last one
  // cut short if the reply was (empty: the held text went out as content).
  Delta Finish(std::vector<ToolCall>* calls);

 private:
  std::string Id(size_t i) const;
  void Emit(const ToolSyntax::Parsed& p, Delta* d);

  const ToolSyntax* syntax_;
  std::vector<std::string> ids_;
  const nlohmann::json* tools_;
  std::string held_;   // from the marker's possible start on
  bool in_call_ = false;
  bool start_decided_ = false;  // anchored syntaxes: whether the reply began with a call is known
  size_t content_sent_ = 0;  // content bytes before the marker sent
  struct Sent {
    bool named = false;
    size_t args = 0;  // argument bytes sent
  };
  std::vector<Sent> sent_;
};

}  // namespace pc
