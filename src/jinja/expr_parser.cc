#include "jinja/expr_parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "jinja/jinja.h"

namespace pc::jinja {

Status ExprParser::Expect(const char* op) {
  if (!IsOp(op)) return Errorf("line {}: expected '{}', found '{}'", line_, op, Peek().text);
  Next();
  return OkStatus();
}

Result<std::string> ExprParser::ExpectName() {
  if (Peek().kind != Tok::kName) return Errorf("line {}: expected a name, found '{}'", line_, Peek().text);
  std::string n = Peek().text;
  Next();
  return n;
}

Status ExprParser::ExpectEnd() {
  if (!AtEnd()) return Errorf("line {}: unexpected '{}'", line_, Peek().text);
  return OkStatus();
}

ExprPtr ExprParser::Make(Expr::Kind k) {
  auto e = std::make_unique<Expr>();
  e->kind = k;
  e->line = line_;
  return e;
}

Result<ExprPtr> ExprParser::Parse(bool with_tuple, bool no_cond) {
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

Result<ExprPtr> ExprParser::ParseCond() {
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

Result<ExprPtr> ExprParser::Binary(ExprPtr a, std::string op, ExprPtr b) {
  ExprPtr e = Make(Expr::Kind::kBinary);
  e->name = std::move(op);
  e->a = std::move(a);
  e->b = std::move(b);
  return e;
}

Result<ExprPtr> ExprParser::ParseOr() {
  PC_ASSIGN_OR_RETURN(ExprPtr e, ParseAnd());
  while (IsName("or")) {
    Next();
    PC_ASSIGN_OR_RETURN(ExprPtr r, ParseAnd());
    PC_ASSIGN_OR_RETURN(e, Binary(std::move(e), "or", std::move(r)));
  }
  return e;
}

Result<ExprPtr> ExprParser::ParseAnd() {
  PC_ASSIGN_OR_RETURN(ExprPtr e, ParseNot());
  while (IsName("and")) {
    Next();
    PC_ASSIGN_OR_RETURN(ExprPtr r, ParseNot());
    PC_ASSIGN_OR_RETURN(e, Binary(std::move(e), "and", std::move(r)));
  }
  return e;
}

Result<ExprPtr> ExprParser::ParseNot() {
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

Result<ExprPtr> ExprParser::ParseCompare() {
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

Result<ExprPtr> ExprParser::ParseAdd() {
  PC_ASSIGN_OR_RETURN(ExprPtr e, ParseConcat());
  while (IsOp("+") || IsOp("-")) {
    const std::string op = Peek().text;
    Next();
    PC_ASSIGN_OR_RETURN(ExprPtr r, ParseConcat());
    PC_ASSIGN_OR_RETURN(e, Binary(std::move(e), op, std::move(r)));
  }
  return e;
}

Result<ExprPtr> ExprParser::ParseConcat() {
  PC_ASSIGN_OR_RETURN(ExprPtr e, ParseMul());
  while (IsOp("~")) {
    Next();
    PC_ASSIGN_OR_RETURN(ExprPtr r, ParseMul());
    PC_ASSIGN_OR_RETURN(e, Binary(std::move(e), "~", std::move(r)));
  }
  return e;
}

Result<ExprPtr> ExprParser::ParseMul() {
  PC_ASSIGN_OR_RETURN(ExprPtr e, ParsePow());
  while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
    const std::string op = Peek().text;
    Next();
    PC_ASSIGN_OR_RETURN(ExprPtr r, ParsePow());
    PC_ASSIGN_OR_RETURN(e, Binary(std::move(e), op, std::move(r)));
  }
  return e;
}

Result<ExprPtr> ExprParser::ParsePow() {
  PC_ASSIGN_OR_RETURN(ExprPtr e, ParseUnary());
  while (IsOp("**")) {
    Next();
    PC_ASSIGN_OR_RETURN(ExprPtr r, ParseUnary());
    PC_ASSIGN_OR_RETURN(e, Binary(std::move(e), "**", std::move(r)));
  }
  return e;
}

// Filters bind to the signed operand, as in Jinja2: -3 | abs is (-3) | abs.
Result<ExprPtr> ExprParser::ParseUnary(bool with_filters) {
  ExprPtr e;
  if (IsOp("-") || IsOp("+")) {
    const std::string op = Peek().text;
    Next();
    if (++depth_ > kMaxNesting) return Errorf("line {}: expression nested too deeply", line_);
    PC_ASSIGN_OR_RETURN(ExprPtr x, ParseUnary(false));
    --depth_;
    e = Make(Expr::Kind::kUnary);
    e->name = op;
    e->a = std::move(x);
  } else {
    PC_ASSIGN_OR_RETURN(e, ParsePrimary());
    PC_ASSIGN_OR_RETURN(e, ParsePostfix(std::move(e)));
  }
  return with_filters ? ParseFilters(std::move(e)) : Result<ExprPtr>(std::move(e));
}

Result<ExprPtr> ExprParser::ParsePostfix(ExprPtr e) {
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

Result<ExprPtr> ExprParser::ParseFilters(ExprPtr e) {
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
                              IsOp("[") || IsOp("{") ||
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

Result<ExprPtr> ExprParser::ParsePrimary() {
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

// A call's arguments, after its '(': positional, then name=value.
Status ExprParser::ParseArgs(Expr* call) {
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

}  // namespace pc::jinja
