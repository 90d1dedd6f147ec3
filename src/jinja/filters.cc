// Jinja2's filters, one function each, found by name in one table (an alias
// is one more row). Semantics follow Python's Jinja2; tojson is the Hugging
// Face renderer's (json.dumps, non-ASCII kept). r.Step() in loops over
// items counts work against the render's bound.
#include <algorithm>
#include <cmath>
#include <string_view>
#include <unordered_map>

#include "jinja/builtin_util.h"
#include "jinja/interp.h"

namespace pc::jinja {
namespace {

using Filter = Value (*)(Renderer& r, const Value& v, CallArgs& a);

// tojson(indent, ...) with json.dumps' keywords as the Hugging Face
// renderer passes them: ensure_ascii, separators (a pair), sort_keys.
Value ToJson(Renderer&, const Value& v, CallArgs& a) {
  const Value indent = a.Get(0, "indent");
  JsonStyle st;
  st.indent = indent.is_int() ? static_cast<int>(indent.i()) : -1;
  st.sort_keys = a.Get(99, "sort_keys").Truthy();
  st.ensure_ascii = a.Get(99, "ensure_ascii").Truthy();
  const Value seps = a.Get(99, "separators");
  if (seps.is_array() && seps.array().size() == 2) {
    st.item_sep = seps.array()[0].ToString();
    st.key_sep = seps.array()[1].ToString();
  }
  return Value(v.ToJson(st));
}
Value Length(Renderer&, const Value& v, CallArgs&) {
  const std::optional<size_t> n = v.is_undefined() ? std::optional<size_t>(0) : v.Length();
  if (!n) Fail("object of this type has no length");
  return Value(*n);
}
Value Trim(Renderer&, const Value& v, CallArgs& a) { return Value(Strip(v.ToString(), a.Get(0, "chars"), true, true)); }
Value Default(Renderer&, const Value& v, CallArgs& a) {
  const bool boolean = a.Get(1, "boolean").Truthy();
  return (v.is_undefined() || (boolean && !v.Truthy())) ? a.Get(0, "default_value", Value("")) : v;
}
Value String(Renderer&, const Value& v, CallArgs&) { return v.is_string() ? v : Value(v.ToString()); }
Value Identity(Renderer&, const Value& v, CallArgs&) { return v; }
Value UpperF(Renderer&, const Value& v, CallArgs&) { return Value(Upper(v.ToString())); }
Value LowerF(Renderer&, const Value& v, CallArgs&) { return Value(Lower(v.ToString())); }
// The str methods of the same names.
Value StrMethod(const Value& v, const char* name) {
  CallArgs none;
  return (*Method(Value(v.ToString()), name)).function()(none);
}
Value Capitalize(Renderer&, const Value& v, CallArgs&) { return StrMethod(v, "capitalize"); }
// Jinja2's title: words start after '-', whitespace, '(', '{', '[' or '<'
// (not after every non-letter, as str.title: "they're" stays "They're").
Value Title(Renderer&, const Value& v, CallArgs&) {
  const std::string s = v.ToString();
  std::string out;
  bool start = true;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool sep = c == '-' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == '(' ||
                     c == '{' || c == '[' || c == '<';
    if (sep) {
      out += c;
      start = true;
      continue;
    }
    size_t len = 1;  // one UTF-8 character
    while (i + len < s.size() && (static_cast<unsigned char>(s[i + len]) & 0xC0) == 0x80) ++len;
    const std::string ch = s.substr(i, len);
    out += start ? Upper(ch) : Lower(ch);
    start = false;
    i += len - 1;
  }
  return Value(out);
}
Value ReplaceF(Renderer&, const Value& v, CallArgs& a) {
  return Value(Replace(v.ToString(), a.Get(0, "old").ToString(), a.Get(1, "new").ToString(), IntArg(a.Get(2, "count"), -1)));
}
Value Join(Renderer& r, const Value& v, CallArgs& a) {
  const Value attr = a.Get(1, "attribute");
  std::string s;
  bool first = true;
  for (const Value& x : Iterate(v)) {
    r.Step();
    s += (first ? "" : a.Get(0, "d", Value("")).ToString()) + (attr.is_string() ? AttrPath(x, attr.str()) : x).ToString();
    first = false;
  }
  return Value(s);
}
Value List(Renderer&, const Value& v, CallArgs&) { return Value::MakeArray(Iterate(v)); }
Value Items(Renderer&, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::MakeArray();
  if (!v.is_object()) Fail("items needs a mapping");
  CallArgs none;
  return (*Method(v, "items")).function()(none);
}
// What dictsort / min / max / unique compare: the item or its attribute, strings
// lowercased unless case_sensitive (Jinja2's defaults).
Value CompareKey(const Value& item, const Value& attr, bool case_sensitive) {
  const Value k = attr.is_string() ? AttrPath(item, attr.str()) : item;
  return !case_sensitive && k.is_string() ? Value(Lower(k.str())) : k;
}
Value DictSort(Renderer&, const Value& v, CallArgs& a) {
  if (!v.is_object()) Fail("dictsort needs a mapping");
  const bool case_sensitive = a.Get(0, "case_sensitive").Truthy();
  const bool by_value = a.Get(1, "by").ToString() == "value";
  const bool reverse = a.Get(2, "reverse").Truthy();
  std::vector<std::pair<Value, Value>> items;
  for (size_t i = 0; i < v.object().size(); ++i) items.emplace_back(v.object().KeyAt(i), v.object().items()[i].second);
  auto key = [&](const Value& k) { return CompareKey(k, Value(), case_sensitive); };
  std::stable_sort(items.begin(), items.end(), [&](const auto& x, const auto& y) {
    return by_value ? Less(key(x.second), key(y.second)) : Less(key(x.first), key(y.first));
  });
  if (reverse) std::reverse(items.begin(), items.end());
  Array arr;
  for (auto& [k, x] : items) arr.push_back(Value::MakeTuple({k, x}));
  return Value::MakeArray(std::move(arr));
}
Value First(Renderer&, const Value& v, CallArgs&) {
  const Array items = Iterate(v);
  return items.empty() ? Value::Undefined() : items.front();
}
Value Last(Renderer&, const Value& v, CallArgs&) {
  const Array items = Iterate(v);
  return items.empty() ? Value::Undefined() : items.back();
}
Value Extreme(const Value& v, CallArgs& a, bool min) {
  const Array items = Iterate(v);
  if (items.empty()) return Value::Undefined();
  const bool cs = a.Get(0, "case_sensitive").Truthy();
  const Value attr = a.Get(1, "attribute");
  Value best = items[0];
  for (const Value& x : items) {
    const Value kx = CompareKey(x, attr, cs), kb = CompareKey(best, attr, cs);
    if (min ? Less(kx, kb) : Less(kb, kx)) best = x;
  }
  return best;
}
Value Min(Renderer&, const Value& v, CallArgs& a) { return Extreme(v, a, true); }
Value Max(Renderer&, const Value& v, CallArgs& a) { return Extreme(v, a, false); }
Value Sum(Renderer&, const Value& v, CallArgs& a) {
  const Value attr = a.Get(0, "attribute");
  Value acc = a.Get(1, "start", Value(int64_t{0}));
  for (const Value& item : Iterate(v)) {
    const Value x = attr.is_string() ? AttrPath(item, attr.str()) : item;
    if (acc.is_array() && x.is_array()) {  // sum(start=[]) concatenates
      Array r = acc.array();
      r.insert(r.end(), x.array().begin(), x.array().end());
      acc = Value::MakeArray(std::move(r));
      continue;
    }
    acc = acc.is_int() && x.is_int() ? Value(acc.i() + x.i()) : Value(acc.number() + x.number());
  }
  return acc;
}
Value Unique(Renderer& r, const Value& v, CallArgs& a) {
  const bool cs = a.Get(0, "case_sensitive").Truthy();
  const Value attr = a.Get(1, "attribute");
  Array kept, keys;
  for (const Value& x : Iterate(v)) {
    r.Step();
    const Value k = CompareKey(x, attr, cs);
    if (std::none_of(keys.begin(), keys.end(), [&](const Value& seen) { return seen.Equals(k); })) {
      keys.push_back(k);
      kept.push_back(x);
    }
  }
  return Value::MakeArray(std::move(kept));
}
Value Reverse(Renderer&, const Value& v, CallArgs&) {
  Array items = Iterate(v);
  if (v.is_string()) {
    std::string s;
    for (auto it = items.rbegin(); it != items.rend(); ++it) s += it->str();
    return Value(s);
  }
  std::reverse(items.begin(), items.end());
  return Value::MakeArray(std::move(items));
}
Value Sort(Renderer&, const Value& v, CallArgs& a) {
  Array items = Iterate(v);
  const Value attr = a.Get(2, "attribute");
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return attr.is_string() ? Less(AttrPath(x, attr.str()), AttrPath(y, attr.str())) : Less(x, y);
  });
  if (a.Get(0, "reverse").Truthy()) std::reverse(items.begin(), items.end());
  return Value::MakeArray(std::move(items));
}
// select / reject (by_attr false) and selectattr / rejectattr: the items
// whose subject passes the named test (or is truthy) equal to keep.
Value Select(Renderer& r, const Value& v, CallArgs& a, bool by_attr, bool keep) {
  const size_t t = by_attr ? 1 : 0;
  const std::string attr = by_attr ? a.Get(0, "attribute").ToString() : "";
  Array kept;
  for (const Value& x : Iterate(v)) {
    r.Step();
    const Value subject = by_attr ? AttrPath(x, attr) : x;
    bool pass;
    if (a.args.size() > t) {
      CallArgs ta;
      ta.args.assign(a.args.begin() + static_cast<std::ptrdiff_t>(t + 1), a.args.end());
      if (!ApplyTest(a.args[t].ToString(), subject, ta, &pass)) Fail("unknown test '" + a.args[t].ToString() + "'");
    } else {
      pass = subject.Truthy();
    }
    if (pass == keep) kept.push_back(x);
  }
  return Value::MakeArray(std::move(kept));
}
Value SelectF(Renderer& r, const Value& v, CallArgs& a) { return Select(r, v, a, false, true); }
Value RejectF(Renderer& r, const Value& v, CallArgs& a) { return Select(r, v, a, false, false); }
Value SelectAttr(Renderer& r, const Value& v, CallArgs& a) { return Select(r, v, a, true, true); }
Value RejectAttr(Renderer& r, const Value& v, CallArgs& a) { return Select(r, v, a, true, false); }
Value Map(Renderer& r, const Value& v, CallArgs& a) {
  Array mapped;
  const Value attr = a.Get(99, "attribute");
  for (const Value& x : Iterate(v)) {
    r.Step();
    if (attr.is_string()) {
      Value m = AttrPath(x, attr.str());
      if (m.is_undefined()) m = a.Get(99, "default");
      mapped.push_back(m);
      continue;
    }
    if (a.args.empty()) Fail("map needs a filter name or attribute=");
    CallArgs fa;
    fa.args.assign(a.args.begin() + 1, a.args.end());
    Value m;
    if (!ApplyFilter(r, a.args[0].ToString(), x, fa, &m)) Fail("unknown filter '" + a.args[0].ToString() + "'");
    mapped.push_back(m);
  }
  return Value::MakeArray(std::move(mapped));
}
Value IndentF(Renderer&, const Value& v, CallArgs& a) {
  return Value(Indent(v.ToString(), a.Get(0, "width", Value(int64_t{4})), a.Get(1, "first").Truthy(), a.Get(2, "blank").Truthy()));
}
// int(default=0, base=10): Python's int(s, base) (a 0x / 0o / 0b prefix
// matching the base allowed; base 0 reads the prefix), then int(float(s)).
Value Int(Renderer&, const Value& v, CallArgs& a) {
  if (v.is_int()) return v;
  if (v.is_number() || v.is_bool()) return Value(static_cast<int64_t>(v.number()));
  const Value def = a.Get(0, "default", Value(int64_t{0}));
  int base = static_cast<int>(IntArg(a.Get(1, "base"), 10));
  std::string s = Strip(v.ToString(), Value(), true, true);
  std::string sign;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) sign = s.substr(0, 1), s = s.substr(1);
  auto prefix = [&](char p) { return s.size() > 2 && s[0] == '0' && (s[1] == p || s[1] == p - 32); };
  const int prefixed = prefix('x') ? 16 : prefix('o') ? 8 : prefix('b') ? 2 : 0;
  if (prefixed != 0 && (base == 0 || base == prefixed)) s = s.substr(2), base = prefixed;
  if (base == 0) base = 10;
  if (base < 2 || base > 36 || s.empty()) return def;
  try {
    size_t used = 0;
    const int64_t n = std::stoll(sign + s, &used, base);
    if (used == sign.size() + s.size()) return Value(n);
    if (base != 10) return def;
    const double f = std::stod(sign + s, &used);
    return used == sign.size() + s.size() ? Value(static_cast<int64_t>(f)) : def;
  } catch (...) {
    return def;
  }
}
Value Float(Renderer&, const Value& v, CallArgs& a) {
  try {
    return v.is_number() ? Value(v.number()) : Value(std::stod(v.ToString()));
  } catch (...) {
    return a.Get(0, "default", Value(0.0));
  }
}
Value Abs(Renderer&, const Value& v, CallArgs&) {
  return v.is_int() ? Value(v.i() < 0 ? -v.i() : v.i()) : Value(std::fabs(v.number()));
}
// round(precision=0, method='common'|'ceil'|'floor').
Value Round(Renderer&, const Value& v, CallArgs& a) {
  const int64_t precision = IntArg(a.Get(0, "precision"), 0);
  const std::string method = a.Get(1, "method", Value("common")).ToString();
  const double scale = std::pow(10.0, static_cast<double>(precision)), x = v.number() * scale;
  if (method == "ceil") return Value(std::ceil(x) / scale);
  if (method == "floor") return Value(std::floor(x) / scale);
  if (method != "common") Fail("method must be common, ceil or floor");
  return Value(std::nearbyint(x) / scale);
}
// wordwrap(width=79, break_long_words=True, wrapstring='\n'): words filled
// greedily into lines of at most width characters (textwrap's rule without
// its hyphen breaks), a longer word cut into pieces when allowed.
Value WordWrap(Renderer&, const Value& v, CallArgs& a) {
  const int64_t width = IntArg(a.Get(0, "width"), 79);
  if (width <= 0) Fail("wordwrap: invalid width");
  const bool break_long = a.Get(1, "break_long_words", Value(true)).Truthy();
  const std::string wrap = a.Get(2, "wrapstring", Value("\n")).ToString();
  const size_t w = static_cast<size_t>(width);
  std::vector<std::string> lines;
  std::string line;
  const Value words = Split(v.ToString(), Value(), -1);  // alive for the loop (array() is a reference into it)
  for (const Value& word : words.array()) {
    std::string rest = word.str();
    while (true) {
      const size_t need = line.empty() ? Utf8Length(rest) : Utf8Length(line) + 1 + Utf8Length(rest);
      if (need <= w) {
        line += (line.empty() ? "" : " ") + rest;
        break;
      }
      if (!line.empty()) {
        lines.push_back(line);
        line.clear();
        continue;
      }
      if (!break_long) {
        line = rest;
        break;
      }
      const Array chars = Iterate(Value(rest));
      std::string head, tail;
      for (size_t i = 0; i < chars.size(); ++i) (i < w ? head : tail) += chars[i].str();
      lines.push_back(head);
      rest = tail;
      if (rest.empty()) break;
    }
  }
  if (!line.empty()) lines.push_back(line);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) out += (i ? wrap : "") + lines[i];
  return Value(out);
}
Value WordCount(Renderer&, const Value& v, CallArgs&) { return Value(Split(v.ToString(), Value(), -1).array().size()); }
Value Batch(Renderer&, const Value& v, CallArgs& a) {
  const int64_t size = IntArg(a.Get(0, "linecount"), 1);
  if (size <= 0) Fail("batch size must be positive");
  Array rows, row;
  for (const Value& x : Iterate(v)) {
    row.push_back(x);
    if (static_cast<int64_t>(row.size()) == size) {
      rows.push_back(Value::MakeArray(std::move(row)));
      row.clear();
    }
  }
  if (!row.empty()) {
    const Value fill = a.Get(1, "fill_with");
    while (!fill.is_undefined() && !fill.is_none() && static_cast<int64_t>(row.size()) < size) row.push_back(fill);
    rows.push_back(Value::MakeArray(std::move(row)));
  }
  return Value::MakeArray(std::move(rows));
}
Value Escape(Renderer&, const Value& v, CallArgs&) {
  std::string s;
  for (char c : v.ToString()) {
    switch (c) {
      case '&': s += "&amp;"; break;
      case '<': s += "&lt;"; break;
      case '>': s += "&gt;"; break;
      case '"': s += "&#34;"; break;
      case '\'': s += "&#39;"; break;
      default: s += c;
    }
  }
  return Value(s);
}
Value Center(Renderer&, const Value& v, CallArgs& a) {
  const std::string s = v.ToString();
  const int64_t width = IntArg(a.Get(0, "width"), 80);
  const size_t len = Utf8Length(s);
  if (static_cast<int64_t>(len) >= width || width > (1 << 20)) return Value(s);
  const size_t total = static_cast<size_t>(width) - len, left = total / 2;
  return Value(std::string(left, ' ') + s + std::string(total - left, ' '));
}
// groupby(attribute, default, case_sensitive): (grouper, items) tuples in
// the keys' order; without case_sensitive strings compare lowercased and a
// group's grouper is its first item's own key, as Jinja2 3.1.
Value GroupBy(Renderer& r, const Value& v, CallArgs& a) {
  const std::string attr = a.Get(0, "attribute").ToString();
  const Value def = a.Get(1, "default");
  const bool case_sensitive = a.Get(2, "case_sensitive").Truthy();
  auto key_of = [&](const Value& item) {
    Value k = AttrPath(item, attr);
    if (k.is_undefined() && !def.is_undefined()) k = def;
    return k;
  };
  auto cmp_key = [&](const Value& k) { return !case_sensitive && k.is_string() ? Value(Lower(k.str())) : k; };
  Array items = Iterate(v);
  std::stable_sort(items.begin(), items.end(),
                   [&](const Value& x, const Value& y) { return Less(cmp_key(key_of(x)), cmp_key(key_of(y))); });
  Array groups;
  for (size_t i = 0; i < items.size();) {
    const Value k = cmp_key(key_of(items[i]));
    Array members;
    size_t j = i;
    for (; j < items.size() && cmp_key(key_of(items[j])).Equals(k); ++j) {
      r.Step();
      members.push_back(items[j]);
    }
    groups.push_back(Value::MakeTuple({key_of(items[i]), Value::MakeArray(std::move(members))}));
    i = j;
  }
  return Value::MakeArray(std::move(groups));
}
// truncate(length=255, killwords=False, end='...', leeway=5), Jinja2's rule
// (lengths in code points).
Value Truncate(Renderer&, const Value& v, CallArgs& a) {
  const std::string s = v.ToString();
  const int64_t length = IntArg(a.Get(0, "length"), 255), leeway = IntArg(a.Get(3, "leeway"), 5);
  const std::string end = a.Get(2, "end", Value("...")).ToString();
  if (length < static_cast<int64_t>(Utf8Length(end))) Fail("truncate: expected length >= len(end)");
  const Array chars = Iterate(Value(s));
  if (static_cast<int64_t>(chars.size()) <= length + leeway) return Value(s);
  std::string head;
  for (int64_t i = 0; i < length - static_cast<int64_t>(Utf8Length(end)); ++i) head += chars[static_cast<size_t>(i)].str();
  if (!a.Get(1, "killwords").Truthy()) {
    const size_t sp = head.rfind(' ');
    if (sp != std::string::npos) head.resize(sp);
  }
  return Value(head + end);
}
// striptags: comments and tags removed, whitespace runs joined by one space,
// the five escapes Jinja2 writes turned back into characters.
Value StripTags(Renderer&, const Value& v, CallArgs&) {
  const std::string s = v.ToString();
  std::string text;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 4, "<!--") == 0) {
      const size_t e = s.find("-->", i + 4);
      if (e != std::string::npos) {
        i = e + 3;
        continue;
      }
    }
    if (s[i] == '<') {
      const size_t e = s.find('>', i + 1);
      if (e != std::string::npos) {
        i = e + 1;
        continue;
      }
    }
    text += s[i++];
  }
  const Value words = Split(text, Value(), -1);
  std::string joined;
  for (const Value& w : words.array()) joined += (joined.empty() ? "" : " ") + w.str();
  for (const auto& [from, to] : {std::pair<const char*, const char*>{"&lt;", "<"}, {"&gt;", ">"}, {"&#34;", "\""},
                                {"&quot;", "\""}, {"&#39;", "'"}, {"&amp;", "&"}}) {
    joined = Replace(joined, from, to, -1);
  }
  return Value(joined);
}
// slice(slices, fill_with): the items in `slices` columns, the first
// len % slices one longer (the others padded with fill_with if given).
Value SliceF(Renderer&, const Value& v, CallArgs& a) {
  const Array items = Iterate(v);
  const int64_t slices = IntArg(a.Get(0, "slices"), 1);
  if (slices <= 0 || slices > (1 << 20)) Fail("slice: bad number of slices");
  const Value fill = a.Get(1, "fill_with");
  const size_t n = items.size(), k = static_cast<size_t>(slices), per = n / k, extra = n % k;
  Array out;
  size_t offset = 0;
  for (size_t i = 0; i < k; ++i) {
    const size_t start = offset + i * per;
    if (i < extra) ++offset;
    const size_t end = offset + (i + 1) * per;
    Array part(items.begin() + static_cast<std::ptrdiff_t>(start), items.begin() + static_cast<std::ptrdiff_t>(end));
    if (!fill.is_undefined() && !fill.is_none() && i >= extra) part.push_back(fill);
    out.push_back(Value::MakeArray(std::move(part)));
  }
  return Value::MakeArray(std::move(out));
}
// attr(name): an attribute only, never a dict's item (Jinja2's getattr).
Value Attr(Renderer&, const Value& v, CallArgs& a) {
  const std::string name = a.Get(0, "name").ToString();
  if (v.is_object()) {
    std::optional<Value> m = Method(v, name);
    return m ? *m : Value::Undefined(name);
  }
  return GetAttr(v, name);
}
Value FormatF(Renderer&, const Value& v, CallArgs& a) { return Value(PercentFormat(v.ToString(), a)); }

const std::unordered_map<std::string_view, Filter>& Filters() {
  static const std::unordered_map<std::string_view, Filter> table = {
      {"tojson", ToJson},       {"length", Length},         {"count", Length},          {"trim", Trim},
      {"default", Default},     {"d", Default},             {"string", String},         {"safe", Identity},
      {"escape_once", Identity}, {"upper", UpperF},         {"lower", LowerF},          {"capitalize", Capitalize},
      {"title", Title},         {"replace", ReplaceF},      {"join", Join},             {"list", List},
      {"items", Items},         {"dictsort", DictSort},     {"first", First},           {"last", Last},
      {"min", Min},             {"max", Max},               {"sum", Sum},               {"unique", Unique},
      {"reverse", Reverse},     {"sort", Sort},             {"select", SelectF},        {"reject", RejectF},
      {"selectattr", SelectAttr}, {"rejectattr", RejectAttr}, {"map", Map},             {"indent", IndentF},
      {"int", Int},             {"float", Float},           {"abs", Abs},               {"round", Round},
      {"wordcount", WordCount}, {"batch", Batch},           {"escape", Escape},         {"e", Escape},
      {"forceescape", Escape},  {"center", Center},         {"attr", Attr},             {"format", FormatF},
      {"groupby", GroupBy},     {"truncate", Truncate},     {"striptags", StripTags},   {"slice", SliceF},
      {"wordwrap", WordWrap},
  };
  return table;
}

}  // namespace

bool HasFilter(const std::string& name) { return Filters().count(name) != 0; }

bool ApplyFilter(Renderer& r, const std::string& name, const Value& v, CallArgs& a, Value* out) {
  const auto& table = Filters();
  const auto it = table.find(name);
  if (it == table.end()) return false;
  *out = it->second(r, v, a);
  return true;
}

}  // namespace pc::jinja
