// The interpreter's internals shared by interp.cc (statements, expressions)
// and builtins.cc (filters, tests, methods, globals). Not a public API.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>

#include "jinja/ast.h"
#include "jinja/jinja.h"

namespace pc::jinja {

// Every error ends the render; thrown inside the interpreter only, caught
// by Template::Render.
struct RenderError {
  std::string message;
};
[[noreturn]] void Fail(std::string message);

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
};

class Renderer;

// Builtins (builtins.cc).
// A filter by name applied to v with call arguments; false if unknown.
bool ApplyFilter(Renderer& r, const std::string& name, const Value& v, CallArgs& args, Value* out);
bool HasFilter(const std::string& name);
// A test by name; false if unknown.
bool ApplyTest(const std::string& name, const Value& v, const CallArgs& args, bool* out);
// obj.name for strings, lists and dicts when name is a method: a bound function.
std::optional<Value> Method(const Value& obj, const std::string& name);
// Globals: range, namespace, dict, raise_exception, strftime_now.
std::optional<Value> Global(Renderer& r, const std::string& name);

class Renderer {
 public:
  Renderer(const RenderOptions& opt, const Value& context) : opt_(opt), context_(context) {}
  void Run(const Body& body, std::string* out);

  // Counts one unit of work against the budget.
  void Step() {
    if (++steps_ > opt_.max_steps) {
      Fail(std::string(kStepLimitMessage) + " (more than " + std::to_string(opt_.max_steps) + " steps)");
    }
  }
  void Emit(std::string* out, const std::string& s) {
    if (out->size() + s.size() > opt_.max_output_bytes) {
      Fail("the template's output exceeds " + std::to_string(opt_.max_output_bytes) + " bytes");
    }
    *out += s;
  }
  const RenderOptions& options() const { return opt_; }
  // Calls a function value (a macro or a builtin).
  Value Call(const Value& fn, CallArgs& args);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  Flow Exec(const Body& body, const std::shared_ptr<Scope>& scope, std::string* out);
  Flow ExecNode(const Node& n, const std::shared_ptr<Scope>& scope, std::string* out);
  void ExecFor(const Node& n, const std::shared_ptr<Scope>& scope, std::string* out);
  // The loop's body over iterable at depth (1: the loop itself; a recursive
  // loop's loop(items) renders one level deeper).
  void ExecForItems(const Node& n, const std::shared_ptr<Scope>& scope, const Value& iterable, int depth, std::string* out);
  void ExecSet(const Node& n, const std::shared_ptr<Scope>& scope, const Value& v);
  Value MakeMacro(const Node& n, const std::shared_ptr<Scope>& scope);
  Value Eval(const Expr& e, const std::shared_ptr<Scope>& scope);
  Value EvalSlice(const Expr& e, const std::shared_ptr<Scope>& scope);
  Value EvalBinary(const Expr& e, const std::shared_ptr<Scope>& scope);
  Value Lookup(const std::string& name, const std::shared_ptr<Scope>& scope);
  CallArgs EvalArgs(const Expr& e, const std::shared_ptr<Scope>& scope);
  // The filters of a {% filter %} or {% set x | f %} block applied to v,
  // innermost first (chain: the outermost filter, each one's `a` the next).
  Value ApplyFilterChain(const Expr& chain, Value v, const std::shared_ptr<Scope>& scope);

  const RenderOptions& opt_;
  const Value& context_;
  size_t steps_ = 0;
  int depth_ = 0;
};

// Jinja's getattr / getitem.
Value GetAttr(const Value& obj, const std::string& name);
Value GetItem(const Value& obj, const Value& key);
// Items of an iterable: lists, dict keys, string characters; undefined: none.
Array Iterate(const Value& v);

}  // namespace pc::jinja
