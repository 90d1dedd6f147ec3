// Grammars of literal text and JSON values in sequence: the shape of a tool
// call (`<tool_call>\n{"name": "f", "arguments": ` + a JSON value of f's
// parameters + `}\n</tool_call>`), and a plain JSON schema as its simplest
// case (one JSON edge). A SeqGrammar is a small graph whose edges are
// segments; a SeqMatcher walks it byte by byte with parallel threads (the
// edges leaving a state are tried together, so alternatives that share a
// prefix, such as tool names, stay alive until their bytes differ).
//
// A JSON edge is left when its value may end: the next byte goes both to the
// value (more digits, bounded whitespace) and to the edges after it.
// Shapes: at most kMaxThreads threads; a thread holds a JsonMatcher only on
// a JSON edge (about 16 KiB, shared between copies of the SeqMatcher).
// Thread-safety: a SeqGrammar is immutable once built and shared by
// requests; a SeqMatcher is a plain value owned by one request.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "structured/gbnf.h"
#include "structured/json_matcher.h"
#include "structured/token_mask.h"

namespace pc::structured {

struct SeqEdge {
  int32_t from = 0, to = 0;
  std::string literal;                  // a literal edge (non-empty; with until: any text up to and
  bool until = false;                   //   including the literal's first occurrence; raw strings: their stop), or
  const CompiledSchema* schema = nullptr;  // a JSON edge: a value of node (with raw_string: a string
  int32_t node = -1;                       //   of node written without quotes or escapes), or
  bool raw_string = false;
  const GbnfGrammar* gbnf = nullptr;       // a GBNF edge: a sentence of its root
  bool literal_edge() const { return schema == nullptr && gbnf == nullptr; }
};

struct SeqGrammar {
  int32_t n_states = 2;  // 0: start, 1: accept
  static constexpr int32_t kStart = 0, kAccept = 1;
  std::vector<SeqEdge> edges;
  std::vector<std::shared_ptr<const CompiledSchema>> schemas;  // keeps the JSON edges' schemas alive
  std::vector<std::shared_ptr<const GbnfGrammar>> gbnfs;     // and the GBNF edges' grammars
  int max_whitespace = 2;  // per gap inside JSON values

  int32_t AddState() { return n_states++; }
  // Empty literals are skipped by joining the states (from -> to must then be
  // a fresh state; used only when building chains).
  void Literal(int32_t from, int32_t to, std::string text);
  // Free text that ends at the first occurrence of text (a reasoning block's
  // close marker).
  void Until(int32_t from, int32_t to, std::string text);
  void Json(int32_t from, int32_t to, std::shared_ptr<const CompiledSchema> schema, int32_t node);
  void Json(int32_t from, int32_t to, std::shared_ptr<const CompiledSchema> schema);  // its root
  // A string valid for the schema's root, as raw text (no quotes, no
  // escapes: a tool argument printed as it is) that never contains stop
  // (the text that follows it and says where it ends; non-empty).
  void RawString(int32_t from, int32_t to, std::shared_ptr<const CompiledSchema> schema, std::string stop);
  void Gbnf(int32_t from, int32_t to, std::shared_ptr<const GbnfGrammar> grammar);
  // One JSON value of schema and nothing else.
  static std::shared_ptr<const SeqGrammar> ForSchema(std::shared_ptr<const CompiledSchema> schema, int max_whitespace);
};

// A JsonMatcher inside a string value fed raw text: each byte goes in as
// its JSON escape, and the value may end wherever a closing quote could.
class RawStringMatcher {
 public:
  RawStringMatcher() = default;
  // opened: after the opening quote; stop: the text it never contains
  // (outlives the matcher: the grammar's edge holds it).
  RawStringMatcher(JsonMatcher opened, const std::string* stop) : m_(std::move(opened)), stop_(stop) {}
  bool Advance(uint8_t byte, RawStringMatcher* out) const;
  bool CanEnd() const;
  bool Complete() const { return CanEnd(); }

 private:
  JsonMatcher m_;
  const std::string* stop_ = nullptr;
  uint32_t stop_pos_ = 0;  // the longest prefix of *stop_ the text ends with
};

class SeqMatcher {
 public:
  static constexpr int kMaxThreads = 128;  // one per tool name at a call's start
  SeqMatcher() = default;
  explicit SeqMatcher(const SeqGrammar* g);  // before the first byte

  bool Advance(uint8_t byte, SeqMatcher* out) const;
  bool Consume(std::string_view bytes);
  // Whether the text so far is a whole sentence of the grammar.
  bool CanEnd() const;
  // Whether it is whole and nothing but whitespace may follow.
  bool Complete() const;
  bool dead() const { return threads_.empty() && !at_accept_; }
  // The one JSON value the next bytes must continue (a single thread inside
  // a value that cannot end yet): its matcher, for the fast mask path.
  const JsonMatcher* SoleJson() const;
  // The literal bytes every thread expects next, when all are on literal
  // edges: (edge, offset) pairs for the control-token check.
  struct LitPos {
    int32_t edge;
    uint32_t pos;
  };
  std::vector<LitPos> Literals() const;
  const SeqGrammar* grammar() const { return g_; }

 private:
  struct Thread {
    int32_t edge = 0;
    uint32_t pos = 0;  // literal edges: bytes matched
    std::shared_ptr<const JsonMatcher> json;  // JSON edges (shared by copies: never changed once made)
    std::shared_ptr<const GbnfMatcher> gbnf;  // GBNF edges (the same)
    std::shared_ptr<const RawStringMatcher> raw;  // raw-string edges (the same)
  };
  // Threads at the start of each edge leaving state (accept noted).
  void Enter(int32_t state, SeqMatcher* out) const;
  void Step(const Thread& t, uint8_t byte, SeqMatcher* out) const;
  template <typename M>
  void StepInside(const Thread& t, const M& m, std::shared_ptr<const M> Thread::*slot, uint8_t byte, SeqMatcher* out) const;

  const SeqGrammar* g_ = nullptr;
  std::vector<Thread> threads_;
  bool at_accept_ = false;
};

// The tokens a SeqMatcher allows next. Vocabulary control tokens (empty in
// the TokenIndex) are allowed where a literal spells their text exactly, so
// a marker goes out as the special token the model was trained on.
// Thread-safety: one per thread (it owns a MaskComputer's scratch).
class SeqMaskComputer {
 public:
  // control: (id, text) of the vocabulary's control tokens.
  SeqMaskComputer(const TokenIndex* index, std::vector<std::pair<int32_t, std::string>> control);
  void Compute(const SeqMatcher& m, TokenMask* mask);
  // The bytes a token stands for inside a grammar (control tokens: their text).
  std::string_view Bytes(int32_t id) const;

 private:
  const TokenIndex* index_;
  std::vector<std::pair<int32_t, std::string>> control_;
  std::vector<int32_t> control_of_;  // id -> index into control_, or -1
  MaskComputer json_;
  std::vector<SeqMatcher> stack_;
};

}  // namespace pc::structured
