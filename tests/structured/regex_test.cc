// The regex subset against std::regex (ECMAScript, regex_search) on random
// strings, prefix viability, and the refusals.
#include <gtest/gtest.h>

#include <random>
#include <regex>

#include "structured/regex.h"

namespace pc::structured {
namespace {

TEST(Regex, AgreesWithStdRegexOnRandomStrings) {
  const char* patterns[] = {
      "abc", "^abc$", "^a*b+c?$", "a|b|cd", "^(ab|a)(c|bcd)$", "[a-c]{2,3}", "^[^ab]{2}$", "^a{3}$", "^(a|b)*c$",
      "^\\d+(\\.\\d+)?$", "\\w\\s", "^[a-z0-9-]+$", "^$", "b$", "^(?:a|bc)+$", "^[\\d.]+$", "^a.c$", "^[-a]$",
      "^(a{1,2}){2}$", "x*", "^[A-Z][a-z]*( [A-Z][a-z]*)*$", "(^a|b$)", "^\\.\\*$", "^[\\]a]$", "ab{0,}c",
  };
  const std::string alphabet = "abcdxyzAB01. -*]\n";
  std::mt19937 rng(11);
  for (const char* p : patterns) {
    Result<ByteDfa> dfa = CompileRegex(p, true);
    ASSERT_TRUE(dfa.ok()) << p << ": " << dfa.status().message();
    std::regex re(p, std::regex::ECMAScript);
    for (int i = 0; i < 400; ++i) {
      std::string s;
      int len = int(rng() % 7);
      for (int k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
      // std::regex's ^/$ are not multiline by default: the same semantics.
      EXPECT_EQ(dfa->Matches(s), std::regex_search(s, re)) << "pattern " << p << " on '" << s << "'";
    }
  }
}

TEST(Regex, AnchoredModeMatchesWholeString) {
  Result<ByteDfa> dfa = CompileRegex("[0-9]{2}", false);
  ASSERT_TRUE(dfa.ok());
  EXPECT_TRUE(dfa->Matches("12"));
  EXPECT_FALSE(dfa->Matches("123"));
  EXPECT_FALSE(dfa->Matches("a12"));
}

TEST(Regex, DeadStateMeansNoCompletion) {
  Result<ByteDfa> dfa = CompileRegex("^ab(c|d)$", true);
  ASSERT_TRUE(dfa.ok());
  int32_t s = ByteDfa::kStart;
  s = dfa->Next(s, 'a');
  ASSERT_NE(s, ByteDfa::kDead);
  s = dfa->Next(s, 'b');
  ASSERT_NE(s, ByteDfa::kDead);
  EXPECT_FALSE(dfa->Accepting(s));
  EXPECT_EQ(dfa->Next(s, 'x'), ByteDfa::kDead);
  EXPECT_TRUE(dfa->Accepting(dfa->Next(s, 'd')));
  EXPECT_EQ(dfa->Next(dfa->Next(s, 'd'), 'd'), ByteDfa::kDead);  // after $: nothing
}

TEST(Regex, CodePointsAreUtf8Sequences) {
  Result<ByteDfa> dot = CompileRegex("^.{2}$", true);
  ASSERT_TRUE(dot.ok());
  EXPECT_TRUE(dot->Matches("\xC3\xA9\xE2\x82\xAC"));  // two code points, five bytes
  EXPECT_FALSE(dot->Matches("\xC3\xA9"));
  EXPECT_FALSE(dot->Matches("\xC3"));  // not UTF-8
  Result<ByteDfa> range = CompileRegex("^[\\u00e0-\\u00ff\\u4e00-\\u9fa5]+$", true);
  ASSERT_TRUE(range.ok());
  EXPECT_TRUE(range->Matches("\xC3\xA9\xE4\xB8\xAD"));  // é, 中
  EXPECT_FALSE(range->Matches("e"));
  Result<ByteDfa> neg = CompileRegex("^[^a]$", true);
  ASSERT_TRUE(neg.ok());
  EXPECT_TRUE(neg->Matches("\xF0\x9F\x98\x80"));  // an emoji is one code point
  EXPECT_FALSE(neg->Matches("a"));
}

TEST(Regex, RefusesWhatItCannotEnforce) {
  for (const char* p : {"(?=a)b", "\\bword", "(a)\\1", "(?i)a", "a**", "(", "[a", "a{3,1}", "\\p{L}"}) {
    Result<ByteDfa> dfa = CompileRegex(p, true);
    EXPECT_FALSE(dfa.ok()) << p;
  }
}

TEST(Regex, ExplosiveAutomataAreBoundedErrors) {
  // Search for "an 'a' 25 characters before the end": 2^25 subsets.
  Result<ByteDfa> dfa = CompileRegex("a.{25}$", true);
  ASSERT_FALSE(dfa.ok());
  EXPECT_NE(dfa.status().message().find("too complex"), std::string::npos);
  Result<ByteDfa> big = CompileRegex("(a{1000}){1000}", true);
  EXPECT_FALSE(big.ok());
}

}  // namespace
}  // namespace pc::structured
