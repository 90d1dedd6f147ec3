// GBNF grammars: syntax (alternatives, groups over lines, repetitions,
// classes, escapes, comments), what they accept byte by byte (UTF-8 code
// points, partial ones pruned), bounded loops, clean refusals, and token
// masks that agree with a brute-force check.
#include <gtest/gtest.h>

#include "structured/gbnf.h"
#include "structured/sequence.h"

namespace pc::structured {
namespace {

std::shared_ptr<const GbnfGrammar> Compile(const std::string& text) {
  auto g = CompileGbnf(text);
  EXPECT_TRUE(g.ok()) << text << ": " << (g.ok() ? "" : g.status().message());
  return g.ok() ? *g : nullptr;
}

bool Accepts(const GbnfGrammar& g, const std::string& text) {
  GbnfMatcher m(&g);
  return m.Consume(text) && m.CanEnd();
}
bool Prefix(const GbnfGrammar& g, const std::string& text) {
  GbnfMatcher m(&g);
  return m.Consume(text);
}

TEST(Gbnf, ArithmeticWithGroupsAndRecursion) {
  auto g = Compile(R"G(# sums of numbers and brackets
root ::= expr
expr ::= term (
    ("+" | "-") term   # continued over lines inside the group
  )*
term ::= [0-9]+ | "(" expr ")"
)G");
  ASSERT_TRUE(g);
  for (const char* ok : {"1", "1+(23-4)", "((7))", "10-2+3"}) EXPECT_TRUE(Accepts(*g, ok)) << ok;
  for (const char* bad : {"", "1+", "+1", "(1", "1)", "a"}) EXPECT_FALSE(Accepts(*g, bad)) << bad;
  EXPECT_TRUE(Prefix(*g, "(1+"));
  EXPECT_FALSE(Prefix(*g, "(1+)"));
}

TEST(Gbnf, RepetitionBoundsAndOptionals) {
  auto g = Compile(R"G(root ::= "a"{2,4} "b"? ("xy"){1,} "z"{3})G");
  ASSERT_TRUE(g);
  for (const char* ok : {"aaxyzzz", "aaaabxyxyzzz", "aaabxyzzz"}) EXPECT_TRUE(Accepts(*g, ok)) << ok;
  for (const char* bad : {"axyzzz", "aaaaaxyzzz", "aazzz", "aaxyzz", "aaxyx"}) EXPECT_FALSE(Accepts(*g, bad)) << bad;
  GbnfMatcher m(g.get());
  ASSERT_TRUE(m.Consume("aaxyzzz"));
  EXPECT_TRUE(m.Complete());
}

TEST(Gbnf, ClassesEscapesAndUnicode) {
  auto g = Compile(R"G(root ::= "\"" ( [^"\\] | "\\" ["\\nt] )* "\"" [α-ω]* "\u2713" .)G");
  ASSERT_TRUE(g);
  EXPECT_TRUE(Accepts(*g, "\"a\\\"b\\n\"αβ✓!"));
  EXPECT_TRUE(Accepts(*g, "\"\"✓é"));
  EXPECT_FALSE(Accepts(*g, "\"a\\q\"✓!"));
  EXPECT_FALSE(Accepts(*g, "\"\"a✓!"));
  // A partial code point survives only if some completion is accepted.
  EXPECT_TRUE(Prefix(*g, "\"\"\xCE"));       // the lead byte of α..ω
  EXPECT_TRUE(Prefix(*g, "\"\"\xE2\x9C"));   // two bytes of ✓
  EXPECT_FALSE(Prefix(*g, "\"\"\xE2\x9D"));  // no accepted code point starts so
  EXPECT_FALSE(Prefix(*g, "\"\"\xC0\x80"));  // overlong
}

TEST(Gbnf, LongLoopsDoNotGrowTheStacks) {
  auto g = Compile("root ::= item* \"!\"\nitem ::= [a-z] | \" \"");
  ASSERT_TRUE(g);
  EXPECT_TRUE(Accepts(*g, std::string(20000, 'a') + "!"));
}

TEST(Gbnf, BadGrammarsAreRefusedWithAReason) {
  const std::pair<const char*, const char*> cases[] = {
      {"root ::= foo", "'foo' is used but not defined"},
      {"start ::= \"a\"", "no 'root'"},
      {"root ::= root \"a\" | \"a\"", "left-recursive"},
      {"root ::= x \"a\"\nx ::= y\ny ::= \"\" | x", "left-recursive"},
      {"root ::= <[123]>", "token references"},
      {"root ::= \"abc", "closing"},
      {"root ::= [a-", "closing"},
      {"root ::= \"a\"{5000}", "past 1000"},
      {"root ::= \"a\"{3,2}", "backwards"},
      {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
      {"root = \"a\"", "'::='"},
      {"root ::= \"\\q\"", "unknown escape"},
  };
  for (const auto& [text, needle] : cases) {
    auto g = CompileGbnf(text);
    ASSERT_FALSE(g.ok()) << text;
    EXPECT_NE(g.status().message().find(needle), std::string::npos) << text << ": " << g.status().message();
  }
  // Size bounds: a huge text, nested groups, repetition blow-up.
  EXPECT_FALSE(CompileGbnf("root ::= \"" + std::string(2 << 20, 'a') + "\"").ok());
  EXPECT_FALSE(CompileGbnf("root ::= " + std::string(200, '(') + "\"a\"" + std::string(200, ')')).ok());
  EXPECT_FALSE(CompileGbnf("root ::= \"" + std::string(300, 'a') + "\"{1000}").ok());
  // Groups are rules: nested repetitions stay small.
  EXPECT_TRUE(CompileGbnf("root ::= (((\"abcdefgh\"){1000}){1000}){1000}").ok());
}

TEST(Gbnf, MasksAgreeWithBruteForce) {
  auto gb = Compile("root ::= \"{\" ws pair (\",\" ws pair)* \"}\"\npair ::= [a-c]+ \":\" [0-9]{1,3}\nws ::= \" \"?");
  ASSERT_TRUE(gb);
  SeqGrammar g;
  g.Gbnf(SeqGrammar::kStart, SeqGrammar::kAccept, gb);
  std::vector<std::string> vocab = {"{", "{ ", " ", "a", "ab", "abc", "cc", ":", ":1", "1", "12", "123", "1234", ",", ", ",
                                    "}", "}}", "d", "a:1}", "\xC3", "é"};
  TokenIndex index(vocab);
  SeqMaskComputer masks(&index, {});
  for (const std::string text : {"", "{", "{ a", "{ab:", "{ab:12", "{ab:123", "{a:1,", "{a:1}"}) {
    SeqMatcher m(&g);
    ASSERT_TRUE(m.Consume(text)) << text;
    TokenMask mask;
    masks.Compute(m, &mask);
    for (int32_t id = 0; id < int32_t(vocab.size()); ++id) {
      SeqMatcher probe = m;
      EXPECT_EQ(MaskHas(mask, id), probe.Consume(vocab[size_t(id)])) << "after '" << text << "' token '" << vocab[size_t(id)] << "'";
    }
  }
}

}  // namespace
}  // namespace pc::structured
