// Statements and expressions of the Jinja interpreter.
#include "jinja/interp.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "jinja/builtin_util.h"
#include "jinja/parser.h"

namespace pc::jinja {

void Fail(std::string message) { throw RenderError{std::move(message)}; }

namespace {

// Python-style modulo and floor division (the sign of the divisor).
int64_t FloorDiv(int64_t a, int64_t b) {
  if (b == 0) Fail("division by zero");
  if (b == -1 && a == INT64_MIN) Fail("integer overflow");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

[[noreturn]] void UndefinedError(const Value& v) {
  Fail("'" + (v.name().empty() ? std::string("value") : v.name()) + "' is undefined");
}

// Python's "%" on a string: a tuple gives the arguments, a dict the
// %(name)s ones, anything else is the one argument (PercentFormat's rules).
std::string PercentOp(const std::string& fmt, const Value& args) {
  CallArgs a;
  if (args.is_tuple()) {
    a.args = args.array();
  } else if (args.is_object() && fmt.find("%(") != std::string::npos) {
    for (const auto& [k, v] : args.object().items()) a.kwargs.emplace_back(k, v);
  } else {
    a.args = {args};
  }
  return PercentFormat(fmt, a);
}

int Compare(const Value& a, const Value& b, const std::string& op) {
  if ((a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool())) {
    const double x = a.number(), y = b.number();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) return a.str().compare(b.str()) < 0 ? -1 : (a.str() == b.str() ? 0 : 1);
  Fail("'" + op + "' is not supported between these values");
}

}  // namespace

Value GetAttr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) UndefinedError(obj);
  if (obj.is_object()) {
    if (std::optional<Value> m = Method(obj, name); m && obj.object().Find(name) == nullptr) return *m;
    if (const Value* v = obj.object().Find(name)) return *v;
    return Value::Undefined(name);
  }
  if (std::optional<Value> m = Method(obj, name)) return *m;
  // groupby's groups are (grouper, list) tuples with those two names.
  if (obj.is_tuple() && obj.array().size() == 2 && (name == "grouper" || name == "list")) {
    return obj.array()[name == "grouper" ? 0 : 1];
  }
  return Value::Undefined(name);
}

Value GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) UndefinedError(obj);
  if (obj.is_object()) {
    if (const Value* v = obj.object().Find(key.ToString())) return *v;
    return Value::Undefined(key.ToString());
  }
  if ((obj.is_array() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    if (obj.is_string()) {
      const Array chars = Iterate(obj);
      int64_t i = key.is_int() ? key.i() : key.b();
      if (i < 0) i += static_cast<int64_t>(chars.size());
      if (i < 0 || i >= static_cast<int64_t>(chars.size())) return Value::Undefined();
      return chars[static_cast<size_t>(i)];
    }
    int64_t i = key.is_int() ? key.i() : key.b();
    const int64_t n = static_cast<int64_t>(obj.array().size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::Undefined();
    return obj.array()[static_cast<size_t>(i)];
  }
  if (key.is_string()) return GetAttr(obj, key.str());
  return Value::Undefined();
}

Array Iterate(const Value& v) {
  if (v.is_undefined()) return {};
  if (v.is_array()) return v.array();
  if (v.is_object()) {
    Array keys;
    for (size_t i = 0; i < v.object().size(); ++i) keys.push_back(v.object().KeyAt(i));
    return keys;
  }
  if (v.is_string()) {
    Array chars;
    const std::string& s = v.str();
    for (size_t i = 0; i < s.size();) {
      size_t n = 1;
      const unsigned char c = static_cast<unsigned char>(s[i]);
      if (c >= 0xF0) n = 4;
      else if (c >= 0xE0) n = 3;
      else if (c >= 0xC0) n = 2;
      chars.emplace_back(s.substr(i, n));
      i += n;
    }
    return chars;
  }
  Fail("'" + v.ToString() + "' is not iterable");
}

void Renderer::Run(const Body& body, std::string* out) {
  auto top = std::make_shared<Scope>();
  Exec(body, top, out);
}

Renderer::Flow Renderer::Exec(const Body& body, const std::shared_ptr<Scope>& scope, std::string* out) {
  for (const NodePtr& n : body) {
    const Flow f = ExecNode(*n, scope, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::ExecNode(const Node& n, const std::shared_ptr<Scope>& scope, std::string* out) {
  Step();
  switch (n.kind) {
    case Node::Kind::kText: Emit(out, n.text); return Flow::kNormal;
    case Node::Kind::kOutput: Emit(out, Eval(*n.expr, scope).ToString()); return Flow::kNormal;
    case Node::Kind::kIf:
      for (size_t i = 0; i < n.conds.size(); ++i) {
        if (Eval(*n.conds[i], scope).Truthy()) return Exec(n.bodies[i], scope, out);
      }
      return Exec(n.else_body, scope, out);
    case Node::Kind::kFor: ExecFor(n, scope, out); return Flow::kNormal;
    case Node::Kind::kSet: ExecSet(n, scope, Eval(*n.expr, scope)); return Flow::kNormal;
    case Node::Kind::kSetBlock: {
      std::string text;
      Exec(n.body, scope, &text);
      Value v(std::move(text));
      if (n.expr) v = ApplyFilterChain(*n.expr, std::move(v), scope);
      ExecSet(n, scope, v);
      return Flow::kNormal;
    }
    case Node::Kind::kMacro: scope->vars[n.text] = MakeMacro(n, scope); return Flow::kNormal;
    case Node::Kind::kCallBlock: {
      const Value fn = Eval(*n.expr->a, scope);
      CallArgs args = EvalArgs(*n.expr, scope);
      args.kwargs.emplace_back("caller", MakeMacro(n, scope));
      Emit(out, Call(fn, args).ToString());
      return Flow::kNormal;
    }
    case Node::Kind::kFilterBlock: {
      std::string text;
      Exec(n.body, scope, &text);
      Emit(out, ApplyFilterChain(*n.expr, Value(std::move(text)), scope).ToString());
      return Flow::kNormal;
    }
    case Node::Kind::kWith: {
      auto inner = std::make_shared<Scope>();
      inner->parent = scope;
      for (const auto& [name, value] : n.params) inner->vars[name] = Eval(*value, scope);  // all from outside
      return Exec(n.body, inner, out);
    }
    case Node::Kind::kBreak: return Flow::kBreak;
    case Node::Kind::kContinue: return Flow::kContinue;
  }
  return Flow::kNormal;
}

void Renderer::ExecFor(const Node& n, const std::shared_ptr<Scope>& scope, std::string* out) {
  ExecForItems(n, scope, Eval(*n.expr, scope), 1, out);
}

void Renderer::ExecForItems(const Node& n, const std::shared_ptr<Scope>& scope, const Value& iterable, int depth,
                            std::string* out) {
  if (iterable.is_none()) Fail("'NoneType' object is not iterable");
  if (depth > opt_.max_call_depth) Fail("recursive loop nested more than " + std::to_string(opt_.max_call_depth) + " deep");
  Array items = Iterate(iterable);
  auto loop_scope = std::make_shared<Scope>();
  loop_scope->parent = scope;
  auto bind = [&](const Value& item) {
    if (n.targets.size() == 1) {
      loop_scope->vars[n.targets[0]] = item;
      return;
    }
    const Array parts = Iterate(item);
    if (parts.size() != n.targets.size()) Fail("cannot unpack " + std::to_string(parts.size()) + " values into " +
                                                std::to_string(n.targets.size()));
    for (size_t k = 0; k < parts.size(); ++k) loop_scope->vars[n.targets[k]] = parts[k];
  };
  if (n.cond) {  // {% for x in xs if cond %}: filtered before loop.* counts
    Array kept;
    for (const Value& item : items) {
      Step();
      bind(item);
      if (Eval(*n.cond, loop_scope).Truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    Exec(n.else_body, scope, out);
    return;
  }
  const size_t count = items.size();
  // loop.changed(*values): whether the values differ from its last call's
  // (true at the first), a state that lasts the whole loop.
  auto last_changed = std::make_shared<std::optional<Value>>();
  for (size_t i = 0; i < count; ++i) {
    Step();
    // Each iteration starts afresh: what a {% set %} in the body assigned
    // last time is gone, as in Jinja2 (GLM 5's template reads
    // `reasoning_content is defined` per message).
    loop_scope->vars.clear();
    bind(items[i]);
    Value loop = Value::MakeObject();
    Object& l = loop.object();
    l.Set("index", Value(i + 1));
    l.Set("index0", Value(i));
    l.Set("revindex", Value(count - i));
    l.Set("revindex0", Value(count - i - 1));
    l.Set("first", Value(i == 0));
    l.Set("last", Value(i + 1 == count));
    l.Set("length", Value(count));
    l.Set("depth", Value(depth));
    l.Set("depth0", Value(depth - 1));
    if (n.recursive) {  // loop(items): this body over items, one level down
      l.Set("__call__", Value::MakeFunction("loop", [this, &n, scope, depth](CallArgs& a) {
        if (a.args.empty()) Fail("loop() needs the items to loop over");
        std::string text;
        ExecForItems(n, scope, a.args[0], depth + 1, &text);
        return Value(std::move(text));
      }));
    }
    l.Set("previtem", i > 0 ? items[i - 1] : Value::Undefined("previtem"));
    l.Set("nextitem", i + 1 < count ? items[i + 1] : Value::Undefined("nextitem"));
    l.Set("cycle", Value::MakeFunction("cycle", [i](CallArgs& a) {
      if (a.args.empty()) Fail("loop.cycle needs arguments");
      return a.args[i % a.args.size()];
    }));
    l.Set("changed", Value::MakeFunction("changed", [last_changed](CallArgs& a) {
      Value now = Value::MakeArray(a.args);
      const bool changed = !last_changed->has_value() || !(*last_changed)->Equals(now);
      *last_changed = std::move(now);
      return Value(changed);
    }));
    loop_scope->vars["loop"] = loop;
    if (Exec(n.body, loop_scope, out) == Flow::kBreak) break;
  }
}

void Renderer::ExecSet(const Node& n, const std::shared_ptr<Scope>& scope, const Value& v) {
  if (!n.attr.empty()) {
    const Value ns = Lookup(n.targets[0], scope);
    if (!ns.is_object() || !ns.object().is_namespace) Fail("cannot assign attribute on a non-namespace object");
    ns.object().Set(n.attr, v);
    return;
  }
  if (n.targets.size() == 1) {
    scope->vars[n.targets[0]] = v;
    return;
  }
  const Array parts = Iterate(v);
  if (parts.size() != n.targets.size()) Fail("cannot unpack " + std::to_string(parts.size()) + " values");
  for (size_t k = 0; k < parts.size(); ++k) scope->vars[n.targets[k]] = parts[k];
}

Value Renderer::MakeMacro(const Node& n, const std::shared_ptr<Scope>& scope) {
  const Node* node = &n;
  std::weak_ptr<Scope> defining = scope;
  return Value::MakeFunction(n.text, [this, node, defining](CallArgs& args) -> Value {
    std::shared_ptr<Scope> parent = defining.lock();
    if (++depth_ > opt_.max_call_depth) Fail("macro calls nested more than " + std::to_string(opt_.max_call_depth) + " deep");
    auto local = std::make_shared<Scope>();
    local->parent = parent;
    for (size_t k = 0; k < node->params.size(); ++k) {
      const auto& [pname, def] = node->params[k];
      Value v = args.Get(k, pname.c_str(), Value::Undefined(pname));
      if (v.is_undefined() && def) v = Eval(*def, local);
      local->vars[pname] = v;
    }
    // What the parameters do not take: varargs (a tuple) and kwargs (a dict), as Jinja2 binds them.
    Array extra;
    for (size_t k = node->params.size(); k < args.args.size(); ++k) extra.push_back(args.args[k]);
    local->vars["varargs"] = Value::MakeTuple(std::move(extra));
    Value kwargs = Value::MakeObject();
    for (const auto& [key, v] : args.kwargs) {
      if (key == "caller") {
        local->vars["caller"] = v;  // from a {% call %} block
        continue;
      }
      const std::string& name = key;  // (a structured binding cannot be captured before C++20 in every compiler)
      const bool named = std::any_of(node->params.begin(), node->params.end(), [&](const auto& p) { return p.first == name; });
      if (!named) kwargs.object().Set(name, v);
    }
    local->vars["kwargs"] = kwargs;
    std::string text;
    Exec(node->body, local, &text);
    --depth_;
    return Value(std::move(text));
  });
}

Value Renderer::Call(const Value& fn, CallArgs& args) {
  if (fn.is_object()) {  // a recursive loop's `loop` is called as loop(items)
    if (const Value* call = fn.object().Find("__call__"); call != nullptr && call->is_function()) {
      Step();
      return call->function()(args);
    }
  }
  if (!fn.is_function()) Fail("'" + (fn.is_undefined() ? fn.name() : fn.ToString()) + "' is not callable");
  Step();
  return fn.function()(args);
}

Value Renderer::Lookup(const std::string& name, const std::shared_ptr<Scope>& scope) {
  for (const Scope* s = scope.get(); s != nullptr; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
  }
  if (context_.is_object()) {
    if (const Value* v = context_.object().Find(name)) return *v;
  }
  if (std::optional<Value> g = Global(*this, name)) return *g;
  return Value::Undefined(name);
}

namespace {
// One filter by name; an unknown name is an error naming it.
Value CallFilter(Renderer& r, const std::string& name, const Value& v, CallArgs& a) {
  Value out;
  if (!ApplyFilter(r, name, v, a, &out)) Fail("unknown filter '" + name + "'");
  return out;
}
}  // namespace

Value Renderer::ApplyFilterChain(const Expr& chain, Value v, const std::shared_ptr<Scope>& scope) {
  std::vector<const Expr*> filters;
  for (const Expr* f = &chain; f != nullptr; f = f->a.get()) filters.push_back(f);
  for (auto it = filters.rbegin(); it != filters.rend(); ++it) {
    CallArgs args = EvalArgs(**it, scope);
    v = CallFilter(*this, (*it)->name, v, args);
  }
  return v;
}

CallArgs Renderer::EvalArgs(const Expr& e, const std::shared_ptr<Scope>& scope) {
  CallArgs args;
  for (const ExprPtr& a : e.items) args.args.push_back(Eval(*a, scope));
  for (const auto& [k, a] : e.kwargs) args.kwargs.emplace_back(k, Eval(*a, scope));
  return args;
}

Value Renderer::Eval(const Expr& e, const std::shared_ptr<Scope>& scope) {
  switch (e.kind) {
    case Expr::Kind::kLiteral: return e.value;
    case Expr::Kind::kName: return Lookup(e.name, scope);
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      Array a;
      for (const ExprPtr& x : e.items) a.push_back(Eval(*x, scope));
      return e.kind == Expr::Kind::kTuple ? Value::MakeTuple(std::move(a)) : Value::MakeArray(std::move(a));
    }
    case Expr::Kind::kDict: {
      Value o = Value::MakeObject();
      for (size_t k = 0; k + 1 < e.items.size(); k += 2) {
        o.object().SetKey(Eval(*e.items[k], scope), Eval(*e.items[k + 1], scope));
      }
      return o;
    }
    case Expr::Kind::kGetAttr: return GetAttr(Eval(*e.a, scope), e.name);
    case Expr::Kind::kGetItem: return GetItem(Eval(*e.a, scope), Eval(*e.b, scope));
    case Expr::Kind::kSlice: return EvalSlice(e, scope);
    case Expr::Kind::kCall: {
      // obj.method(...) and name(...) alike: evaluate the callee, then call.
      const Value fn = Eval(*e.a, scope);
      CallArgs args = EvalArgs(e, scope);
      return Call(fn, args);
    }
    case Expr::Kind::kFilter: {
      const Value v = Eval(*e.a, scope);
      CallArgs args = EvalArgs(e, scope);
      return CallFilter(*this, e.name, v, args);
    }
    case Expr::Kind::kTest: {
      const Value v = Eval(*e.a, scope);
      CallArgs args = EvalArgs(e, scope);
      bool r = false;
      if (!ApplyTest(e.name, v, args, &r)) Fail("unknown test '" + e.name + "'");
      return Value(r != e.negated);
    }
    case Expr::Kind::kUnary: {
      const Value v = Eval(*e.a, scope);
      if (e.name == "not") return Value(!v.Truthy());
      if (!v.is_number() && !v.is_bool()) Fail("bad operand for unary " + e.name);
      if (e.name == "+") return v;
      if (v.is_int() && v.i() == INT64_MIN) Fail("integer overflow");
      return v.is_int() ? Value(-v.i()) : Value(-v.number());
    }
    case Expr::Kind::kBinary: return EvalBinary(e, scope);
    case Expr::Kind::kCond:
      if (Eval(*e.b, scope).Truthy()) return Eval(*e.a, scope);
      return e.c ? Eval(*e.c, scope) : Value::Undefined();
  }
  return Value::Undefined();
}

// v[start:stop:step] with Python's clamping; a string slices to a string.
Value Renderer::EvalSlice(const Expr& e, const std::shared_ptr<Scope>& scope) {
  const Value v = Eval(*e.a, scope);
  if (v.is_undefined()) UndefinedError(v);
  const Array items = Iterate(v);
  const int64_t n = static_cast<int64_t>(items.size());
  auto get = [&](size_t k, int64_t def) {
    if (!e.items[k]) return def;
    const Value x = Eval(*e.items[k], scope);
    if (x.is_none()) return def;
    if (!x.is_int()) Fail("slice indices must be integers");
    return x.i();
  };
  const int64_t step = get(2, 1);
  if (step == 0) Fail("slice step cannot be zero");
  auto clamp = [&](int64_t i, bool is_stop) {
    if (i < 0) i += n;
    if (step > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1) + (is_stop ? 0 : 0);
  };
  int64_t start = e.items[0] ? clamp(get(0, 0), false) : (step > 0 ? 0 : n - 1);
  int64_t stop = e.items[1] ? clamp(get(1, 0), true) : (step > 0 ? n : -1);
  Array out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    Step();
    out.push_back(items[static_cast<size_t>(i)]);
  }
  if (v.is_string()) {
    std::string s;
    for (const Value& c : out) s += c.str();
    return Value(std::move(s));
  }
  return Value::MakeArray(std::move(out));
}

namespace {

// a in b: a substring, a dict key, a list item; undefined b holds nothing.
bool Contains(const Value& b, const Value& a) {
  if (b.is_string()) {
    if (!a.is_string()) Fail("'in <string>' requires a string on the left");
    return b.str().find(a.str()) != std::string::npos;
  }
  if (b.is_object()) return a.is_string() && b.object().Find(a.str()) != nullptr;
  if (b.is_array()) return std::any_of(b.array().begin(), b.array().end(), [&](const Value& x) { return x.Equals(a); });
  if (!b.is_undefined()) Fail("argument of type '" + b.ToString() + "' is not iterable");
  return false;
}

// a * n for a string or list a, bounded (max_bytes for strings).
Value Repeat(const Value& a, int64_t n, size_t max_bytes) {
  if (n > 1 << 20 || (a.is_string() && static_cast<size_t>(std::max<int64_t>(n, 0)) * a.str().size() > max_bytes)) {
    Fail("repetition too large");
  }
  if (a.is_string()) {
    std::string r;
    for (int64_t k = 0; k < n; ++k) r += a.str();
    return Value(std::move(r));
  }
  Array r;
  for (int64_t k = 0; k < n; ++k) r.insert(r.end(), a.array().begin(), a.array().end());
  return Value::MakeArray(std::move(r));
}

// Integer arithmetic that leaves int64 is an error (Python would widen).
template <typename Op>
int64_t Checked(Op op, int64_t x, int64_t y) {
  int64_t r = 0;
  if (op(x, y, &r)) Fail("integer overflow");
  return r;
}
bool AddOverflows(int64_t x, int64_t y, int64_t* r) { return __builtin_add_overflow(x, y, r); }
bool SubOverflows(int64_t x, int64_t y, int64_t* r) { return __builtin_sub_overflow(x, y, r); }
bool MulOverflows(int64_t x, int64_t y, int64_t* r) { return __builtin_mul_overflow(x, y, r); }

// + - * / // % ** on numbers (bools count as 0 and 1): integers stay
// integers except for /, Python's floor semantics for // and %.
Value Arithmetic(const std::string& op, const Value& a, const Value& b) {
  const bool ints = !a.is_float() && !b.is_float();
  const int64_t x = a.is_int() ? a.i() : static_cast<int64_t>(a.b()), y = b.is_int() ? b.i() : static_cast<int64_t>(b.b());
  if (op == "+") return ints ? Value(Checked(AddOverflows, x, y)) : Value(a.number() + b.number());
  if (op == "-") return ints ? Value(Checked(SubOverflows, x, y)) : Value(a.number() - b.number());
  if (op == "*") return ints ? Value(Checked(MulOverflows, x, y)) : Value(a.number() * b.number());
  if (op == "/") {
    if (b.number() == 0) Fail("division by zero");
    return Value(a.number() / b.number());
  }
  if (op == "//") {
    if (ints) return Value(FloorDiv(x, y));
    if (b.number() == 0) Fail("division by zero");
    return Value(std::floor(a.number() / b.number()));
  }
  if (op == "%") {
    if (ints) return Value(x - FloorDiv(x, y) * y);
    if (b.number() == 0) Fail("modulo by zero");
    const double m = std::fmod(a.number(), b.number());
    return Value(m != 0 && ((m < 0) != (b.number() < 0)) ? m + b.number() : m);
  }
  if (op == "**") {
    if (!ints || y < 0) return Value(std::pow(a.number(), b.number()));
    if (y > 64) Fail("exponent too large");
    int64_t r = 1;
    for (int64_t k = 0; k < y; ++k) r = Checked(MulOverflows, r, x);
    return Value(r);
  }
  Fail("unknown operator " + op);
}

}  // namespace

Value Renderer::EvalBinary(const Expr& e, const std::shared_ptr<Scope>& scope) {
  const std::string& op = e.name;
  if (op == "and") {
    Value a = Eval(*e.a, scope);
    return a.Truthy() ? Eval(*e.b, scope) : a;
  }
  if (op == "or") {
    Value a = Eval(*e.a, scope);
    return a.Truthy() ? a : Eval(*e.b, scope);
  }
  const Value a = Eval(*e.a, scope), b = Eval(*e.b, scope);
  if (op == "~") return Value(a.ToString() + b.ToString());
  if (op == "==") return Value(a.Equals(b));
  if (op == "!=") return Value(!a.Equals(b));
  if (op == "in") return Value(Contains(b, a));
  if (op == "not in") return Value(!Contains(b, a));
  if (op == "<") return Value(Compare(a, b, op) < 0);
  if (op == ">") return Value(Compare(a, b, op) > 0);
  if (op == "<=") return Value(Compare(a, b, op) <= 0);
  if (op == ">=") return Value(Compare(a, b, op) >= 0);
  // An undefined name next to a string in "+" reads as empty text (what
  // template authors expect of optional variables; Jinja2 itself would raise).
  if (op == "+" && a.is_string() && b.is_undefined()) return a;
  if (op == "+" && a.is_undefined() && b.is_string()) return b;
  if (a.is_undefined()) UndefinedError(a);
  if (b.is_undefined()) UndefinedError(b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) return Value(a.str() + b.str());
    if (a.is_array() && b.is_array()) {
      Array r = a.array();
      r.insert(r.end(), b.array().begin(), b.array().end());
      return a.is_tuple() && b.is_tuple() ? Value::MakeTuple(std::move(r)) : Value::MakeArray(std::move(r));
    }
  }
  if (op == "*" && (a.is_string() || a.is_array()) && b.is_int()) return Repeat(a, b.i(), opt_.max_output_bytes);
  if (op == "%" && a.is_string()) return Value(PercentOp(a.str(), b));
  const bool nums = (a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool());
  if (!nums) Fail("unsupported operand types for " + op + ": " + a.Repr() + " and " + b.Repr());
  return Arithmetic(op, a, b);
}

Result<Template> Template::Parse(std::string_view source) {
  PC_ASSIGN_OR_RETURN(Body body, ParseTemplate(source));
  Template t;
  t.body_ = std::make_shared<const Body>(std::move(body));
  return t;
}

Result<std::string> Template::Render(const Value& context, const RenderOptions& opt) const {
  std::string out;
  try {
    Renderer r(opt, context);
    r.Run(*static_cast<const Body*>(body_.get()), &out);
  } catch (const RenderError& e) {
    return Status::Error(e.message);
  }
  return out;
}

}  // namespace pc::jinja
