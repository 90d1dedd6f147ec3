// Filters, tests, methods of strings, lists and dicts, and the globals
// templates call (range, namespace, dict, raise_exception, strftime_now).
// Semantics follow Python's Jinja2 and Python's str/list/dict methods; the
// tojson filter is the Hugging Face renderer's (json.dumps, non-ASCII kept).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <string_view>
#include <unordered_map>

#include "jinja/builtin_util.h"
#include "jinja/interp.h"

namespace pc::jinja {
namespace {
bool IsWs(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
}  // namespace

std::string Strip(const std::string& s, const Value& chars, bool left, bool right) {
  auto strip_char = [&](char c) {
    return chars.is_string() ? chars.str().find(c) != std::string::npos : IsWs(c);
  };
  size_t a = 0, b = s.size();
  if (left) while (a < b && strip_char(s[a])) ++a;
  if (right) while (b > a && strip_char(s[b - 1])) --b;
  return s.substr(a, b - a);
}

Value Split(const std::string& s, const Value& sep, int64_t maxsplit) {
  Array out;
  if (sep.is_none() || sep.is_undefined()) {  // whitespace runs, no empty parts
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && IsWs(s[i])) ++i;
      if (i >= s.size()) break;
      size_t j = i;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        out.emplace_back(Strip(s.substr(i), Value(), false, true));
        break;
      }
      while (j < s.size() && !IsWs(s[j])) ++j;
      out.emplace_back(s.substr(i, j - i));
      i = j;
    }
    return Value::MakeArray(std::move(out));
  }
  const std::string& d = sep.str();
  if (d.empty()) Fail("empty separator");
  size_t pos = 0;
  for (;;) {
    const size_t hit = s.find(d, pos);
    if (hit == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit)) {
      out.emplace_back(s.substr(pos));
      break;
    }
    out.emplace_back(s.substr(pos, hit - pos));
    pos = hit + d.size();
  }
  return Value::MakeArray(std::move(out));
}

std::string Replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) return s;
  std::string out;
  size_t pos = 0;
  int64_t n = 0;
  for (size_t hit; (count < 0 || n < count) && (hit = s.find(from, pos)) != std::string::npos; ++n) {
    out.append(s, pos, hit - pos);
    out += to;
    pos = hit + from.size();
  }
  out.append(s, pos, std::string::npos);
  return out;
}

bool PrefixMatch(const std::string& s, const Value& p, bool suffix) {
  auto one = [&](const std::string& x) {
    return suffix ? s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0 : s.rfind(x, 0) == 0;
  };
  if (p.is_array()) {
    for (const Value& x : p.array()) {
      if (x.is_string() && one(x.str())) return true;
    }
    return false;
  }
  if (!p.is_string()) Fail("startswith/endswith take a string or a tuple of strings");
  return one(p.str());
}

// Python's str.format with {} / {0} / {name} fields (no format specs beyond none).
std::string Format(const std::string& fmt, const CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    if (fmt[i] == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out += '}';
      ++i;
      continue;
    }
    if (fmt[i] != '{') {
      out += fmt[i];
      continue;
    }
    const size_t end = fmt.find('}', i);
    if (end == std::string::npos) Fail("single '{' in a format string");
    std::string field = fmt.substr(i + 1, end - i - 1), spec;
    const size_t colon = field.find(':');
    if (colon != std::string::npos) spec = field.substr(colon + 1), field = field.substr(0, colon);
    char conversion = 0;  // {x!r}, {x!s}
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      conversion = bang + 1 < field.size() ? field[bang + 1] : 's';
      field = field.substr(0, bang);
    }
    Value v;
    if (field.empty()) v = a.Get(auto_index++, "");
    else if (std::isdigit(static_cast<unsigned char>(field[0]))) v = a.Get(static_cast<size_t>(std::stoul(field)), "");
    else v = a.Get(SIZE_MAX, field.c_str());
    if (v.is_undefined()) Fail("format: no argument for {" + field + "}");
    if (conversion == 'r') v = Value(v.Repr());
    else if (conversion != 0) v = Value(v.ToString());
    out += spec.empty() ? v.ToString() : FormatSpec(v, spec);
    i = end;
  }
  return out;
}

namespace {

// One %-conversion of PercentFormat: flags, width and precision as parsed.
struct PercentSpec {
  std::string flags;
  int width = -1, precision = -1;
  char type = 's';
};

std::string PadTo(std::string s, const PercentSpec& p, bool numeric) {
  const size_t len = Utf8Length(s), width = p.width < 0 ? 0 : static_cast<size_t>(p.width);
  if (len >= width) return s;
  const size_t fill = width - len;
  if (p.flags.find('-') != std::string::npos) return s + std::string(fill, ' ');
  if (numeric && p.flags.find('0') != std::string::npos) {
    const size_t sign = !s.empty() && (s[0] == '-' || s[0] == '+' || s[0] == ' ') ? 1 : 0;
    return s.substr(0, sign) + std::string(fill, '0') + s.substr(sign);
  }
  return std::string(fill, ' ') + s;
}

std::string PercentOne(const Value& v, const PercentSpec& p) {
  switch (p.type) {
    case 's':
    case 'r': {
      std::string s = p.type == 's' ? v.ToString() : v.Repr();
      if (p.precision >= 0 && static_cast<size_t>(p.precision) < s.size()) s.resize(static_cast<size_t>(p.precision));
      return PadTo(std::move(s), p, false);
    }
    case 'c': {
      if (v.is_string() && Utf8Length(v.str()) == 1) return PadTo(v.str(), p, false);
      if (!v.is_int() || v.i() < 0 || v.i() > 127) Fail("%c requires an ASCII code or a single character");
      return PadTo(std::string(1, static_cast<char>(v.i())), p, false);
    }
    default: break;
  }
  if (!v.is_number() && !v.is_bool()) Fail(std::string("%") + p.type + " format: a real number is required, not " + v.Repr());
  std::string f = "%" + p.flags;
  f.erase(std::remove(f.begin(), f.end(), '-'), f.end());  // padding is PadTo's
  f.erase(std::remove(f.begin() + 1, f.end(), '0'), f.end());
  if (p.precision >= 0) f += "." + std::to_string(p.precision);
  char buf[512];
  if (p.type == 'd' || p.type == 'i' || p.type == 'u' || p.type == 'x' || p.type == 'X' || p.type == 'o') {
    const long long n = v.is_float() ? static_cast<long long>(v.number()) : static_cast<long long>(v.is_bool() ? v.b() : v.i());
    const char t = p.type == 'i' || p.type == 'u' ? 'd' : p.type;
    std::snprintf(buf, sizeof buf, (f + "ll" + t).c_str(), n);
  } else {
    std::snprintf(buf, sizeof buf, (f + p.type).c_str(), v.number());
  }
  return PadTo(buf, p, true);
}

}  // namespace

std::string PercentFormat(const std::string& fmt, const CallArgs& a) {
  if (!a.args.empty() && !a.kwargs.empty()) Fail("format: positional and keyword arguments cannot be mixed");
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) Fail("format: incomplete format");
    if (fmt[i] == '%') {
      out += '%';
      continue;
    }
    Value v;
    if (fmt[i] == '(') {
      const size_t close = fmt.find(')', i);
      if (close == std::string::npos) Fail("format: incomplete format key");
      const std::string key = fmt.substr(i + 1, close - i - 1);
      v = a.Get(SIZE_MAX, key.c_str());
      if (v.is_undefined()) Fail("format: no argument named '" + key + "'");
      i = close + 1;
    } else {
      if (next >= a.args.size()) Fail("format: not enough arguments for format string");
      v = a.args[next++];
    }
    PercentSpec p;
    for (; i < fmt.size() && std::string_view("-+ 0#").find(fmt[i]) != std::string_view::npos; ++i) p.flags += fmt[i];
    auto number = [&](int* out_n) {
      if (i >= fmt.size() || !std::isdigit(static_cast<unsigned char>(fmt[i]))) return;
      *out_n = 0;
      for (; i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i])); ++i) {
        *out_n = *out_n * 10 + (fmt[i] - '0');
        if (*out_n > (1 << 20)) Fail("format: width or precision too large");
      }
    };
    number(&p.width);
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      p.precision = 0;
      number(&p.precision);
    }
    while (i < fmt.size() && std::string_view("hlL").find(fmt[i]) != std::string_view::npos) ++i;
    if (i >= fmt.size() || std::string_view("srcdiuoxXeEfFgG").find(fmt[i]) == std::string_view::npos) {
      Fail("format: unsupported format character");
    }
    p.type = fmt[i];
    out += PercentOne(v, p);
  }
  if (a.kwargs.empty() && next < a.args.size()) Fail("format: not all arguments converted during string formatting");
  return out;
}

Value Bound(const std::string& name, std::function<Value(CallArgs&)> fn) { return Value::MakeFunction(name, std::move(fn)); }

int64_t IntArg(const Value& v, int64_t def) {
  if (v.is_undefined() || v.is_none()) return def;
  if (!v.is_int() && !v.is_bool()) Fail("an integer argument is required");
  return v.is_int() ? v.i() : v.b();
}

// Attribute path "a.b" of an item (selectattr, map, sort...).
Value AttrPath(const Value& item, const std::string& path) {
  Value v = item;
  size_t pos = 0;
  while (pos <= path.size()) {
    const size_t dot = path.find('.', pos);
    const std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (v.is_undefined()) return v;
    v = std::isdigit(static_cast<unsigned char>(part.empty() ? 'x' : part[0])) ? GetItem(v, Value(static_cast<int64_t>(std::stoll(part))))
                                                                                : GetItem(v, Value(part));
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return v;
}

bool Less(const Value& a, const Value& b) {
  if (a.is_undefined() && b.is_undefined()) return false;  // Jinja2's Undefined items keep their order
  if ((a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool())) return a.number() < b.number();
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  Fail("values of these types cannot be ordered");
}

std::string Indent(const std::string& s, const Value& width, bool first, bool blank) {
  const std::string pad = width.is_string() ? width.str() : std::string(static_cast<size_t>(IntArg(width, 4)), ' ');
  std::string out;
  size_t pos = 0;
  bool first_line = true;
  while (pos <= s.size()) {
    const size_t nl = s.find('\n', pos);
    const std::string line = s.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    const bool add = first_line ? first : (blank || !Strip(line, Value(), true, true).empty());
    if (add && !(first_line && line.empty() && !first)) out += pad;
    out += line;
    if (nl == std::string::npos) break;
    out += '\n';
    pos = nl + 1;
    first_line = false;
  }
  return out;
}

// A list index as Python takes it (negative from the end); fails outside.
namespace {

size_t ListIndex(const Array& a, int64_t i, const char* what) {
  const int64_t n = static_cast<int64_t>(a.size());
  if (i < 0) i += n;
  if (i < 0 || i >= n) Fail(std::string(what) + " index out of range");
  return static_cast<size_t>(i);
}

constexpr size_t kMaxListItems = 1 << 20;  // extend() could otherwise double a list per step

// Python's list methods. Lists are shared by reference, as in Python, so
// `ns.ids.append(x)` changes the namespace's list (templates written for the
// reference engine use them; Hugging Face's sandbox refuses them).
std::optional<Value> ListMethod(const Value& l, const std::string& name) {
  if (name == "append") {
    return Bound(name, [l](CallArgs& a) {
      if (l.array().size() >= kMaxListItems) Fail("list too long");
      l.array().push_back(a.Get(0, "object"));
      return Value::None();
    });
  }
  if (name == "extend") {
    return Bound(name, [l](CallArgs& a) {
      Array add;
      for (const Value& x : Iterate(a.Get(0, "iterable"))) add.push_back(x);
      if (l.array().size() + add.size() > kMaxListItems) Fail("list too long");
      l.array().insert(l.array().end(), add.begin(), add.end());
      return Value::None();
    });
  }
  if (name == "pop") {
    return Bound(name, [l](CallArgs& a) {
      if (l.array().empty()) Fail("pop from empty list");
      const size_t i = ListIndex(l.array(), IntArg(a.Get(0, "index"), -1), "pop");
      Value v = l.array()[i];
      l.array().erase(l.array().begin() + static_cast<std::ptrdiff_t>(i));
      return v;
    });
  }
  if (name == "insert") {
    return Bound(name, [l](CallArgs& a) {
      if (l.array().size() >= kMaxListItems) Fail("list too long");
      const int64_t n = static_cast<int64_t>(l.array().size());
      int64_t i = IntArg(a.Get(0, "index"), 0);
      i = std::clamp<int64_t>(i < 0 ? i + n : i, 0, n);
      l.array().insert(l.array().begin() + i, a.Get(1, "object"));
      return Value::None();
    });
  }
  if (name == "index" || name == "count") {
    const bool count = name == "count";
    return Bound(name, [l, count](CallArgs& a) {
      const Value x = a.Get(0, "value");
      int64_t n = 0;
      for (size_t i = 0; i < l.array().size(); ++i) {
        if (!l.array()[i].Equals(x)) continue;
        if (!count) return Value(static_cast<int64_t>(i));
        ++n;
      }
      if (!count) Fail(x.Repr() + " is not in list");
      return Value(n);
    });
  }
  return std::nullopt;
}

}  // namespace

namespace {

// Python's dict methods, on a copy of the dict (values share storage).
using DictMethod = Value (*)(const Value& o, CallArgs& a);

Value DictItems(const Value& o, CallArgs&) {
  Array out;
  const Object& obj = o.object();
  for (size_t i = 0; i < obj.size(); ++i) out.push_back(Value::MakeTuple({obj.KeyAt(i), obj.items()[i].second}));
  return Value::MakeArray(std::move(out));
}
Value DictKeys(const Value& o, CallArgs&) {
  Array out;
  for (size_t i = 0; i < o.object().size(); ++i) out.push_back(o.object().KeyAt(i));
  return Value::MakeArray(std::move(out));
}
Value DictValues(const Value& o, CallArgs&) {
  Array out;
  for (const auto& kv : o.object().items()) out.push_back(kv.second);
  return Value::MakeArray(std::move(out));
}
Value DictGet(const Value& o, CallArgs& a) {
  const Value key = a.Get(0, "key");
  const Value* v = key.is_string() ? o.object().Find(key.str()) : nullptr;
  return v ? *v : a.Get(1, "default", Value::None());
}

const std::unordered_map<std::string_view, DictMethod>& DictMethods() {
  static const std::unordered_map<std::string_view, DictMethod> table = {
      {"items", DictItems}, {"keys", DictKeys}, {"values", DictValues}, {"get", DictGet}};
  return table;
}

}  // namespace

std::optional<Value> Method(const Value& obj, const std::string& name) {
  if (obj.is_string()) {
    const StrMethodFn fn = FindStrMethod(name);
    if (fn == nullptr) return std::nullopt;
    return Bound(name, [s = obj.str(), fn](CallArgs& a) { return fn(s, a); });
  }
  if (obj.is_array()) return ListMethod(obj, name);
  if (obj.is_object()) {
    const auto it = DictMethods().find(name);
    if (it == DictMethods().end()) return std::nullopt;
    return Bound(name, [o = obj, fn = it->second](CallArgs& a) { return fn(o, a); });
  }
  return std::nullopt;
}

std::optional<Value> Global(Renderer& r, const std::string& name) {
  if (name == "range") {
    return Bound(name, [&r](CallArgs& a) {
      int64_t start = 0, stop = 0, step = 1;
      if (a.args.size() == 1) stop = IntArg(a.args[0], 0);
      else if (a.args.size() >= 2) {
        start = IntArg(a.args[0], 0);
        stop = IntArg(a.args[1], 0);
        if (a.args.size() > 2) step = IntArg(a.args[2], 1);
      }
      if (step == 0) Fail("range() step must not be zero");
      Array out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        r.Step();
        out.emplace_back(i);
      }
      return Value::MakeArray(std::move(out));
    });
  }
  if (name == "namespace" || name == "dict") {
    const bool ns = name == "namespace";
    return Bound(name, [ns](CallArgs& a) {
      Value o = Value::MakeObject();
      o.object().is_namespace = ns;
      if (!a.args.empty() && a.args[0].is_object()) {
        for (const auto& [k, v] : a.args[0].object().items()) o.object().Set(k, v);
      }
      for (const auto& [k, v] : a.kwargs) o.object().Set(k, v);
      return o;
    });
  }
  if (name == "raise_exception") {
    return Bound(name, [](CallArgs& a) -> Value { Fail(a.Get(0, "message").ToString()); });
  }
  if (name == "strftime_now") {
    return Bound(name, [&r](CallArgs& a) {
      std::tm tm{};
      if (r.options().now) {
        tm = *r.options().now;
      } else {
        const std::time_t t = std::time(nullptr);
        localtime_r(&t, &tm);
      }
      char buf[256];
      const size_t n = std::strftime(buf, sizeof buf, a.Get(0, "format").ToString().c_str(), &tm);
      return Value(std::string(buf, n));
    });
  }
  return std::nullopt;
}

namespace {
// Whether a test of that name exists: asked of ApplyTest itself (on None;
// a test that refuses None's type exists too), so the names live in one place.
bool IsTestName(const std::string& n) {
  bool out = false;
  try {
    return ApplyTest(n, Value::None(), CallArgs{}, &out);
  } catch (const RenderError&) {
    return true;
  }
}
}  // namespace

bool ApplyTest(const std::string& name, const Value& v, const CallArgs& a, bool* out) {
  const Value arg = a.Get(0, "value");
  if (name == "defined") *out = !v.is_undefined();
  else if (name == "undefined") *out = v.is_undefined();
  else if (name == "none") *out = v.is_none();
  else if (name == "string") *out = v.is_string();
  else if (name == "number") *out = v.is_number();
  else if (name == "integer") *out = v.is_int();
  else if (name == "float") *out = v.is_float();
  else if (name == "boolean") *out = v.is_bool();
  else if (name == "true") *out = v.is_bool() && v.b();
  else if (name == "false") *out = v.is_bool() && !v.b();
  else if (name == "mapping") *out = v.is_object();
  else if (name == "sequence") *out = v.is_array() || v.is_string() || v.is_object();
  else if (name == "iterable") *out = v.is_array() || v.is_string() || v.is_object() || v.is_undefined();
  else if (name == "callable") *out = v.is_function();
  else if (name == "odd" || name == "even") {
    if (!v.is_int()) Fail("'" + name + "' needs an integer");
    *out = (v.i() % 2 != 0) == (name == "odd");
  } else if (name == "divisibleby") {
    const int64_t d = IntArg(arg, 1);
    if (d == 0 || !v.is_int()) Fail("divisibleby needs integers and a non-zero divisor");
    *out = v.i() % d == 0;
  } else if (name == "eq" || name == "equalto" || name == "==") *out = v.Equals(arg);
  else if (name == "ne" || name == "!=") *out = !v.Equals(arg);
  else if (name == "lt" || name == "lessthan" || name == "<") *out = Less(v, arg);
  else if (name == "gt" || name == "greaterthan" || name == ">") *out = Less(arg, v);
  else if (name == "le" || name == "<=") *out = !Less(arg, v);
  else if (name == "ge" || name == ">=") *out = !Less(v, arg);
  else if (name == "in") {
    *out = false;
    if (arg.is_string()) *out = v.is_string() && arg.str().find(v.str()) != std::string::npos;
    else if (arg.is_object()) *out = v.is_string() && arg.object().Find(v.str()) != nullptr;
    else for (const Value& x : Iterate(arg)) *out = *out || x.Equals(v);
  } else if (name == "sameas") *out = v.SameAs(arg);
  else if (name == "filter") *out = v.is_string() && HasFilter(v.str());
  else if (name == "test") *out = v.is_string() && IsTestName(v.str());
  else if (name == "escaped") *out = false;  // no Markup strings: autoescape is off
  else if (name == "lower") *out = v.is_string() && Lower(v.str()) == v.str();
  else if (name == "upper") *out = v.is_string() && Upper(v.str()) == v.str();
  else return false;
  return true;
}

}  // namespace pc::jinja
