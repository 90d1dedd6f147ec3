// Schemas compiled and matched: what each keyword admits and refuses, the
// errors that name what is not supported, and hostile schemas.
#include <gtest/gtest.h>

#include "structured/json_matcher.h"
#include "structured/json_schema.h"

namespace pc::structured {
namespace {

std::shared_ptr<const CompiledSchema> Compile(const std::string& schema) {
  auto r = CompileJsonSchemaText(schema);
  EXPECT_TRUE(r.ok()) << schema << ": " << r.status().message();
  return r.ok() ? *r : nullptr;
}

bool Accept(const std::shared_ptr<const CompiledSchema>& s, const std::string& text, int ws = 2) {
  JsonMatcher m(s.get(), ws);
  return m.Consume(text) && m.CanEnd();
}

// Each schema with texts it must accept and texts it must refuse.
struct Case {
  const char* schema;
  std::vector<const char*> yes, no;
};

TEST(JsonSchema, KeywordsAdmitExactlyTheirValues) {
  const Case cases[] = {
      {R"({})", {"1", "\"a\"", "null", "[1,{\"a\":[]}]", "{\"x\":true}", "-0.5e+3"}, {"", "01", "[1,]", "{\"a\"}", "tru", "\"\\x\""}},
      {R"({"type":"integer"})", {"0", "-7", "12345678901234567890"}, {"1.0", "1e3", "-", "\"1\"", "00"}},
      {R"({"type":"number","minimum":1.5,"exclusiveMaximum":3})", {"1.5", "2", "2.999"}, {"1.49", "3", "3.0", "-2"}},
      {R"({"type":"integer","minimum":-10,"maximum":-2,"multipleOf":4})", {"-4", "-8"}, {"-2", "0", "-12", "-6"}},
      {R"({"type":"number","multipleOf":0.01})", {"1.25", "3", "-0.1"}, {"1.255", "0.001"}},
      {R"({"type":"integer","maximum":5,"exclusiveMaximum":true})", {"4"}, {"5"}},
      {R"({"type":"string","minLength":2,"maxLength":3})", {"\"ab\"", "\"\xC3\xA9\xC3\xA9\xC3\xA9\"", "\"a\\n\""}, {"\"a\"", "\"abcd\""}},
      {R"({"type":"string","pattern":"^[a-z]+-\\d$"})", {"\"ab-1\""}, {"\"ab-12\"", "\"Ab-1\""}},
      {R"({"type":"string","pattern":"cat"})", {"\"a cat!\"", "\"cat\""}, {"\"ca t\""}},
      {R"({"type":"string","format":"date"})", {"\"2024-02-29\"", "\"2000-02-29\"", "\"2023-12-31\""},
       {"\"2023-02-29\"", "\"1900-02-29\"", "\"2023-04-31\"", "\"2023-13-01\""}},
      {R"({"type":"string","format":"date-time"})", {"\"2023-01-15T14:30:00Z\"", "\"2023-01-15T14:30:00.123+05:30\""}, {"\"2023-01-15 14:30\""}},
      {R"({"type":"string","format":"ipv4"})", {"\"192.168.0.255\""}, {"\"256.1.1.1\"", "\"1.2.3\""}},
      {R"({"type":"string","format":"uuid"})", {"\"123e4567-e89b-12d3-a456-426614174000\""}, {"\"123e4567\""}},
      {R"({"type":"string","format":"email"})", {"\"a.b@example.com\""}, {"\"a@\"", "\"ab.com\""}},
      {R"({"enum":["red","green",1,null,[1,2]]})", {"\"red\"", "1", "null", "[1,2]"}, {"\"blue\"", "10", "[1]"}},
      {R"({"const":{"a":1}})", {"{\"a\":1}"}, {"{\"a\":2}", "{}"}},
      {R"({"type":"string","enum":["a",1,"bb"],"maxLength":1})", {"\"a\""}, {"1", "\"bb\""}},
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a"],"additionalProperties":false})",
       {"{\"a\":1}", "{\"b\":\"x\",\"a\":2}", "{ \"a\" : 1 }"}, {"{}", "{\"a\":1,\"c\":2}", "{\"a\":1,\"a\":2}", "{\"a\":\"1\"}"}},
      {R"({"type":"object","additionalProperties":{"type":"boolean"},"minProperties":1,"maxProperties":2})",
       {"{\"x\":true}", "{\"x\":true,\"y\":false}"}, {"{}", "{\"x\":1}", "{\"x\":true,\"y\":false,\"z\":true}"}},
      {R"({"type":"object","patternProperties":{"^n_":{"type":"number"}},"additionalProperties":false})",
       {"{\"n_a\":1}"}, {"{\"a\":1}", "{\"n_a\":\"s\"}"}},
      {R"({"type":"object","required":["id"],"additionalProperties":{"type":"string"}})", {"{\"id\":\"x\"}"}, {"{\"id\":1}", "{}"}},
      {R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":2})", {"[1]", "[1, 2]"}, {"[]", "[1,2,3]", "[\"a\"]"}},
      {R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})", {"[\"a\",1]", "[\"a\"]"}, {"[1]", "[\"a\",1,2]"}},
      {R"({"type":"array","items":[{"type":"string"}],"additionalItems":{"type":"boolean"}})", {"[\"a\",true]"}, {"[\"a\",1]"}},
      {R"({"anyOf":[{"type":"string","maxLength":1},{"type":"string","pattern":"^[0-9]+$"}]})", {"\"a\"", "\"123\""}, {"\"ab\""}},
      {R"({"oneOf":[{"type":"string"},{"type":"integer"}]})", {"\"s\"", "3"}, {"3.5", "null"}},
      {R"({"oneOf":[{"type":"object","properties":{"k":{"const":"a"},"x":{"type":"integer"}},"required":["k"]},
                    {"type":"object","properties":{"k":{"const":"b"},"y":{"type":"string"}},"required":["k"]}]})",
       {"{\"k\":\"a\",\"x\":1}", "{\"k\":\"b\",\"y\":\"s\"}"}, {"{\"k\":\"a\",\"x\":\"s\"}", "{\"k\":\"c\"}"}},
      {R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"string"}},"required":["b"]}]})",
       {"{\"a\":1,\"b\":\"s\"}"}, {"{\"a\":1}", "{\"a\":1,\"b\":2}"}},
      {R"({"type":"object","properties":{"n":{"$ref":"#/$defs/node"}},"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#/$defs/node"}},"required":["v"],"additionalProperties":false}}})",
       {"{\"n\":{\"v\":1,\"next\":{\"v\":2}}}"}, {"{\"n\":{\"v\":1,\"next\":{}}}"}},
      {R"({"type":["string","null"]})", {"null", "\"x\""}, {"1"}},
      {R"({"type":"boolean"})", {"true", "false"}, {"True", "1", "truex"}},
  };
  for (const Case& c : cases) {
    auto s = Compile(c.schema);
    ASSERT_TRUE(s) << c.schema;
    for (const char* t : c.yes) EXPECT_TRUE(Accept(s, t)) << c.schema << " should accept " << t;
    for (const char* t : c.no) EXPECT_FALSE(Accept(s, t)) << c.schema << " should refuse " << t;
  }
}

TEST(JsonSchema, CanonicalEscapesOnly) {
  auto s = Compile(R"({"type":"string"})");
  EXPECT_TRUE(Accept(s, "\"a\\\"b\\\\c\\n\\u001f\""));
  EXPECT_FALSE(Accept(s, "\"\\u0041\""));  // A needs no escape
  EXPECT_FALSE(Accept(s, "\"\\u000a\""));  // \n has a short form
  EXPECT_FALSE(Accept(s, "\"\\/\""));
  EXPECT_FALSE(Accept(s, "\"a\nb\""));     // a raw control byte
  EXPECT_FALSE(Accept(s, "\"\xC3\""));     // a cut UTF-8 sequence
  EXPECT_TRUE(Accept(s, "\"\xE0\xA4\x85\xED\x9F\xBF\xF4\x8F\xBF\xBF\""));  // U+0905, U+D7FF, U+10FFFF
  EXPECT_FALSE(Accept(s, "\"\xED\xA0\x80\""));  // a surrogate
  EXPECT_FALSE(Accept(s, "\"\xE0\x80\xAF\""));  // overlong
  EXPECT_FALSE(Accept(s, "\"\xF4\x90\x80\x80\""));  // past U+10FFFF
}

TEST(JsonSchema, WhitespaceIsBoundedPerGap) {
  auto s = Compile(R"({"type":"array"})");
  EXPECT_TRUE(Accept(s, "[ 1,\n  2 ]", 3));
  EXPECT_FALSE(Accept(s, "[    1]", 3));
  EXPECT_FALSE(Accept(s, "[ 1]", 0));
}

TEST(JsonSchema, PrefixesThatCannotCompleteAreRefused) {
  auto s = Compile(R"({"type":"integer","maximum":50})");
  JsonMatcher m(s.get(), 0);
  EXPECT_TRUE(m.Consume("5"));
  EXPECT_FALSE(JsonMatcher(m).Consume("1"));  // 51 > 50 and so is anything longer
  auto k = Compile(R"({"type":"object","properties":{"alpha":{}},"additionalProperties":false})");
  JsonMatcher km(k.get(), 0);
  EXPECT_TRUE(km.Consume("{\"al"));
  EXPECT_FALSE(JsonMatcher(km).Consume("x"));
}

TEST(JsonSchema, ErrorsNameTheKeyword) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"not":{"type":"string"}})", "'not'"},
      {R"({"type":"object","dependencies":{"a":["b"]}})", "'dependencies'"},
      {R"({"type":"array","uniqueItems":true})", "'uniqueItems'"},
      {R"({"oneOf":[{"type":"string"},{"type":"string","maxLength":3}]})", "oneOf"},
      {R"({"$ref":"http://example.com/s.json"})", "$ref"},
      {R"({"$ref":"#/definitions/missing"})", "does not resolve"},
      {R"j({"type":"string","pattern":"(?=x)"})j", "lookaround"},
      {R"({"type":"strin"})", "type"},
      {R"({"$ref":"#"})", "no finite value"},
      {R"({"type":"object","properties":{"a":{"$ref":"#"}},"required":["a"]})", "no finite value"},
  };
  for (auto [schema, needle] : cases) {
    auto r = CompileJsonSchemaText(schema);
    ASSERT_FALSE(r.ok()) << schema;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << schema << " -> " << r.status().message();
  }
}

TEST(JsonSchema, HostileSchemasAreBoundedErrors) {
  std::string deep;
  for (int i = 0; i < 500; ++i) deep += R"({"type":"array","items":)";
  deep += "{}";
  for (int i = 0; i < 500; ++i) deep += "}";
  EXPECT_FALSE(CompileJsonSchemaText(deep).ok());
  std::string big_enum = R"({"enum":[)";
  for (int i = 0; i < 20000; ++i) big_enum += (i ? "," : "") + std::to_string(i);
  big_enum += "]}";
  EXPECT_FALSE(CompileJsonSchemaText(big_enum).ok());
  EXPECT_FALSE(CompileJsonSchemaText(R"({"type":"string","pattern":"(a|aa)*a.{30}$"})").ok());
  EXPECT_FALSE(CompileJsonSchemaText("{\"type\":").ok());
  // Deep text against a recursive schema: refused past the nesting bound.
  auto s = Compile(R"({"anyOf":[{"type":"integer"},{"type":"array","items":{"$ref":"#"}}]})");
  std::string text(200, '[');
  EXPECT_FALSE(Accept(s, text));
}

}  // namespace
}  // namespace pc::structured
