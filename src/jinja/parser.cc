// Template source -> syntax tree: the lexer's tags and tokens (lexer.h)
// parsed by recursive descent with Jinja's operator precedence.
#include <fmt/format.h>

#include <cstring>

#include "jinja/jinja.h"
#include "jinja/expr_parser.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"

namespace pc::jinja {
namespace {

// --- Parser ------------------------------------------------------------------



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

  // One statement tag ({% word ... %}) into node, with the body it opens.
  Status ParseStatement(const std::string& word, ExprParser& p, Node* node) {
    if (word == "if") return ParseIf(p, node);
    if (word == "for") return ParseFor(p, node);
    if (word == "set") return ParseSet(p, node);
    if (word == "macro") return ParseMacro(p, node);
    if (word == "call") return ParseCall(p, node);
    std::string end;
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
    if (word == "with") {  // names bound for its body only
      node->kind = Node::Kind::kWith;
      while (!p.AtEnd()) {
        PC_ASSIGN_OR_RETURN(std::string name, p.ExpectName());
        PC_RETURN_IF_ERROR(p.Expect("="));
        PC_ASSIGN_OR_RETURN(ExprPtr value, p.Parse(false));  // a comma ends it
        node->params.emplace_back(std::move(name), std::move(value));
        if (!p.AtEnd()) PC_RETURN_IF_ERROR(p.Expect(","));
      }
      PC_ASSIGN_OR_RETURN(node->body, ParseBody({"endwith"}, &end));
      return OkStatus();
    }
    if (word == "break" || word == "continue") {
      node->kind = word == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
      return p.ExpectEnd();
    }
    return Errorf("line {}: unknown tag '{}'", node->line, word);
  }

  // {% if %} with its {% elif %} and {% else %} branches.
  Status ParseIf(ExprParser& p, Node* node) {
    std::string end;
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

  // {% for a, b in iterable if cond %} ... {% else %} ... {% endfor %}
  Status ParseFor(ExprParser& p, Node* node) {
    std::string end;
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
    if (p.IsName("recursive")) {
      node->recursive = true;
      p.Next();
    }
    PC_RETURN_IF_ERROR(p.ExpectEnd());
    PC_ASSIGN_OR_RETURN(node->body, ParseBody({"else", "endfor"}, &end));
    if (end == "else") {
      PC_ASSIGN_OR_RETURN(node->else_body, ParseBody({"endfor"}, &end));
    }
    return OkStatus();
  }

  // {% set a = e %}, {% set ns.attr = e %}, {% set a, b = e %}, and the
  // block form {% set x | filters %}...{% endset %}.
  Status ParseSet(ExprParser& p, Node* node) {
    std::string end;
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
    node->kind = Node::Kind::kSetBlock;
    if (p.IsOp("|")) {
      PC_ASSIGN_OR_RETURN(node->expr, ParseFilterChain(p));
    }
    PC_RETURN_IF_ERROR(p.ExpectEnd());
    PC_ASSIGN_OR_RETURN(node->body, ParseBody({"endset"}, &end));
    return OkStatus();
  }

  // {% macro name(a, b=default) %}...{% endmacro %}
  Status ParseMacro(ExprParser& p, Node* node) {
    std::string end;
    node->kind = Node::Kind::kMacro;
    PC_ASSIGN_OR_RETURN(node->text, p.ExpectName());
    PC_RETURN_IF_ERROR(ParseParams(p, node));
    PC_RETURN_IF_ERROR(p.ExpectEnd());
    PC_ASSIGN_OR_RETURN(node->body, ParseBody({"endmacro"}, &end));
    return OkStatus();
  }

  // {% call [(params)] macro(args) %} body {% endcall %}: the macro runs with
  // `caller` bound to a function that renders the body (with those params).
  Status ParseCall(ExprParser& p, Node* node) {
    std::string end;
    node->kind = Node::Kind::kCallBlock;
    if (p.IsOp("(")) PC_RETURN_IF_ERROR(ParseParams(p, node));
    PC_ASSIGN_OR_RETURN(node->expr, p.Parse(true));
    if (node->expr->kind != Expr::Kind::kCall) return Errorf("line {}: {{% call %}} needs a macro call", node->line);
    PC_RETURN_IF_ERROR(p.ExpectEnd());
    PC_ASSIGN_OR_RETURN(node->body, ParseBody({"endcall"}, &end));
    return OkStatus();
  }

  // (name, name=default, ...) into node->params.
  Status ParseParams(ExprParser& p, Node* node) {
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
    return p.Expect(")");
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
