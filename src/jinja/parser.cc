// Template source -> syntax tree: the lexer's tags and tokens (lexer.h)
// parsed by recursive descent with Jinja's operator precedence.
#include <fmt/format.h>

#include <cstring>

#include "jinja/jinja.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"

namespace pc::jinja {
namespace {

// --- Parser ------------------------------------------------------------------

constexpr int kMaxNesting = 200;  // expression and block nesting: untrusted templates

class ExprParser {
 public:
  ExprParser(std::vector<Tok> toks, int line) : t_(std::move(toks)), line_(line) {}

  bool AtEnd() const { return t_[i_].kind == Tok::kEnd; }
  const Tok& Peek(size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  bool IsOp(const char* op, size_t k = 0) const { return Peek(k).kind == Tok::kOp && Peek(k).text == op; }
  bool IsName(const char* n, size_t k = 0) const { return Peek(k).kind == Tok::kName && Peek(k).text == n; }
  void Next() { if (!AtEnd()) ++i_; }
  Status Expect(const char* op) {
    if (!IsOp(op)) return Errorf("line {}: expected '{}', found '{}'", line_, op, Peek().text);
    Next();
    return OkStatus();
  }
  Result<std::string> ExpectName() {
    if (Peek().kind != Tok::kName) return Errorf("line {}: expected a name, found '{}'", line_, Peek().text);
    std::string n = Peek().text;
    Next();
    return n;
  }
  Status ExpectEnd() {
    if (!AtEnd()) return Errorf("line {}: unexpected '{}'", line_, Peek().text);
    return OkStatus();
  }

  ExprPtr Make(Expr::Kind k) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line_;
    return e;
  }

  // expr: a ternary; with_tuple: "a, b" builds a tuple (for loops, sets);
  // no_cond: no "x if c else y" (a for loop's iterable, whose "if" filters).
  Result<ExprPtr> Parse(bool with_tuple = false, bool no_cond = false) {
    if (++depth_ > kMaxNesting) return Errorf("line {}: expression nested too deeply", line_);
    Result<ExprPtr> first = no_cond ? ParseOr() : ParseCond();
    if (!first.ok()) return first.status();
    ExprPtr e = std::move(*first);
    if (with_tuple && IsOp(",")) {
      ExprPtr tup = Make(Expr::Kind::kTuple);
      tup->items.push_back(std::move(e));
      while (IsOp(",")) {
        Next();
        if (AtEnd() || IsOp(")")) break;
        PC_ASSIGN_OR_RETURN(ExprPtr x, ParseCond());
        tup->items.push_back(std::move(x));
      }
      e = std::move(tup);
    }
    --depth_;
    return e;
  }

 private:
  Result<ExprPtr> ParseCond() {
    PC_ASSIGN_OR_RETURN(ExprPtr e, ParseOr());
    while (IsName("if")) {
      Next();
      PC_ASSIGN_OR_RETURN(ExprPtr cond, ParseOr());
      ExprPtr c = Make(Expr::Kind::kCond);
      c->a = std::move(e);
      c->b = std::move(cond);
      if (IsName("else")) {
        Next();
        PC_ASSIGN_OR_RETURN(c->c, ParseCond());
      }
      e = std::move(c);
    }
    return e;
  }
  Result<ExprPtr> Binary(ExprPtr a, std::string op, ExprPtr b) {
    ExprPtr e = Make(Expr::Kind::kBinary);
    e->name = std::move(op);
    e->a = std::move(a);
    e->b = std::move(b);
    return e;
  }
  Result<ExprPtr> ParseOr() {
    PC_ASSIGN_OR_RETURN(ExprPtr e, ParseAnd());
    while (IsName("or")) {
      Next();
      PC_ASSIGN_OR_RETURN(ExprPtr r, ParseAnd());
      PC_ASSIGN_OR_RETURN(e, Binary(std::move(e), "or", std::move(r)));
    }
    return e;
  }
  Result<ExprPtr> ParseAnd() {
    PC_ASSIGN_OR_RETURN(ExprPtr e, ParseNot());
    while (IsName("and")) {
      Next();
      PC_ASSIGN_OR_RETURN(ExprPtr r, ParseNot());
      PC_ASSIGN_OR_RETURN(e, Binary(std::move(e), "and", std::move(r)));
    }
    return e;
  }
  Result<ExprPtr> ParseNot() {
    if (IsName("not")) {
      Next();
      if (++depth_ > kMaxNesting) return Errorf("line {}: expression nested too deeply", line_);
      PC_ASSIGN_OR_RETURN(ExprPtr x, ParseNot());
      --depth_;
      ExprPtr e = Make(Expr::Kind::kUnary);
      e->name = "not";
      e->a = std::move(x);
      return e;
    }
    return ParseCompare();
  }
  Result<ExprPtr> ParseCompare() {
    PC_ASSIGN_OR_RETURN(ExprPtr e, ParseAdd());
    for (;;) {
      std::string op;
      if (IsOp("==") || IsOp("!=") || IsOp("<") || IsOp(">") || IsOp("<=") || IsOp(">=")) {
        op = Peek().text;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && IsName("in", 1)) {
        op = "not in";
        Next();
        Next();
      } else {
        return e;
      }
      PC_ASSIGN_OR_RETURN(ExprPtr r, ParseAdd());
      PC_ASSIGN_OR_RETURN(e, Binary(std::move(e), op, std::move(r)));
    }
  }
  Result<ExprPtr> ParseAdd() {
    PC_ASSIGN_OR_RETURN(ExprPtr e, ParseConcat());
    while (IsOp("+") || IsOp("-")) {
      const std::string op = Peek().text;
      Next();
      PC_ASSIGN_OR_RETURN(ExprPtr r, ParseConcat());
      PC_ASSIGN_OR_RETURN(e, Binary(std::move(e), op, std::move(r)));
    }
    return e;
  }
  Result<ExprPtr> ParseConcat() {
    PC_ASSIGN_OR_RETURN(ExprPtr e, ParseMul());
    while (IsOp("~")) {
      Next();
      PC_ASSIGN_OR_RETURN(ExprPtr r, ParseMul());
      PC_ASSIGN_OR_RETURN(e, Binary(std::move(e), "~", std::move(r)));
    }
    return e;
  }
  Result<ExprPtr> ParseMul() {
    PC_ASSIGN_OR_RETURN(ExprPtr e, ParsePow());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const std::string op = Peek().text;
      Next();
      PC_ASSIGN_OR_RETURN(ExprPtr r, ParsePow());
      PC_ASSIGN_OR_RETURN(e, Binary(std::move(e), op, std::move(r)));
    }
    return e;
  }
  Result<ExprPtr> ParsePow() {
    PC_ASSIGN_OR_RETURN(ExprPtr e, ParseUnary());
    while (IsOp("**")) {
      Next();
      PC_ASSIGN_OR_RETURN(ExprPtr r, ParseUnary());
      PC_ASSIGN_OR_RETURN(e, Binary(std::move(e), "**", std::move(r)));
    }
    return e;
  }
  Result<ExprPtr> ParseUnary() {
    if (IsOp("-") || IsOp("+")) {
      const std::string op = Peek().text;
      Next();
      if (++depth_ > kMaxNesting) return Errorf("line {}: expression nested too deeply", line_);
      PC_ASSIGN_OR_RETURN(ExprPtr x, ParseUnary());
      --depth_;
      ExprPtr e = Make(Expr::Kind::kUnary);
      e->name = op;
      e->a = std::move(x);
      return e;
    }
    PC_ASSIGN_OR_RETURN(ExprPtr e, ParsePrimary());
    PC_ASSIGN_OR_RETURN(e, ParsePostfix(std::move(e)));
    return ParseFilters(std::move(e));
  }
  Status ParseArgs(Expr* call) {  // after '('
    while (!IsOp(")")) {
      if (Peek().kind == Tok::kName && IsOp("=", 1)) {
        std::string key = Peek().text;
        Next();
        Next();
        PC_ASSIGN_OR_RETURN(ExprPtr v, Parse());
        call->kwargs.emplace_back(std::move(key), std::move(v));
      } else {
        PC_ASSIGN_OR_RETURN(ExprPtr v, Parse());
        call->items.push_back(std::move(v));
      }
      if (!IsOp(",")) break;
      Next();
    }
    return Expect(")");
  }
  Result<ExprPtr> ParsePostfix(ExprPtr e) {
    for (;;) {
      if (IsOp(".")) {
        Next();
        ExprPtr g = Make(Expr::Kind::kGetAttr);
        if (Peek().kind == Tok::kInt) {  // x.0 is x[0]
          g->kind = Expr::Kind::kGetItem;
          ExprPtr idx = Make(Expr::Kind::kLiteral);
          idx->value = Peek().value;
          g->b = std::move(idx);
          Next();
        } else {
          PC_ASSIGN_OR_RETURN(g->name, ExpectName());
        }
        g->a = std::move(e);
        e = std::move(g);
      } else if (IsOp("[")) {
        Next();
        ExprPtr parts[3];
        bool slice = false;
        for (int k = 0; k < 3; ++k) {
          if (!IsOp(":") && !IsOp("]")) {
            PC_ASSIGN_OR_RETURN(parts[k], Parse());
          }
          if (!IsOp(":")) break;
          slice = true;
          Next();
        }
        PC_RETURN_IF_ERROR(Expect("]"));
        ExprPtr g = Make(slice ? Expr::Kind::kSlice : Expr::Kind::kGetItem);
        g->a = std::move(e);
        if (slice) {
          for (ExprPtr& p : parts) g->items.push_back(std::move(p));
        } else {
          if (!parts[0]) return Errorf("line {}: empty subscript", line_);
          g->b = std::move(parts[0]);
        }
        e = std::move(g);
      } else if (IsOp("(")) {
        Next();
        ExprPtr call = Make(Expr::Kind::kCall);
        call->a = std::move(e);
        PC_RETURN_IF_ERROR(ParseArgs(call.get()));
        e = std::move(call);
      } else {
        return e;
      }
    }
  }
  Result<ExprPtr> ParseFilters(ExprPtr e) {
    for (;;) {
      if (IsOp("|")) {
        Next();
        ExprPtr f = Make(Expr::Kind::kFilter);
        PC_ASSIGN_OR_RETURN(f->name, ExpectName());
        while (IsOp(".")) {  // dotted filter names
          Next();
          PC_ASSIGN_OR_RETURN(std::string part, ExpectName());
          f->name += "." + part;
        }
        if (IsOp("(")) {
          Next();
          PC_RETURN_IF_ERROR(ParseArgs(f.get()));
        }
        f->a = std::move(e);
        e = std::move(f);
      } else if (IsName("is")) {
        Next();
        ExprPtr t = Make(Expr::Kind::kTest);
        if (IsName("not")) {
          t->negated = true;
          Next();
        }
        if (Peek().kind == Tok::kName) {
          t->name = Peek().text;
          Next();
        } else if (IsOp("==") || IsOp("!=") || IsOp("<") || IsOp(">") || IsOp("<=") || IsOp(">=")) {
          t->name = Peek().text;
          Next();
        } else {
          return Errorf("line {}: expected a test name after 'is'", line_);
        }
        if (IsOp("(")) {
          Next();
          PC_RETURN_IF_ERROR(ParseArgs(t.get()));
        } else if (!AtEnd() && (Peek().kind == Tok::kString || Peek().kind == Tok::kInt || Peek().kind == Tok::kFloat ||
                                (Peek().kind == Tok::kName && !IsName("and") && !IsName("or") && !IsName("else") &&
                                 !IsName("if") && !IsName("in") && !IsName("not") && !IsName("is")))) {
          // One argument without parentheses: `is divisibleby 3`, `is sameas x`.
          PC_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
          PC_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
          t->items.push_back(std::move(arg));
        }
        t->a = std::move(e);
        e = std::move(t);
      } else {
        return e;
      }
    }
  }
  Result<ExprPtr> ParsePrimary() {
    const Tok& t = Peek();
    if (t.kind == Tok::kString) {
      // Adjacent string literals concatenate.
      std::string s = t.value.str();
      Next();
      while (Peek().kind == Tok::kString) {
        s += Peek().value.str();
        Next();
      }
      ExprPtr e = Make(Expr::Kind::kLiteral);
      e->value = Value(std::move(s));
      return e;
    }
    if (t.kind == Tok::kInt || t.kind == Tok::kFloat) {
      ExprPtr e = Make(Expr::Kind::kLiteral);
      e->value = t.value;
      Next();
      return e;
    }
    if (t.kind == Tok::kName) {
      ExprPtr e = Make(Expr::Kind::kLiteral);
      if (t.text == "true" || t.text == "True") e->value = Value(true);
      else if (t.text == "false" || t.text == "False") e->value = Value(false);
      else if (t.text == "none" || t.text == "None") e->value = Value::None();
      else {
        e->kind = Expr::Kind::kName;
        e->name = t.text;
      }
      Next();
      return e;
    }
    if (IsOp("(")) {
      Next();
      if (IsOp(")")) {
        Next();
        return Make(Expr::Kind::kTuple);
      }
      PC_ASSIGN_OR_RETURN(ExprPtr e, Parse(true));
      PC_RETURN_IF_ERROR(Expect(")"));
      return e;
    }
    if (IsOp("[")) {
      Next();
      ExprPtr e = Make(Expr::Kind::kList);
      while (!IsOp("]")) {
        PC_ASSIGN_OR_RETURN(ExprPtr x, Parse());
        e->items.push_back(std::move(x));
        if (!IsOp(",")) break;
        Next();
      }
      PC_RETURN_IF_ERROR(Expect("]"));
      return e;
    }
    if (IsOp("{")) {
      Next();
      ExprPtr e = Make(Expr::Kind::kDict);
      while (!IsOp("}")) {
        PC_ASSIGN_OR_RETURN(ExprPtr k, Parse());
        PC_RETURN_IF_ERROR(Expect(":"));
        PC_ASSIGN_OR_RETURN(ExprPtr v, Parse());
        e->items.push_back(std::move(k));
        e->items.push_back(std::move(v));
        if (!IsOp(",")) break;
        Next();
      }
      PC_RETURN_IF_ERROR(Expect("}"));
      return e;
    }
    return Errorf("line {}: unexpected '{}'", line_, t.kind == Tok::kEnd ? "end of tag" : t.text);
  }

  std::vector<Tok> t_;
  size_t i_ = 0;
  int line_;
  int depth_ = 0;
};

class TemplateParser {
 public:
  explicit TemplateParser(std::vector<Tag> tags) : tags_(std::move(tags)) {}

  Result<Body> ParseAll() {
    std::string end;
    PC_ASSIGN_OR_RETURN(Body b, ParseBody({}, &end));
    return b;
  }

 private:
  // Parses nodes until a block tag whose first word is in `ends`; its
  // name is stored in *end and that tag's parser left in last_.
  Result<Body> ParseBody(const std::vector<std::string>& ends, std::string* end) {
    if (++depth_ > kMaxNesting) return Status::Error("blocks nested too deeply");
    Body body;
    while (i_ < tags_.size()) {
      const Tag& tag = tags_[i_++];
      auto node = std::make_unique<Node>();
      node->line = tag.line;
      if (tag.type == 't') {
        node->kind = Node::Kind::kText;
        node->text = tag.content;
        body.push_back(std::move(node));
        continue;
      }
      PC_ASSIGN_OR_RETURN(std::vector<Tok> toks, Tokenize(tag.content, tag.line));
      auto p = std::make_unique<ExprParser>(std::move(toks), tag.line);
      if (tag.type == 'v') {
        node->kind = Node::Kind::kOutput;
        PC_ASSIGN_OR_RETURN(node->expr, p->Parse(true));
        PC_RETURN_IF_ERROR(p->ExpectEnd());
        body.push_back(std::move(node));
        continue;
      }
      PC_ASSIGN_OR_RETURN(std::string word, p->ExpectName());
      if (std::find(ends.begin(), ends.end(), word) != ends.end()) {
        *end = word;
        last_ = std::move(p);
        --depth_;
        return body;
      }
      PC_RETURN_IF_ERROR(ParseStatement(word, *p, node.get()));
      body.push_back(std::move(node));
    }
    if (!ends.empty()) return Errorf("missing '{{% {} %}}' at the end of the template", ends.back());
    --depth_;
    return body;
  }

  Status ParseStatement(const std::string& word, ExprParser& p, Node* node) {
    std::string end;
    if (word == "if") {
      node->kind = Node::Kind::kIf;
      PC_ASSIGN_OR_RETURN(ExprPtr cond, p.Parse(true));
      PC_RETURN_IF_ERROR(p.ExpectEnd());
      node->conds.push_back(std::move(cond));
      for (;;) {
        PC_ASSIGN_OR_RETURN(Body b, ParseBody({"elif", "else", "endif"}, &end));
        node->bodies.push_back(std::move(b));
        if (end == "elif") {
          PC_ASSIGN_OR_RETURN(ExprPtr c, last_->Parse(true));
          PC_RETURN_IF_ERROR(last_->ExpectEnd());
          node->conds.push_back(std::move(c));
          continue;
        }
        if (end == "else") {
          PC_RETURN_IF_ERROR(last_->ExpectEnd());
          PC_ASSIGN_OR_RETURN(node->else_body, ParseBody({"endif"}, &end));
        }
        return OkStatus();
      }
    }
    if (word == "for") {
      node->kind = Node::Kind::kFor;
      do {
        PC_ASSIGN_OR_RETURN(std::string t, p.ExpectName());
        node->targets.push_back(std::move(t));
        if (!p.IsOp(",")) break;
        p.Next();
      } while (true);
      if (!p.IsName("in")) return Errorf("line {}: expected 'in' in a for loop", node->line);
      p.Next();
      PC_ASSIGN_OR_RETURN(node->expr, p.Parse(false, /*no_cond=*/true));
      if (p.IsName("if")) {
        p.Next();
        PC_ASSIGN_OR_RETURN(node->cond, p.Parse(false));
      }
      if (p.IsName("recursive")) return Errorf("line {}: recursive loops are not supported", node->line);
      PC_RETURN_IF_ERROR(p.ExpectEnd());
      PC_ASSIGN_OR_RETURN(node->body, ParseBody({"else", "endfor"}, &end));
      if (end == "else") {
        PC_ASSIGN_OR_RETURN(node->else_body, ParseBody({"endfor"}, &end));
      }
      return OkStatus();
    }
    if (word == "set") {
      PC_ASSIGN_OR_RETURN(std::string t, p.ExpectName());
      node->targets.push_back(t);
      if (p.IsOp(".")) {
        p.Next();
        PC_ASSIGN_OR_RETURN(node->attr, p.ExpectName());
      }
      while (p.IsOp(",")) {
        p.Next();
        PC_ASSIGN_OR_RETURN(std::string more, p.ExpectName());
        node->targets.push_back(std::move(more));
      }
      if (p.IsOp("=")) {
        p.Next();
        node->kind = Node::Kind::kSet;
        PC_ASSIGN_OR_RETURN(node->expr, p.Parse(true));
        return p.ExpectEnd();
      }
      // Block set: {% set x %}...{% endset %}, optionally through filters.
      node->kind = Node::Kind::kSetBlock;
      if (p.IsOp("|")) {
        // Parse the filter chain on a placeholder input.
        std::vector<Tok> rest;
        PC_ASSIGN_OR_RETURN(node->expr, ParseFilterChain(p));
      }
      PC_RETURN_IF_ERROR(p.ExpectEnd());
      PC_ASSIGN_OR_RETURN(node->body, ParseBody({"endset"}, &end));
      return OkStatus();
    }
    if (word == "macro") {
      node->kind = Node::Kind::kMacro;
      PC_ASSIGN_OR_RETURN(node->text, p.ExpectName());
      PC_RETURN_IF_ERROR(p.Expect("("));
      while (!p.IsOp(")")) {
        PC_ASSIGN_OR_RETURN(std::string param, p.ExpectName());
        ExprPtr def;
        if (p.IsOp("=")) {
          p.Next();
          PC_ASSIGN_OR_RETURN(def, p.Parse(false));
        }
        node->params.emplace_back(std::move(param), std::move(def));
        if (!p.IsOp(",")) break;
        p.Next();
      }
      PC_RETURN_IF_ERROR(p.Expect(")"));
      PC_RETURN_IF_ERROR(p.ExpectEnd());
      PC_ASSIGN_OR_RETURN(node->body, ParseBody({"endmacro"}, &end));
      return OkStatus();
    }
    if (word == "filter") {
      node->kind = Node::Kind::kFilterBlock;
      PC_ASSIGN_OR_RETURN(node->expr, ParseFilterChain(p, /*leading_bar=*/false));
      PC_RETURN_IF_ERROR(p.ExpectEnd());
      PC_ASSIGN_OR_RETURN(node->body, ParseBody({"endfilter"}, &end));
      return OkStatus();
    }
    if (word == "generation") {
      // Hugging Face's mark for the assistant's tokens (training masks):
      // its body renders as it is.
      node->kind = Node::Kind::kIf;
      PC_RETURN_IF_ERROR(p.ExpectEnd());
      PC_ASSIGN_OR_RETURN(node->else_body, ParseBody({"endgeneration"}, &end));
      return OkStatus();
    }
    if (word == "break" || word == "continue") {
      node->kind = word == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
      return p.ExpectEnd();
    }
    return Errorf("line {}: unknown tag '{}'", node->line, word);
  }

  // A chain of filters applied to a null input (the block's text at run time).
  Result<ExprPtr> ParseFilterChain(ExprParser& p, bool leading_bar = true) {
    ExprPtr input;
    bool first = true;
    while (first || p.IsOp("|")) {
      if (!first || leading_bar) PC_RETURN_IF_ERROR(p.Expect("|"));
      first = false;
      ExprPtr f = p.Make(Expr::Kind::kFilter);
      PC_ASSIGN_OR_RETURN(f->name, p.ExpectName());
      if (p.IsOp("(")) {
        p.Next();
        // Reuse the argument parser through a call node.
        ExprPtr call = p.Make(Expr::Kind::kCall);
        (void)call;
        while (!p.IsOp(")")) {
          if (p.Peek().kind == Tok::kName && p.IsOp("=", 1)) {
            std::string key = p.Peek().text;
            p.Next();
            p.Next();
            PC_ASSIGN_OR_RETURN(ExprPtr v, p.Parse());
            f->kwargs.emplace_back(std::move(key), std::move(v));
          } else {
            PC_ASSIGN_OR_RETURN(ExprPtr v, p.Parse());
            f->items.push_back(std::move(v));
          }
          if (!p.IsOp(",")) break;
          p.Next();
        }
        PC_RETURN_IF_ERROR(p.Expect(")"));
      }
      f->a = std::move(input);
      input = std::move(f);
    }
    return input;
  }

  std::vector<Tag> tags_;
  size_t i_ = 0;
  std::unique_ptr<ExprParser> last_;
  int depth_ = 0;
};

}  // namespace

Result<Body> ParseTemplate(std::string_view source) {
  PC_ASSIGN_OR_RETURN(std::vector<Tag> tags, Lex(source));
  TemplateParser p(std::move(tags));
  return p.ParseAll();
}

}  // namespace pc::jinja
