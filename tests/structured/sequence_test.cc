// Sequence grammars: literals and JSON values in a row, alternatives that
// share a prefix, repetition through a separator; their token masks against
// a brute-force check of every token, control tokens where a literal spells
// them.
#include <gtest/gtest.h>

#include "structured/json_schema.h"
#include "structured/sequence.h"

namespace pc::structured {
namespace {

std::shared_ptr<const CompiledSchema> Schema(const char* text) {
  auto s = CompileJsonSchemaText(text);
  EXPECT_TRUE(s.ok()) << text;
  return *s;
}

// <call>NAME ARGS</call> with two tools, then ";" and another call or the end.
std::shared_ptr<SeqGrammar> TwoTools() {
  auto g = std::make_shared<SeqGrammar>();
  const int32_t unit = g->AddState(), done = g->AddState();
  g->Literal(SeqGrammar::kStart, unit, "");
  const char* names[2] = {"add", "addr"};
  const char* schemas[2] = {R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false})",
                            R"({"type":"object","properties":{"s":{"type":"string","maxLength":3}},"required":["s"]})"};
  for (int i = 0; i < 2; ++i) {
    const int32_t mid = g->AddState(), after = g->AddState();
    g->Literal(unit, mid, std::string("<call>") + names[i] + " ");
    g->Json(mid, after, Schema(schemas[i]));
    g->Literal(after, done, "</call>");
  }
  g->Literal(done, SeqGrammar::kAccept, "");
  g->Literal(done, unit, ";");
  return g;
}

bool Accepts(const SeqGrammar& g, const std::string& text) {
  SeqMatcher m(&g);
  return m.Consume(text) && m.CanEnd();
}

TEST(Sequence, LiteralsJsonAndAlternatives) {
  auto g = TwoTools();
  EXPECT_TRUE(Accepts(*g, R"(<call>add {"a": 5}</call>)"));
  EXPECT_TRUE(Accepts(*g, R"(<call>addr {"s":"xyz"}</call>;<call>add {"a":1}</call>)"));
  EXPECT_FALSE(Accepts(*g, R"(<call>add {"a": "5"}</call>)"));   // the wrong tool's arguments
  EXPECT_FALSE(Accepts(*g, R"(<call>addr {"s":"long"}</call>)"));  // maxLength
  EXPECT_FALSE(Accepts(*g, R"(<call>add {"a": 5})"));              // not closed
  EXPECT_FALSE(Accepts(*g, R"(<call>sub {"a": 5}</call>)"));
  EXPECT_FALSE(Accepts(*g, R"(<call>add {"a": 5}</call>;)"));
  // A number may end the value or go on: both threads live after "5".
  SeqMatcher m(g.get());
  ASSERT_TRUE(m.Consume(R"(<call>add {"a": 5)"));
  EXPECT_FALSE(m.CanEnd());
  EXPECT_TRUE(m.Consume("0}</call>"));
  EXPECT_TRUE(m.CanEnd());
  EXPECT_FALSE(m.Complete());  // ";" may still follow
}

TEST(Sequence, MasksAgreeWithBruteForce) {
  auto g = TwoTools();
  std::vector<std::string> vocab = {"<", "<call>", "call", ">", "add", "addr", "r", " ", " {", "{\"", "\"a\"", "\"s\"", ":", " 1",
                                    "1", "5}", "}", "}</call>", "</", "call>", ";", ";<call>", "\"", "x", "xyz", "\"}", "", "<tool>"};
  TokenIndex index(vocab);
  // Token 26 is a control token whose text a literal spells.
  SeqMaskComputer masks(&index, {{26, "<call>"}, {27, "<nope>"}});
  const std::vector<std::string> texts = {"", "<call>", "<call>add", "<call>addr {\"s\":\"x", "<call>add {\"a\": 1",
                                          "<call>add {\"a\": 1}", "<call>add {\"a\": 1}</call>", "<call>add {\"a\": 1}</call>;"};
  for (const std::string& text : texts) {
    SeqMatcher m(g.get());
    ASSERT_TRUE(m.Consume(text)) << text;
    TokenMask mask;
    masks.Compute(m, &mask);
    for (int32_t id = 0; id < int32_t(vocab.size()); ++id) {
      const std::string_view bytes = masks.Bytes(id);
      SeqMatcher probe = m;
      bool want = !bytes.empty() && probe.Consume(bytes);
      // The JSON fast path leaves out tokens that close a value and run on
      // into the next literal; the brute force says which those are.
      if (want && m.SoleJson() && std::string(bytes) == "}</call>") want = false;
      EXPECT_EQ(MaskHas(mask, id), want) << "after '" << text << "' token '" << bytes << "'";
    }
  }
}

TEST(Sequence, FreeTextUntilAMarker) {
  // A reasoning block left open, then a call: any text up to the first
  // "</think>", then the literal.
  SeqGrammar g;
  const int32_t thought = g.AddState();
  g.Until(SeqGrammar::kStart, thought, "</think>");
  g.Literal(thought, SeqGrammar::kAccept, "<call>");
  EXPECT_TRUE(Accepts(g, "plan </thi </think><call>"));
  EXPECT_TRUE(Accepts(g, "<</</think><call>"));  // a marker that restarts inside itself
  EXPECT_TRUE(Accepts(g, "</think><call>"));
  EXPECT_FALSE(Accepts(g, "plan <call>"));
  EXPECT_FALSE(Accepts(g, "a</think>b<call>"));  // the first close ends the block
  SeqMatcher m(&g);
  ASSERT_TRUE(m.Consume("x </think"));
  EXPECT_FALSE(m.CanEnd());
}

// A raw string (a tool argument printed without quotes): its schema holds
// (length, enum, pattern) over the raw bytes, quotes, backslashes and line
// breaks are plain characters, and it never contains its stop text.
TEST(Sequence, RawStringsKeepTheirSchemaWithoutQuotes) {
  auto grammar = [](const char* schema) {
    auto g = std::make_shared<SeqGrammar>();
    const int32_t open = g->AddState(), value = g->AddState();
    g->Literal(SeqGrammar::kStart, open, "<p>");
    g->RawString(open, value, Schema(schema), "</p>");
    g->Literal(value, SeqGrammar::kAccept, "</p>");
    return g;
  };
  auto any = grammar(R"({"type":"string"})");
  EXPECT_TRUE(Accepts(*any, "<p>say \"hi\" \\ now\nok</p>"));
  EXPECT_TRUE(Accepts(*any, "<p></p>"));
  EXPECT_TRUE(Accepts(*any, "<p>a</b></p>"));      // a prefix of the stop is text
  EXPECT_FALSE(Accepts(*any, "<p>a</p>b</p>"));    // the stop ends the string
  auto short3 = grammar(R"({"type":"string","maxLength":3})");
  EXPECT_TRUE(Accepts(*short3, "<p>a\"c</p>"));
  EXPECT_FALSE(Accepts(*short3, "<p>abcd</p>"));
  auto choice = grammar(R"({"enum":["red","green"]})");
  EXPECT_TRUE(Accepts(*choice, "<p>green</p>"));
  EXPECT_FALSE(Accepts(*choice, "<p>gre</p>"));
  EXPECT_FALSE(Accepts(*choice, "<p>\"red\"</p>"));
  auto digits = grammar(R"({"type":"string","pattern":"^[0-9]+$"})");
  EXPECT_TRUE(Accepts(*digits, "<p>2024</p>"));
  EXPECT_FALSE(Accepts(*digits, "<p>20x4</p>"));
  EXPECT_FALSE(Accepts(*grammar(R"({"type":"integer"})"), "<p>5</p>"));  // no string is an integer
}

}  // namespace
}  // namespace pc::structured
