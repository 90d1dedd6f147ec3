// Structured output through the server with stories260K: for 50 shared
// real-world schemas every reply that ends with "stop" is JSON its schema
// accepts (checked by python3-jsonschema, an independent validator), under
// each server's spelling of the field; streams equal non-streamed replies;
// schemas we cannot enforce are a 400 naming the keyword.
#include <httplib.h>

#include <fstream>
#include <regex>
#include <nlohmann/json.hpp>

#include "base/check.h"
#include "server_harness.h"
#include "test_support.h"

namespace pc {
namespace {

using nlohmann::json;

class StructuredOutputTest : public test::StoriesServerTest {
 protected:
  static json Post(const std::string& path, const json& body, int* status) {
    httplib::Client c = harness_->Client();
    auto res = c.Post(path.c_str(), body.dump(), "application/json");
    PC_CHECK(res);
    *status = res->status;
    return json::parse(res->body);
  }
  static json Validate(const std::vector<std::pair<json, std::string>>& cases) { return test::ValidateJson(cases); }
};

TEST_F(StructuredOutputTest, FiftySharedSchemasEveryStoppedReplyValidates) {
  PC_SHARED_OR_SKIP(dir, "jsonschema");
  // Ten compiling schemas from each of five splits (the first ones in file
  // order), each asked for under one of the spellings in turn. The
  // sanitizer tree (5-10x slower) takes two per split.
#ifdef PROMPTCACHE_SANITIZER_BUILD
  const int per_split = 2;
#else
  const int per_split = 10;
#endif
  std::vector<json> schemas;
  for (const char* split : {"Github_easy", "Github_medium", "Glaiveai2K", "Kubernetes", "Snowplow"}) {
    std::ifstream f(dir + "/" + split + ".jsonl");
    std::string line;
    int taken = 0;
    while (taken < per_split && std::getline(f, line)) {
      json s = json::parse(line)["schema"];
      int status = 0;
      json probe = Post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 1}, {"json_schema", s}}, &status);
      if (status != 200) continue;  // one we refuse (a 400 naming the keyword)
      schemas.push_back(s);
      ++taken;
    }
  }
  ASSERT_EQ(schemas.size(), size_t(5 * per_split));
  std::vector<std::pair<json, std::string>> stopped;
  int lengths = 0;
  for (size_t i = 0; i < schemas.size(); ++i) {
    json body = {{"prompt", "Once upon a time"}, {"max_tokens", 500}, {"temperature", 1.0}, {"seed", int(i)}};
    switch (i % 4) {
      case 0: body["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "s"}, {"schema", schemas[i]}, {"strict", true}}}}; break;
      case 1: body["json_schema"] = schemas[i]; break;
      case 2: body["guided_json"] = schemas[i]; break;
      default: body["structured_outputs"] = {{"json", schemas[i]}}; break;
    }
    int status = 0;
    json r = Post("/v1/completions", body, &status);
    ASSERT_EQ(status, 200) << r.dump();
    const std::string finish = r["choices"][0]["finish_reason"];
    if (finish == "stop") stopped.push_back({schemas[i], r["choices"][0]["text"].get<std::string>()});
    else ++lengths;
  }
  // A tiny model wanders: many replies run out of tokens; those that end
  // must be whole, valid values.
  EXPECT_GE(stopped.size(), size_t(per_split) / 2) << lengths << " ran to max_tokens";
  std::printf("%zu of %zu replies stopped\n", stopped.size(), schemas.size());
  json invalid = Validate(stopped);
  EXPECT_TRUE(invalid.empty()) << invalid.dump(1);
}

TEST_F(StructuredOutputTest, JsonObjectChatAndStreamsAgree) {
  const json schema = {{"type", "object"},
                       {"properties", {{"name", {{"type", "string"}, {"maxLength", 12}}},
                                       {"age", {{"type", "integer"}, {"minimum", 0}, {"maximum", 120}}},
                                       {"tags", {{"type", "array"}, {"items", {{"enum", {"a", "b"}}}}, {"maxItems", 3}}}}},
                       {"required", {"name", "age", "tags"}},
                       {"additionalProperties", false}};
  std::vector<std::pair<json, std::string>> cases;
  for (int seed = 0; seed < 6; ++seed) {
    json body = {{"messages", {{{"role", "user"}, {"content", "Tell me about Lily."}}}}, {"max_tokens", 300},
                 {"temperature", 0.9}, {"seed", seed},
                 {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "p"}, {"schema", schema}}}}}};
    int status = 0;
    json r = Post("/v1/chat/completions", body, &status);
    ASSERT_EQ(status, 200) << r.dump();
    const std::string text = r["choices"][0]["message"]["content"];
    if (r["choices"][0]["finish_reason"] == "stop") cases.push_back({schema, text});
    // The same request streamed: the same text, the same finish.
    body["stream"] = true;
    httplib::Client c = harness_->Client();
    auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(res);
    std::string streamed, finish;
    for (const json& j : test::SsePayloads(res->body)) {
      if (j["choices"].empty()) continue;
      const json& ch = j["choices"][0];
      if (ch["delta"].contains("content") && ch["delta"]["content"].is_string()) streamed += ch["delta"]["content"].get<std::string>();
      if (ch.contains("finish_reason") && ch["finish_reason"].is_string()) finish = ch["finish_reason"];
    }
    EXPECT_EQ(streamed, text);
    EXPECT_EQ(finish, r["choices"][0]["finish_reason"]);
  }
  EXPECT_FALSE(cases.empty());
  EXPECT_TRUE(Validate(cases).empty());
  // json_object: an object, whatever is in it.
  int stops = 0;
  for (int seed = 0; seed < 4; ++seed) {
    int status = 0;
    json r = Post("/v1/completions", {{"prompt", "{"}, {"max_tokens", 300}, {"seed", seed}, {"response_format", {{"type", "json_object"}}}}, &status);
    ASSERT_EQ(status, 200);
    if (r["choices"][0]["finish_reason"] != "stop") continue;
    ++stops;
    json v = json::parse(r["choices"][0]["text"].get<std::string>(), nullptr, false);
    EXPECT_TRUE(v.is_object()) << r["choices"][0]["text"];
  }
  (void)stops;
}

TEST_F(StructuredOutputTest, GbnfGrammarRepliesMatch) {
  // A regular grammar, so std::regex (an independent matcher) can check it.
  const std::string grammar = "root ::= (\"yes\" | \"no\") \", \" word (\" \" word){0,3} \".\"\nword ::= [a-z]{1,8}";
  const std::regex re("^(yes|no), [a-z]{1,8}( [a-z]{1,8}){0,3}\\.$");
  int stops = 0;
  for (int seed = 0; seed < 8; ++seed) {
    int status = 0;
    json r = Post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 60}, {"seed", seed}, {"grammar", grammar}}, &status);
    ASSERT_EQ(status, 200) << r.dump();
    const std::string text = r["choices"][0]["text"];
    if (r["choices"][0]["finish_reason"] != "stop") continue;
    ++stops;
    EXPECT_TRUE(std::regex_match(text, re)) << text;
  }
  EXPECT_GT(stops, 0);
  int status = 0;
  json r = Post("/v1/completions", {{"prompt", "x"}, {"grammar", "root ::= root \"a\""}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(r["error"]["param"], "grammar");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("left-recursive"), std::string::npos) << r.dump();
  r = Post("/v1/completions", {{"prompt", "x"}, {"grammar", "root ::= \"a\""}, {"json_schema", {{"type", "object"}}}}, &status);
  EXPECT_EQ(status, 400);
  r = Post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}, {"grammar", ""}}, &status);
  EXPECT_EQ(status, 200) << "an empty grammar is none";
}

TEST_F(StructuredOutputTest, SchemasWeCannotEnforceAreRefusedByName) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"prompt":"x","response_format":{"type":"json_schema","json_schema":{"schema":{"not":{"type":"string"}}}}})", "'not'"},
      {R"({"prompt":"x","json_schema":{"type":"array","uniqueItems":true}})", "'uniqueItems'"},
      {R"({"prompt":"x","guided_json":"{not json"})", "not valid JSON"},
      {R"({"prompt":"x","guided_regex":"a+"})", "guided_regex"},
      {R"({"prompt":"x","response_format":{"type":"yaml"}})", "response_format.type"},
      {R"({"prompt":"x","response_format":{"type":"json_schema"}})", "json_schema"},
      {R"({"prompt":"x","json_schema":{"type":"object"},"guided_json":{"type":"object"}})", "give one schema"},
      {R"({"prompt":"x","json_schema":{"$ref":"#"}})", "no finite value"},
  };
  for (const auto& [text, needle] : cases) {
    const json body = json::parse(text);
    int status = 0;
    json r = Post("/v1/completions", body, &status);
    EXPECT_EQ(status, 400) << body.dump();
    EXPECT_NE(r["error"]["message"].get<std::string>().find(needle), std::string::npos) << r.dump();
  }
  // A deep schema: a bounded, clean refusal.
  json deep = json::object();
  for (int i = 0; i < 2000; ++i) deep = json{{"type", "array"}, {"items", deep}};
  int status = 0;
  json r = Post("/v1/completions", {{"prompt", "x"}, {"json_schema", deep}}, &status);
  EXPECT_EQ(status, 400) << r.dump().substr(0, 300);
}

}  // namespace
}  // namespace pc
