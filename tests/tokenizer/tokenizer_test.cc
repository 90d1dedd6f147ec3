// Tokenizer parity with the shared test vectors, pre-tokenizer variants,
// special tokens and the streaming detokenizer.
#include <algorithm>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test_support.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace pc {
namespace {

struct Vector {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<Vector> LoadVectors(const std::string& inp_path, const std::string& out_path) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::string inp = test::ReadText(inp_path);
  std::vector<std::string> texts;
  size_t pos = 0;
  for (size_t hit; (hit = inp.find(sep, pos)) != std::string::npos; pos = hit + sep.size()) {
    texts.push_back(inp.substr(pos, hit - pos));
  }
  if (pos < inp.size()) texts.push_back(inp.substr(pos));
  std::istringstream out(test::ReadText(out_path));
  std::vector<Vector> vectors;
  std::string line;
  for (size_t i = 0; i < texts.size() && std::getline(out, line); ++i) {
    Vector v{texts[i], {}};
    std::istringstream ids(line);
    int32_t id;
    while (ids >> id) v.ids.push_back(id);
    vectors.push_back(std::move(v));
  }
  EXPECT_EQ(vectors.size(), texts.size()) << "one output line per test string";
  return vectors;
}

Result<Tokenizer> LoadTokenizer(const std::string& path) {
  PC_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::Open(path));
  return Tokenizer::FromGguf(gguf);
}

void CheckVocab(const std::string& name) {
  PC_SHARED_OR_SKIP(gguf_path, "tokenizer/" + name + ".gguf");
  PC_SHARED_OR_SKIP(inp_path, "tokenizer/" + name + ".gguf.inp");
  PC_SHARED_OR_SKIP(out_path, "tokenizer/" + name + ".gguf.out");
  auto gguf = GgufFile::Open(gguf_path);
  ASSERT_TRUE(gguf.ok()) << gguf.status().message();
  auto tok = Tokenizer::FromGguf(*gguf);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  const auto vectors = LoadVectors(inp_path, out_path);
  ASSERT_GT(vectors.size(), 10u);
  int passed = 0;
  for (const Vector& v : vectors) {
    const auto ids = tok->Encode(v.text, {.add_special = false, .parse_special = false});
    EXPECT_EQ(ids, v.ids) << name << ": '" << v.text << "'";
    passed += ids == v.ids;
  }
  std::printf("%s: %d/%zu vectors exact\n", name.c_str(), passed, vectors.size());
}

TEST(TokenizerVectors, LlamaSpm) { CheckVocab("ggml-vocab-llama-spm"); }
TEST(TokenizerVectors, Gpt2Bpe) { CheckVocab("ggml-vocab-gpt-2"); }

TEST(Tokenizer, SpmAddsBosAndParsesSpecialOnlyWhenAsked) {
  PC_SHARED_OR_SKIP(path, "models/stories260K.gguf");
  auto tok = LoadTokenizer(path);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  // The reference tokenization of "Once upon a time" with BOS.
  EXPECT_EQ(tok->Encode("Once upon a time"), (std::vector<int32_t>{1, 403, 407, 261, 378}));
  const auto plain = tok->Encode("</s>", {.add_special = false, .parse_special = false});
  EXPECT_NE(plain, std::vector<int32_t>{2});
  const auto special = tok->Encode("</s>", {.add_special = false, .parse_special = true});
  EXPECT_EQ(special, std::vector<int32_t>{2});
}

// Special-token texts are found by one trie walk: the earliest match wins,
// the longest there; many repetitions come out one id each (the old rescan
// was quadratic in them), text between them is encoded as text.
TEST(Tokenizer, SpecialTokensPartitionEarliestLongestInOnePass) {
  SpecialTrie t;
  t.Add("<s>", 1);
  t.Add("<s>x", 7);
  t.Add("</s>", 2);
  t.Add("<s>", 9);  // same text again: the first id stays
  auto all = [](int32_t, size_t, size_t) { return true; };
  SpecialTrie::Match m = t.Find("ab</s><s>x", 0, all);
  EXPECT_EQ(m.pos, 2u);
  EXPECT_EQ(m.id, 2);
  m = t.Find("ab</s><s>x", 6, all);
  EXPECT_EQ(m.pos, 6u);
  EXPECT_EQ(m.id, 7);  // the longest at that position
  EXPECT_EQ(m.len, 4u);
  m = t.Find("ab</s><s>x", 6, [](int32_t id, size_t, size_t) { return id != 7; });
  EXPECT_EQ(m.id, 1);
  EXPECT_EQ(t.Find("<<<s", 0, all).id, -1);

  PC_SHARED_OR_SKIP(path, "models/stories260K.gguf");
  auto tok = LoadTokenizer(path);
  ASSERT_TRUE(tok.ok());
  std::string many;
  for (int i = 0; i < 100000; ++i) many += "<s>";
  const auto ids = tok->Encode(many + " end", {.add_special = false, .parse_special = true});
  ASSERT_GT(ids.size(), 100000u);
  EXPECT_TRUE(std::all_of(ids.begin(), ids.begin() + 100000, [](int32_t id) { return id == 1; }));
  EXPECT_EQ(tok->Decode(std::vector<int32_t>(ids.begin() + 100000, ids.end())), " end");
  // Not parsed: plain text, far more tokens than the 300 KB hold specials.
  EXPECT_GT(tok->Encode(many, {.add_special = false, .parse_special = false}).size(), 100000u);
  EXPECT_GE(tok->max_token_bytes(), 3u);  // "</s>" renders as its text when parsed
}

TEST(Tokenizer, DecodeRoundTripsSpmText) {
  PC_SHARED_OR_SKIP(path, "tokenizer/ggml-vocab-llama-spm.gguf");
  auto tok = LoadTokenizer(path);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  const std::string text = "Hello world! Ünïcödé and emoji \xF0\x9F\xA6\x99 too.";
  const auto ids = tok->Encode(text, {.add_special = false});
  EXPECT_EQ(tok->Decode(ids), " " + text);  // SPM's leading space prefix
}

TEST(Tokenizer, DecodeRoundTripsBpeText) {
  PC_SHARED_OR_SKIP(path, "tokenizer/ggml-vocab-gpt-2.gguf");
  auto tok = LoadTokenizer(path);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  const std::string text = "  Hello\n\nworld's 12345 \xF0\x9F\xA6\x99 tabs\there";
  EXPECT_EQ(tok->Decode(tok->Encode(text, {.add_special = false})), text);
}

TEST(PreTokenizer, EveryNamedVariantCompilesAndUnknownIsAnError) {
  for (const std::string& name : KnownPreTokenizers()) {
    auto pt = PreTokenizer::ForName(name);
    ASSERT_TRUE(pt.ok()) << name << ": " << pt.status().message();
    // Splitting then joining loses nothing.
    const std::string text = "Hello, world! It's 2024: 12345 apples\n\n  and 日本語 text";
    std::string joined;
    for (const auto& piece : (*pt)->Split(text)) joined += piece;
    EXPECT_EQ(joined, text) << name;
  }
  auto bad = PreTokenizer::ForName("no-such-tokenizer");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no-such-tokenizer"), std::string::npos);
}

TEST(PreTokenizer, VariantsSplitDigitsAsPublished) {
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& p : v) s += "[" + p + "]";
    return s;
  };
  EXPECT_EQ(join((*PreTokenizer::ForName("llama3"))->Split("12345")), "[123][45]");
  EXPECT_EQ(join((*PreTokenizer::ForName("qwen2"))->Split("123")), "[1][2][3]");
  EXPECT_EQ(join((*PreTokenizer::ForName("starcoder"))->Split("a12")), "[a][1][2]");
  EXPECT_EQ(join((*PreTokenizer::ForName("gpt2"))->Split("Hi there's")), "[Hi][ there]['s]");
  EXPECT_EQ(join((*PreTokenizer::ForName("deepseek-coder"))->Split("ab\ncd")), "[ab][\n][cd]");
}

// Every GGUF pre-tokenizer name splits as Python's regex engine splits with
// the published patterns (tests/data, made by scripts/pretokenizer_vectors.py).
TEST(PreTokenizer, EveryNameSplitsAsAnIndependentRegexEngine) {
  std::istringstream in(test::ReadText(std::string(PROMPTCACHE_TEST_DATA) + "/pretokenizer_splits.jsonl"));
  std::set<std::string> names;
  int checked = 0;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    const std::string name = j["pre"];
    names.insert(name);
    auto pt = PreTokenizer::ForName(name);
    ASSERT_TRUE(pt.ok()) << name << ": " << pt.status().message();
    EXPECT_EQ((*pt)->Split(j["text"]), j["pieces"].get<std::vector<std::string>>()) << name << " on " << j["text"];
    ++checked;
  }
  EXPECT_GE(checked, 600);
  for (const char* must : {"llama-bpe", "qwen2", "smollm", "gpt-4o", "phi-2", "tekken", "deepseek-r1-qwen", "dbrx"}) {
    EXPECT_TRUE(names.count(must)) << must;
  }
  // Every name we accept is covered.
  for (const std::string& name : KnownPreTokenizers()) EXPECT_TRUE(names.count(name)) << name << " has no vectors";
}

Vocab TinyBpeVocab(const std::string& pre, std::vector<std::string> extra_control) {
  Vocab v;
  v.model = VocabModel::kBpe;
  v.pre = pre;
  auto add = [&](const std::string& t, TokenKind k) {
    v.id_of.emplace(t, v.size());
    v.text.push_back(t);
    v.score.push_back(0);
    v.kind.push_back(k);
  };
  for (int b = 0; b < 256; ++b) add(ByteToUnicode()[b], TokenKind::kNormal);
  for (int b = 0; b < 256; ++b) v.byte_token[b] = b;
  add("ab", TokenKind::kNormal);    // reachable by the merge a+b
  add("abc", TokenKind::kNormal);   // no merge reaches it
  v.merge_rank.emplace("a\nb", 0);
  for (const std::string& t : extra_control) add(t, TokenKind::kControl);
  return v;
}

TEST(Tokenizer, Llama3AndTekkenTakeAWholeVocabularyPreTokenWithoutMerging) {
  for (const char* pre : {"llama-bpe", "tekken", "gpt2"}) {
    Vocab v = TinyBpeVocab(pre, {});
    v.ignore_merges = ConventionsFor(pre).ignore_merges;
    auto tok = Tokenizer::FromVocab(v);
    ASSERT_TRUE(tok.ok()) << tok.status().message();
    const std::vector<int32_t> ids = tok->Encode("abc", {.add_special = false});
    if (std::string(pre) == "gpt2") EXPECT_EQ(ids, (std::vector<int32_t>{256, 'c'})) << pre;
    else EXPECT_EQ(ids, (std::vector<int32_t>{257})) << pre;
  }
  EXPECT_TRUE(ConventionsFor("llama-bpe").add_bos_by_default);
  EXPECT_FALSE(ConventionsFor("qwen2").add_bos_by_default);
}

TEST(Tokenizer, TurnClosingTokensEndGeneration) {
  Vocab v = TinyBpeVocab("qwen2", {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|eot_id|>", "<|return|>",
                                   "<|call|>", "<|end|>", "<end_of_turn>"});
  v.eos = v.id_of["<|endoftext|>"];
  auto tok = Tokenizer::FromVocab(v);
  ASSERT_TRUE(tok.ok());
  for (const char* t : {"<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|return|>", "<|call|>", "<end_of_turn>"}) {
    EXPECT_TRUE(tok->IsEndOfGeneration(v.id_of[t])) << t;
  }
  // <|start|>-style openers never end a turn; with <|return|> and <|call|>
  // present, <|end|> closes a message inside a turn (harmony), not the turn.
  EXPECT_FALSE(tok->IsEndOfGeneration(v.id_of["<|im_start|>"]));
  EXPECT_FALSE(tok->IsEndOfGeneration(v.id_of["<|end|>"]));
  EXPECT_FALSE(tok->IsEndOfGeneration(v.id_of["abc"]));
  Vocab phi = TinyBpeVocab("gpt2", {"<|end|>"});
  auto phi_tok = Tokenizer::FromVocab(phi);
  ASSERT_TRUE(phi_tok.ok());
  EXPECT_TRUE(phi_tok->IsEndOfGeneration(phi.id_of["<|end|>"]));
}

TEST(PreTokenizer, InvalidUtf8StaysOnePieceWithoutCrashing) {
  auto pt = PreTokenizer::ForName("gpt2");
  ASSERT_TRUE(pt.ok());
  const std::string bad = "ok \xff\xfe broken";
  std::string joined;
  for (const auto& piece : (*pt)->Split(bad)) joined += piece;
  EXPECT_EQ(joined, bad);
}

TEST(StreamDecoder, HoldsBackIncompleteUtf8) {
  EXPECT_EQ(CompleteUtf8Prefix("abc"), 3u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\xe6"), 2u);          // 3-byte lead alone
  EXPECT_EQ(CompleteUtf8Prefix("ab\xe6\x97"), 2u);      // 2 of 3 bytes
  EXPECT_EQ(CompleteUtf8Prefix("ab\xe6\x97\xa5"), 5u);  // complete
  EXPECT_EQ(CompleteUtf8Prefix("\xf0\x9f\xa6"), 0u);
  EXPECT_EQ(CompleteUtf8Prefix(""), 0u);
}

TEST(StreamDecoder, EmitsCompleteCharactersFromByteTokens) {
  PC_SHARED_OR_SKIP(path, "tokenizer/ggml-vocab-llama-spm.gguf");
  auto tok = LoadTokenizer(path);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  // An emoji is rare enough to be spelled with byte-fallback tokens.
  const auto ids = tok->Encode("\xF0\x9F\xA6\x99!", {.add_special = false});
  StreamDecoder dec(*tok);
  std::vector<std::string> outs;
  std::string all;
  for (int32_t id : ids) {
    outs.push_back(dec.Push(id));
    all += outs.back();
    // Every emitted chunk is itself complete UTF-8.
    EXPECT_EQ(CompleteUtf8Prefix(outs.back()), outs.back().size());
  }
  all += dec.Flush();
  EXPECT_EQ(all, " \xF0\x9F\xA6\x99!");
  EXPECT_GT(ids.size(), 3u) << "expected byte-fallback tokens";
}

}  // namespace
}  // namespace pc
