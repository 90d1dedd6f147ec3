// Masks against the definition: a token is allowed exactly when the matcher
// accepts all its bytes. Checked at every prefix of valid texts, over a
// vocabulary of single bytes and JSON-looking fragments (and GPT-2's when
// ../shared is there), so the precomputed plain sets, the memoised DFA walks
// and the thread unions all meet the plain walk.
#include <gtest/gtest.h>

#include <random>

#include "gguf/gguf.h"
#include "structured/token_mask.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace pc::structured {
namespace {

std::vector<std::string> SyntheticVocab() {
  std::vector<std::string> v;
  for (int b = 1; b < 256; ++b) v.push_back(std::string(1, char(b)));
  const char* pieces[] = {"\"", "\":", "\":\"", "\",\"", "\"}", "\"]", "{\"", "[\"", "},", "},{", "true", "false", "null",
                          "12", "3.5", "-1", "e+", "ab", "abc", "2024", "-02-", "29", "T1", ":30", "Z\"", "\\n", "\\\"",
                          "\\u00", "1f", "\xC3\xA9", "\xC3", "\xA9x", "\xE4\xB8\xAD", "  ", " \"", "name", "na", "me\"",
                          "id", "\":1", ",\"", "n_", "ab-", "-1\"", "x\",\"", "red\"", "gre", "en"};
  for (const char* p : pieces) v.push_back(p);
  v.push_back("");  // a control token: never allowed
  return v;
}

void ExpectMasksExact(const TokenIndex& index, const std::string& schema_text, const std::vector<std::string>& texts) {
  auto schema = CompileJsonSchemaText(schema_text);
  ASSERT_TRUE(schema.ok()) << schema_text << ": " << schema.status().message();
  MaskComputer masks(&index);
  TokenMask mask;
  for (const std::string& text : texts) {
    JsonMatcher m(schema->get(), 1);
    for (size_t i = 0; i <= text.size(); ++i) {
      masks.Compute(m, &mask);
      for (int32_t id = 0; id < index.n_tokens(); ++id) {
        JsonMatcher probe(m);
        bool want = !index.bytes(id).empty() && probe.Consume(index.bytes(id));
        ASSERT_EQ(MaskHas(mask, id), want) << schema_text << " after '" << text.substr(0, i) << "' token '" << index.bytes(id) << "'";
      }
      if (i < text.size()) {
        ASSERT_TRUE(m.Consume(text.substr(i, 1))) << text.substr(0, i + 1);
      }
    }
    EXPECT_TRUE(m.CanEnd()) << text;
  }
}

const std::vector<std::pair<std::string, std::vector<std::string>>>& Cases() {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {R"({"type":"object","properties":{"name":{"type":"string","maxLength":4},"id":{"type":"integer","maximum":300}},"required":["id"]})",
       {"{\"name\":\"ab\xC3\xA9\",\"id\":29}", "{\"id\":12, \"x\":[true,null]}"}},
      {R"({"type":"object","properties":{"d":{"type":"string","format":"date"},"p":{"type":"string","pattern":"^ab-[0-9]+$"}},"additionalProperties":false})",
       {"{\"d\":\"2024-02-29\",\"p\":\"ab-12\"}"}},
      {R"({"anyOf":[{"type":"string","pattern":"^gre"},{"type":"string","maxLength":3},{"enum":["red","green"]}]})",
       {"\"green\"", "\"re\"", "\"grey\""}},
      {R"({"type":"object","patternProperties":{"^n_":{"type":"string"}},"additionalProperties":false})", {"{\"n_a\":\"\\u001f\\n\"}"}},
      {R"({"type":"array","items":{"type":"number"}})", {"[3.5,-1e+2,12]"}},
  };
  return cases;
}

TEST(TokenMask, EqualsTheMatcherOnEveryToken) {
  TokenIndex index(SyntheticVocab());
  for (const auto& [schema, texts] : Cases()) ExpectMasksExact(index, schema, texts);
}

TEST(TokenMask, EqualsTheMatcherOnGpt2Vocabulary) {
  PC_SHARED_OR_SKIP(path, "tokenizer/ggml-vocab-gpt-2.gguf");
  Result<GgufFile> gguf = GgufFile::Open(path);
  ASSERT_TRUE(gguf.ok());
  Result<Tokenizer> tok = Tokenizer::FromGguf(*gguf);
  ASSERT_TRUE(tok.ok());
  std::vector<std::string> bytes;
  for (int32_t id = 0; id < tok->n_vocab(); ++id) bytes.push_back(tok->Piece(id));
  TokenIndex index(std::move(bytes));
  // Every prefix costs a probe per token (50k): two cases, one in the
  // sanitizer tree.
#ifdef PROMPTCACHE_SANITIZER_BUILD
  const size_t cases = 1;
#else
  const size_t cases = 2;
#endif
  for (size_t c = 0; c < cases; ++c) ExpectMasksExact(index, Cases()[c].first, {Cases()[c].second[0]});
}

}  // namespace
}  // namespace pc::structured
