// The syntax tree of a Jinja template, as the parser builds it and the
// interpreter walks it. Owned by a Template; immutable after parsing.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "jinja/value.h"

namespace pc::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // value
    kName,      // name
    kList,      // items
    kTuple,     // items
    kDict,      // items as key, value, key, value, ...
    kGetAttr,   // a . name
    kGetItem,   // a [ b ]
    kSlice,     // a [ items[0] : items[1] : items[2] ] (null: omitted)
    kCall,      // a ( items, kwargs )
    kFilter,    // a | name ( items, kwargs ); a null: filter block input
    kTest,      // a is [not] name ( items ); negated
    kUnary,     // op a
    kBinary,    // a op b
    kCond,      // a if b else c
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;  // name, attribute, filter/test name, operator
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Kind {
    kText,        // text
    kOutput,      // {{ expr }}
    kIf,          // conds[i] -> bodies[i]; else_body
    kFor,         // for targets in expr [if cond] [recursive]: body; else_body
    kSet,         // targets (names, or one "ns.attr") = expr
    kSetBlock,    // {% set name %} body {% endset %} (through filters if any)
    kMacro,       // macro name(params) body
    kCallBlock,   // {% call(params) expr %} body: expr (a kCall) with caller = body as a macro of params
    kFilterBlock, // {% filter f %} body {% endfilter %}: expr is the filter chain
    kWith,        // {% with a = x, b = y %} body {% endwith %}: params, a scope of its own
    kBreak,
    kContinue,
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr, cond;
  std::vector<ExprPtr> conds;
  std::vector<Body> bodies;
  Body body, else_body;
  std::vector<std::string> targets;
  std::string attr;  // kSet on "ns.attr": targets[0] = ns, attr = attr
  bool recursive = false;  // kFor: loop(items) renders the body again over items
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro parameters and defaults (null: none)
};

}  // namespace pc::jinja
