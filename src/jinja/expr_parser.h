// Jinja expressions by recursive descent with Jinja's operator precedence,
// over one tag's tokens (lexer.h). Used by the template parser (parser.cc)
// for the expressions in {{ }} and in statements. Internal to src/jinja.
// Thread-safety: one parser per tag, on one thread.
#pragma once
#include <string>
#include <vector>

#include "base/status.h"
#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace pc::jinja {

constexpr int kMaxNesting = 200;  // expression and block nesting: untrusted templates

class ExprParser {
 public:
  ExprParser(std::vector<Tok> toks, int line) : t_(std::move(toks)), line_(line) {}

  bool AtEnd() const { return t_[i_].kind == Tok::kEnd; }
  const Tok& Peek(size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  bool IsOp(const char* op, size_t k = 0) const { return Peek(k).kind == Tok::kOp && Peek(k).text == op; }
  bool IsName(const char* n, size_t k = 0) const { return Peek(k).kind == Tok::kName && Peek(k).text == n; }
  void Next() { if (!AtEnd()) ++i_; }
  Status Expect(const char* op);
  Result<std::string> ExpectName();
  Status ExpectEnd();

  ExprPtr Make(Expr::Kind k);

  // expr: a ternary; with_tuple: "a, b" builds a tuple (for loops, sets);
  // no_cond: no "x if c else y" (a for loop's iterable, whose "if" filters).
  Result<ExprPtr> Parse(bool with_tuple = false, bool no_cond = false);

 private:
  Result<ExprPtr> ParseCond();
  Result<ExprPtr> Binary(ExprPtr a, std::string op, ExprPtr b);
  Result<ExprPtr> ParseOr();
  Result<ExprPtr> ParseAnd();
  Result<ExprPtr> ParseNot();
  Result<ExprPtr> ParseCompare();
  Result<ExprPtr> ParseAdd();
  Result<ExprPtr> ParseConcat();
  Result<ExprPtr> ParseMul();
  Result<ExprPtr> ParsePow();
  Result<ExprPtr> ParseUnary(bool with_filters = true);
  Status ParseArgs(Expr* call);  // after '('
  Result<ExprPtr> ParsePostfix(ExprPtr e);
  Result<ExprPtr> ParseFilters(ExprPtr e);
  Result<ExprPtr> ParsePrimary();

  std::vector<Tok> t_;
  size_t i_ = 0;
  int line_;
  int depth_ = 0;
};

}  // namespace pc::jinja
