#include "server/tool_calls.h"

#include <fmt/format.h>

#include <algorithm>

namespace pc {
namespace {

using json = nlohmann::json;

bool ValidName(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  return std::all_of(n.begin(), n.end(), [](char c) { return std::isalnum(uint8_t(c)) || c == '_' || c == '-' || c == '.'; });
}

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace

std::optional<ToolRequest> ParseToolFields(const json& body, std::string* param, std::string* error) {
  auto fail = [&](const char* p, std::string msg) {
    *param = p;
    *error = std::move(msg);
    return std::nullopt;
  };
  ToolRequest r;
  const bool has_tools = body.contains("tools") && !body["tools"].is_null();
  if (has_tools) {
    if (!body["tools"].is_array()) return fail("tools", "'tools' must be an array");
    for (const json& t : body["tools"]) {
      if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") || !t["function"].is_object())
        return fail("tools", "each tool must be {\"type\": \"function\", \"function\": {...}}");
      const json& fn = t["function"];
      if (!fn.contains("name") || !fn["name"].is_string() || !ValidName(fn["name"].get<std::string>()))
        return fail("tools", "each tool's function needs a 'name' of 1 to 64 letters, digits, '_', '-' or '.'");
      if (fn.contains("parameters") && !fn["parameters"].is_null() && !fn["parameters"].is_object())
        return fail("tools", fmt::format("the parameters of tool '{}' must be a JSON Schema object", fn["name"].get<std::string>()));
      if (fn.contains("description") && !fn["description"].is_null() && !fn["description"].is_string())
        return fail("tools", "a tool's 'description' must be a string");
      for (const json& o : r.tools)
        if (o["function"]["name"] == fn["name"]) return fail("tools", fmt::format("two tools are named '{}'", fn["name"].get<std::string>()));
      r.tools.push_back(t);
    }
  }
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    const json& c = body["tool_choice"];
    if (c == "none") r.choice = ToolRequest::Choice::kNone;
    else if (c == "auto") r.choice = ToolRequest::Choice::kAuto;
    else if (c == "required") r.choice = ToolRequest::Choice::kRequired;
    else if (c.is_object() && c.value("type", "") == "function" && c.contains("function") && c["function"].is_object() &&
             c["function"].contains("name") && c["function"]["name"].is_string()) {
      r.choice = ToolRequest::Choice::kNamed;
      r.named = c["function"]["name"].get<std::string>();
      const bool known = std::any_of(r.tools.begin(), r.tools.end(), [&](const json& t) { return t["function"]["name"] == r.named; });
      if (!known) return fail("tool_choice", fmt::format("'tool_choice' names '{}', which is not in 'tools'", r.named));
    } else {
      return fail("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
  }
  if (body.contains("parallel_tool_calls") && !body["parallel_tool_calls"].is_null()) {
    if (!body["parallel_tool_calls"].is_boolean()) return fail("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    r.parallel = body["parallel_tool_calls"].get<bool>();
  }
  if (r.tools.empty()) {
    if (r.choice == ToolRequest::Choice::kRequired) return fail("tool_choice", "'tool_choice' \"required\" needs 'tools'");
    return std::nullopt;
  }
  return r;
}

void NormalizeToolCalls(nlohmann::ordered_json* messages, bool args_as_object) {
  for (nlohmann::ordered_json& m : *messages) {
    if (!m.is_object() || !m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    for (nlohmann::ordered_json& c : m["tool_calls"]) {
      if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) continue;
      nlohmann::ordered_json& args = c["function"]["arguments"];
      if (args_as_object && args.is_string()) {
        nlohmann::ordered_json parsed = nlohmann::ordered_json::parse(args.get<std::string>(), nullptr, false);
        if (!parsed.is_discarded()) args = std::move(parsed);
      } else if (!args_as_object && !args.is_string() && !args.is_null()) {
        args = args.dump();
      }
    }
  }
}

std::vector<std::string> MakeToolCallIds(uint64_t seed, size_t n) {
  static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::vector<std::string> ids;
  uint64_t x = seed ^ 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < n; ++i) {
    std::string id;
    for (int k = 0; k < 9; ++k) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      id += kAlnum[x % 62];
    }
    ids.push_back(std::move(id));
  }
  return ids;
}

std::string ToolCallStream::Id(size_t i) const { return i < ids_.size() ? ids_[i] : fmt::format("call{:05d}", i); }

void ToolCallStream::Emit(const ToolSyntax::Parsed& p, Delta* d) {
  auto send = [&](size_t k, const ToolCall& c) {
    if (sent_.size() <= k) sent_.resize(k + 1);
    Sent& s = sent_[k];
    json entry = {{"index", k}};
    if (!s.named) {
      entry["id"] = c.id;
      entry["type"] = "function";
      entry["function"] = {{"name", c.name}, {"arguments", ""}};
      s.named = true;
    }
    if (c.arguments.size() > s.args) {
      entry["function"]["arguments"] = c.arguments.substr(s.args);
      s.args = c.arguments.size();
    }
    if (entry.size() > 1) d->tool_calls.push_back(std::move(entry));
  };
  for (size_t k = 0; k < p.calls.size(); ++k) send(k, p.calls[k]);
  if (p.partial) send(p.calls.size(), p.partial_call);
}

ToolCallStream::Delta ToolCallStream::Push(const std::string& text) {
  Delta d;
  held_ += text;
  auto id = [this](size_t i) { return Id(i); };
  if (!in_call_ && syntax_->anchored() && !start_decided_) {
    // A reply may begin with a call (its name): held until that is decided.
    const int starts = syntax_->StartsWithCall(held_, tools_);
    if (starts < 0) return d;
    start_decided_ = true;
    in_call_ = starts > 0;
  }
  if (!in_call_) {
    const size_t at = held_.find(syntax_->trigger());
    // Hold what could still begin a call (and whitespace before it); from a
    // trigger on, the call starts where its header words do.
    size_t safe = at == std::string::npos ? syntax_->HoldFrom(held_) : syntax_->CallStart(held_, at);
    const size_t call_at = safe;
    while (safe > 0 && IsSpace(held_[safe - 1])) --safe;
    d.content = held_.substr(0, safe);
    content_sent_ += safe;
    if (at == std::string::npos) {
      held_.erase(0, safe);
      return d;
    }
    in_call_ = true;
    held_.erase(0, call_at);
  }
  Emit(syntax_->Parse(held_, id, tools_), &d);
  return d;
}

ToolCallStream::Delta ToolCallStream::Finish(std::vector<ToolCall>* calls) {
  Delta d;
  calls->clear();
  if (!in_call_) {
    d.content = std::move(held_);
    return d;
  }
  ToolSyntax::Parsed p = syntax_->Parse(held_, [this](size_t i) { return Id(i); }, tools_);
  if (p.calls.empty() && !p.partial) {  // no call parsed after all: the held text is content
    d.content = std::move(held_);
    return d;
  }
  Emit(p, &d);
  d.content = p.content.empty() ? "" : (content_sent_ > 0 ? "\n" : "") + p.content;
  *calls = std::move(p.calls);
  // A call the reply was cut inside (max_tokens) is reported as far as it
  // got, as its stream announced it.
  if (p.partial) calls->push_back(std::move(p.partial_call));
  return d;
}

}  // namespace pc
