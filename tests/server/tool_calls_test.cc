// Tool calls through the server with stories260K under real chat templates
// (Qwen 2.5's Hermes tags, Llama 3.1's bare JSON, Mistral Nemo's array with
// call ids, DeepSeek V3.1's special markers): tool_choice "required" and a
// named function give calls whose arguments validate against the tool's
// parameters (python3-jsonschema), streamed delta.tool_calls assemble to the
// same calls, tool results go back through the template and the next turn
// hits the prefix cache, and bad tool fields are 400s naming the field.
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "server_harness.h"
#include "test_support.h"

namespace pc {
namespace {

using nlohmann::json;

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 16},
                  "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                  "required": ["city", "days"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "search", "description": "Search the web",
   "parameters": {"type": "object", "properties": {"query": {"type": "string", "maxLength": 20},
                  "top": {"enum": [1, 5, 10]}}, "required": ["query"], "additionalProperties": false}}}])");

json ParamsOf(const std::string& name) {
  for (const json& t : kTools)
    if (t["function"]["name"] == name) return t["function"]["parameters"];
  return nullptr;
}

class ToolCallsTest : public test::StoriesServerTest {
 protected:
  // A server on the shared model with a template from ../shared/templates.
  static std::unique_ptr<test::Harness> Serve(const std::string& name) {
    const std::string path = test::SharedPath("templates/" + name + ".jinja");
    if (path.empty()) return nullptr;
    auto t = ChatTemplate::FromSource(test::ReadText(path), name);
    PC_CHECK(t.ok());
    t->set_tokenizer(tok_);
    ServerOptions so;
    so.chat_template = std::make_shared<const ChatTemplate>(std::move(*t));
    EngineOptions eo;
    eo.cache.mem_bytes = 32 << 20;
    return std::make_unique<test::Harness>(*model_, *tok_, eo, so);
  }
  static json Post(const test::Harness& h, const json& body, int* status, std::string* raw = nullptr) {
    httplib::Client c = h.Client();
    auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
    PC_CHECK(res);
    *status = res->status;
    if (raw) *raw = res->body;
    return body.value("stream", false) ? json() : json::parse(res->body);
  }
  // The calls a stream's delta.tool_calls add up to, and its finish reason.
  static json Assemble(const std::string& sse, std::string* finish) {
    json calls = json::array();
    for (const json& j : test::SsePayloads(sse)) {
      if (j["choices"].empty()) continue;
      const json& ch = j["choices"][0];
      if (ch["finish_reason"].is_string()) *finish = ch["finish_reason"];
      if (!ch["delta"].contains("tool_calls")) continue;
      for (const json& d : ch["delta"]["tool_calls"]) {
        const size_t i = d["index"];
        if (calls.size() <= i) calls.push_back({{"name", ""}, {"arguments", ""}, {"id", ""}});
        if (d.contains("id")) calls[i]["id"] = d["id"];
        if (d.contains("function") && d["function"].contains("name")) calls[i]["name"] = d["function"]["name"];
        if (d.contains("function") && d["function"].contains("arguments"))
          calls[i]["arguments"] = calls[i]["arguments"].get<std::string>() + d["function"]["arguments"].get<std::string>();
      }
    }
    return calls;
  }
};

TEST_F(ToolCallsTest, ForcedCallsValidateAndStreamsAgree) {
#ifdef PROMPTCACHE_SANITIZER_BUILD
  const int seeds = 2;
#else
  const int seeds = 6;
#endif
  // JSON arguments (the first four), one element per argument (Qwen3-Coder's
  // raw strings, Gemma 4's quoted ones joined by commas).
  for (const char* name : {"Qwen-Qwen2.5-7B-Instruct", "meta-llama-Llama-3.1-8B-Instruct", "mistralai-Mistral-Nemo-Instruct-2407",
                           "deepseek-ai-DeepSeek-V3.1", "Qwen3-Coder", "google-gemma-4-31B-it"}) {
    auto h = Serve(name);
    if (!h) {
      if (test::RequireShared()) FAIL() << "template missing: " << name;
      GTEST_SKIP() << "../shared absent";
    }
    std::vector<std::pair<json, std::string>> args;
    int calls_seen = 0;
    for (int seed = 0; seed < seeds; ++seed) {
      const bool named = seed % 2 == 1;
      json body = {{"messages", {{{"role", "user"}, {"content", "What is the weather in Paris?"}}}},
                   {"tools", kTools}, {"max_tokens", 160}, {"temperature", 1.0}, {"seed", seed},
                   {"tool_choice", named ? json{{"type", "function"}, {"function", {{"name", "search"}}}} : json("required")},
                   {"parallel_tool_calls", seed % 3 != 0},
                   {"chat_template_kwargs", {{"thinking", false}}}};  // DeepSeek V3.1's switch (a tiny model never ends a thought)
      int status = 0;
      json r = Post(*h, body, &status);
      ASSERT_EQ(status, 200) << name << " " << r.dump();
      const json& choice = r["choices"][0];
      const json calls = choice["message"].value("tool_calls", json::array());
      if (choice["finish_reason"] == "tool_calls") {
        EXPECT_FALSE(calls.empty());
      }
      for (size_t k = 0; k < calls.size(); ++k) {
        const json& c = calls[k];
        ++calls_seen;
        if (choice["finish_reason"] == "length" && k + 1 == calls.size()) continue;  // cut by max_tokens
        const std::string fn = c["function"]["name"];
        if (named) {
          EXPECT_EQ(fn, "search") << name;
        }
        ASSERT_FALSE(ParamsOf(fn).is_null()) << name << " called " << fn;
        args.push_back({ParamsOf(fn), c["function"]["arguments"].get<std::string>()});
        EXPECT_EQ(c["id"].get<std::string>().size(), 9u);
      }
      if (seed % 3 == 0) {
        EXPECT_LE(calls.size(), 1u) << "parallel_tool_calls false";
      }
      // Streamed: the deltas add up to the same calls; a seeded request gets
      // the same ids too (Mistral's calls carry them in the text, so random
      // ids would change what follows them).
      body["stream"] = true;
      std::string sse, finish;
      Post(*h, body, &status, &sse);
      ASSERT_EQ(status, 200);
      const json streamed = Assemble(sse, &finish);
      ASSERT_EQ(streamed.size(), calls.size()) << name << "\n" << sse.substr(0, 2000);
      for (size_t i = 0; i < calls.size(); ++i) {
        EXPECT_EQ(streamed[i]["name"], calls[i]["function"]["name"]);
        EXPECT_EQ(streamed[i]["arguments"], calls[i]["function"]["arguments"]);
        EXPECT_EQ(streamed[i]["id"], calls[i]["id"]) << name;
      }
      EXPECT_EQ(finish, choice["finish_reason"]);
    }
    EXPECT_GT(calls_seen, 0) << name;
    const json invalid = test::ValidateJson(args);
    EXPECT_TRUE(invalid.empty()) << name << " " << invalid.dump(1);
    std::printf("%s: %d calls, all arguments valid\n", name, calls_seen);
  }
}

TEST_F(ToolCallsTest, ToolResultsGoBackAndTheNextTurnHitsTheCache) {
  auto h = Serve("Qwen-Qwen2.5-7B-Instruct");
  ASSERT_TRUE(h);
  json messages = {{{"role", "system"}, {"content", "You help with the weather."}}, {{"role", "user"}, {"content", "Paris?"}}};
  int status = 0;
  json r = Post(*h, {{"messages", messages}, {"tools", kTools}, {"tool_choice", "required"}, {"parallel_tool_calls", false},
                     {"max_tokens", 200}, {"seed", 1}}, &status);
  ASSERT_EQ(status, 200) << r.dump();
  json msg = r["choices"][0]["message"];
  ASSERT_TRUE(msg.contains("tool_calls")) << r.dump();
  messages.push_back(msg);  // replayed as sent: arguments a JSON string, content null
  messages.push_back({{"role", "tool"}, {"tool_call_id", msg["tool_calls"][0]["id"]}, {"content", "{\"temp_c\": 21}"}});
  const size_t first_prompt = r["usage"]["prompt_tokens"];
  r = Post(*h, {{"messages", messages}, {"tools", kTools}, {"max_tokens", 8}, {"seed", 2}}, &status);
  ASSERT_EQ(status, 200) << r.dump();
  // The second turn's prompt starts with the first one's: cached.
  EXPECT_GE(r["usage"]["prompt_tokens_details"]["cached_tokens"].get<size_t>(), first_prompt - 16) << r["usage"].dump();
  // The template saw the call and the result.
  httplib::Client c = h->Client();
  auto res = c.Post("/apply-template", json{{"messages", messages}, {"tools", kTools}}.dump(), "application/json");
  ASSERT_TRUE(res);
  const std::string prompt = json::parse(res->body)["prompt"];
  EXPECT_NE(prompt.find("<tool_call>\n{\"name\": \"" + msg["tool_calls"][0]["function"]["name"].get<std::string>()), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("<tool_response>\n{\"temp_c\": 21}"), std::string::npos) << prompt;
  // Tools and arguments keep the key order the client wrote (the order models
  // were trained on), not sorted.
  const std::string body =
      R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "abcdefghi",)"
      R"( "type": "function", "function": {"name": "f", "arguments": "{\"zeta\": 1, \"alpha\": 2}"}}]},)"
      R"( {"role": "tool", "tool_call_id": "abcdefghi", "content": "ok"}],)"
      R"( "tools": [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object",)"
      R"( "properties": {"zeta": {"type": "integer"}, "alpha": {"type": "integer"}}}}}]})";
  res = c.Post("/apply-template", body, "application/json");
  ASSERT_TRUE(res);
  const std::string p2 = json::parse(res->body)["prompt"];
  EXPECT_NE(p2.find(R"({"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object", "properties": {"zeta")"),
            std::string::npos) << p2;
  EXPECT_NE(p2.find(R"("arguments": {"zeta": 1, "alpha": 2})"), std::string::npos) << p2;
}

TEST_F(ToolCallsTest, BadToolFieldsAreRefusedByName) {
  auto h = Serve("Qwen-Qwen2.5-7B-Instruct");
  ASSERT_TRUE(h);
  const json user = {{{"role", "user"}, {"content", "hi"}}};
  const std::pair<json, std::string> cases[] = {
      {{{"messages", user}, {"tools", "x"}}, "tools"},
      {{{"messages", user}, {"tools", {{{"type", "function"}, {"function", {{"name", "bad name!"}}}}}}}, "tools"},
      {{{"messages", user}, {"tools", kTools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}}, "tool_choice"},
      {{{"messages", user}, {"tools", kTools}, {"tool_choice", "sometimes"}}, "tool_choice"},
      {{{"messages", user}, {"tool_choice", "required"}}, "tool_choice"},
      {{{"messages", user}, {"tools", kTools}, {"parallel_tool_calls", 1}}, "parallel_tool_calls"},
      {{{"messages", user}, {"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"not", {{"type", "string"}}}}}}}}}},
        {"tool_choice", "required"}}, "tool_choice"},
      {{{"messages", user}, {"tools", kTools}, {"tool_choice", "required"},
        {"response_format", {{"type", "json_object"}}}}, "tool_choice"},
  };
  for (const auto& [body, param] : cases) {
    int status = 0;
    json r = Post(*h, body, &status);
    EXPECT_EQ(status, 400) << body.dump();
    EXPECT_EQ(r["error"]["param"], param) << r.dump();
  }
  // The default ChatML template writes no calls: forcing one is refused,
  // auto is served as plain content.
  int status = 0;
  json r = Post(*harness_, {{"messages", user}, {"tools", kTools}, {"tool_choice", "required"}}, &status);
  EXPECT_EQ(status, 400);
  r = Post(*harness_, {{"messages", user}, {"tools", kTools}, {"max_tokens", 4}}, &status);
  EXPECT_EQ(status, 200) << r.dump();
  // Completions take no tools.
  httplib::Client c = h->Client();
  auto res = c.Post("/v1/completions", json{{"prompt", "x"}, {"tools", kTools}}.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
}

}  // namespace
}  // namespace pc
