// promptcache json-schema-check on the shared MaskBench sample (340 real
// schemas, labelled instances, GPT-2's vocabulary): the issue's bars, at
// least 85% of schemas passing and no invalid instance accepted, and the
// output's shape.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>

#include "test_support.h"

namespace pc::test {
namespace {

TEST(JsonSchemaCheck, SharedSchemasPassAndNoInvalidInstanceIsAccepted) {
  PC_SHARED_OR_SKIP(vocab, "tokenizer/ggml-vocab-gpt-2.gguf");
  PC_SHARED_OR_SKIP(dir, "jsonschema");
  int code = 0;
  // The sanitizer tree checks the 40 Kubernetes schemas only (5-10x slower).
#ifdef PROMPTCACHE_SANITIZER_BUILD
  const std::string files = dir + "/Kubernetes.jsonl";
  const int expected = 40;
#else
  const std::string files = dir + "/*.jsonl";
  const int expected = 340;
#endif
  std::string out = RunCommand("cat " + files + " | " PROMPTCACHE_BINARY " json-schema-check -m " + vocab, &code);
  ASSERT_EQ(code, 0) << out;
  std::istringstream lines(out);
  std::string line;
  nlohmann::json summary;
  int rows = 0;
  while (std::getline(lines, line)) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("summary")) { summary = j["summary"]; continue; }
    ++rows;
    ASSERT_TRUE(j.contains("name") && j.contains("compiled") && j.contains("compile_us") && j["results"].is_array()) << line;
    if (!j["compiled"].get<bool>()) {
      EXPECT_FALSE(j["error"].get<std::string>().empty()) << line;
    }
  }
  ASSERT_FALSE(summary.is_null()) << out.substr(0, 2000);
  EXPECT_EQ(rows, expected);
  EXPECT_EQ(summary["schemas"].get<int>(), expected);
  EXPECT_EQ(summary["invalid_accepted"].get<int>(), 0);
  EXPECT_GE(summary["passing"].get<double>(), 0.85 * expected) << summary.dump();
  EXPECT_GT(summary["masks"].get<int>(), 50 * expected);
}

TEST(JsonSchemaCheck, AMislabelledInstanceFailsItsSchema) {
  PC_SHARED_OR_SKIP(vocab, "tokenizer/ggml-vocab-gpt-2.gguf");
  const std::string input =
      R"({"name":"t","schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},)"
      R"("tests":[{"valid":true,"text":"{\"a\":1}"},{"valid":true,"text":"{\"a\":\"1\"}"},{"valid":false,"text":"{}"}]})";
  int code = 0;
  std::string out = RunCommand("echo '" + input + "' | " PROMPTCACHE_BINARY " json-schema-check -m " + vocab, &code);
  ASSERT_EQ(code, 0) << out;
  std::istringstream lines(out);
  std::string first, second;
  std::getline(lines, first);
  std::getline(lines, second);
  nlohmann::json row = nlohmann::json::parse(first), summary = nlohmann::json::parse(second)["summary"];
  EXPECT_EQ(row["results"], nlohmann::json::parse("[true,false,false]"));
  EXPECT_EQ(summary["passing"], 0);
  EXPECT_EQ(summary["valid_rejected"], 1);
  EXPECT_EQ(summary["invalid_accepted"], 0);
}

}  // namespace
}  // namespace pc::test
