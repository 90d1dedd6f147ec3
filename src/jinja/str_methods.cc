// Python's str methods, found by name in one table; each runs on a copy of
// the string it was looked up on. Thread-safety: pure functions.
#include <algorithm>
#include <cctype>
#include <string_view>
#include <unordered_map>

#include "jinja/builtin_util.h"
#include "jinja/interp.h"

namespace pc::jinja {
namespace {

bool IsSpaceByte(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }


Value StrStrip(const std::string& s, CallArgs& a) { return Value(Strip(s, a.Get(0, "chars"), true, true)); }
Value StrLStrip(const std::string& s, CallArgs& a) { return Value(Strip(s, a.Get(0, "chars"), true, false)); }
Value StrRStrip(const std::string& s, CallArgs& a) { return Value(Strip(s, a.Get(0, "chars"), false, true)); }
Value StrSplit(const std::string& s, CallArgs& a) { return Split(s, a.Get(0, "sep"), IntArg(a.Get(1, "maxsplit"), -1)); }
Value StrStartsWith(const std::string& s, CallArgs& a) { return Value(PrefixMatch(s, a.Get(0, "prefix"), false)); }
Value StrEndsWith(const std::string& s, CallArgs& a) { return Value(PrefixMatch(s, a.Get(0, "prefix"), true)); }
Value StrReplace(const std::string& s, CallArgs& a) {
  return Value(Replace(s, a.Get(0, "old").ToString(), a.Get(1, "new").ToString(), IntArg(a.Get(2, "count"), -1)));
}
Value StrUpper(const std::string& s, CallArgs&) { return Value(Upper(s)); }
Value StrLower(const std::string& s, CallArgs&) { return Value(Lower(s)); }
// title: every word's first letter up; capitalize: the string's first only.
Value Capitalized(const std::string& s, bool title) {
  std::string r = Lower(s);
  bool start = true;
  for (char& c : r) {
    if (start && std::isalpha(static_cast<unsigned char>(c))) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    start = title ? !std::isalpha(static_cast<unsigned char>(c)) : false;
  }
  return Value(r);
}
Value StrTitle(const std::string& s, CallArgs&) { return Capitalized(s, true); }
Value StrCapitalize(const std::string& s, CallArgs&) { return Capitalized(s, false); }
Value StrFormat(const std::string& s, CallArgs& a) { return Value(Format(s, a)); }
Value StrJoin(const std::string& s, CallArgs& a) {
  std::string r;
  bool first = true;
  for (const Value& x : Iterate(a.Get(0, "iterable"))) {
    r += (first ? "" : s) + x.ToString();
    first = false;
  }
  return Value(r);
}
Value StrFind(const std::string& s, CallArgs& a) {
  const size_t p = s.find(a.Get(0, "sub").ToString());
  return Value(p == std::string::npos ? int64_t{-1} : static_cast<int64_t>(p));
}
Value StrCount(const std::string& s, CallArgs& a) {
  const std::string sub = a.Get(0, "sub").ToString();
  int64_t n = 0;
  for (size_t p = 0; !sub.empty() && (p = s.find(sub, p)) != std::string::npos; p += sub.size()) ++n;
  return Value(n);
}
// isdigit / isspace / isalpha: non-empty and every byte of the class.
template <bool (*Is)(unsigned char)>
Value StrIs(const std::string& s, CallArgs&) {
  return Value(!s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return Is(static_cast<unsigned char>(c)); }));
}
bool DigitByte(unsigned char c) { return std::isdigit(c) != 0; }
bool SpaceByte(unsigned char c) { return IsSpaceByte(static_cast<char>(c)); }
bool AlphaByte(unsigned char c) { return std::isalpha(c) != 0; }
Value StrSplitLines(const std::string& s, CallArgs&) {
  Array out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t nl = s.find('\n', pos);
    if (nl == std::string::npos) nl = s.size();
    std::string line = s.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.emplace_back(line);
    pos = nl + 1;
  }
  return Value::MakeArray(std::move(out));
}

// rsplit: from the right, maxsplit splits at most (Python's semantics: on
// whitespace runs when sep is none, the leftmost piece keeps its own).
Value StrRSplit(const std::string& s, CallArgs& a) {
  const Value sep = a.Get(0, "sep");
  const int64_t maxsplit = IntArg(a.Get(1, "maxsplit"), -1);
  if (!sep.is_string()) {
    Array out;
    size_t end = s.size();
    for (int64_t n = 0;; ++n) {
      while (end > 0 && IsSpaceByte(s[end - 1])) --end;
      if (end == 0) break;
      if (maxsplit >= 0 && n == maxsplit) {
        out.insert(out.begin(), Value(s.substr(0, end)));
        break;
      }
      size_t b = end;
      while (b > 0 && !IsSpaceByte(s[b - 1])) --b;
      out.insert(out.begin(), Value(s.substr(b, end - b)));
      end = b;
    }
    return Value::MakeArray(std::move(out));
  }
  const std::string d = sep.str();
  if (d.empty()) Fail("empty separator");
  Array out;
  size_t end = s.size();
  int64_t n = 0;
  for (size_t at; (maxsplit < 0 || n < maxsplit) && end >= d.size() && (at = s.rfind(d, end - d.size())) != std::string::npos; ++n) {
    out.insert(out.begin(), Value(s.substr(at + d.size(), end - at - d.size())));
    end = at;
    if (at == 0) {
      ++n;
      out.insert(out.begin(), Value(std::string()));
      return Value::MakeArray(std::move(out));
    }
  }
  out.insert(out.begin(), Value(s.substr(0, end)));
  return Value::MakeArray(std::move(out));
}
// find / rfind give -1 when absent; index / rindex fail as Python's do.
Value Found(const std::string& s, CallArgs& a, bool right, bool strict) {
  const std::string sub = a.Get(0, "sub").ToString();
  const size_t p = right ? s.rfind(sub) : s.find(sub);
  if (p == std::string::npos && strict) Fail("substring not found");
  return Value(p == std::string::npos ? int64_t{-1} : static_cast<int64_t>(p));
}
Value StrRFind(const std::string& s, CallArgs& a) { return Found(s, a, true, false); }
Value StrIndex(const std::string& s, CallArgs& a) { return Found(s, a, false, true); }
Value StrRIndex(const std::string& s, CallArgs& a) { return Found(s, a, true, true); }
// partition / rpartition: (head, sep, tail) as a list.
Value Partition(const std::string& s, CallArgs& a, bool right) {
  const std::string sep = a.Get(0, "sep").ToString();
  if (sep.empty()) Fail("empty separator");
  const size_t p = right ? s.rfind(sep) : s.find(sep);
  if (p == std::string::npos) {
    return right ? Value::MakeArray({Value(""), Value(""), Value(s)}) : Value::MakeArray({Value(s), Value(""), Value("")});
  }
  return Value::MakeArray({Value(s.substr(0, p)), Value(sep), Value(s.substr(p + sep.size()))});
}
Value StrPartition(const std::string& s, CallArgs& a) { return Partition(s, a, false); }
Value StrRPartition(const std::string& s, CallArgs& a) { return Partition(s, a, true); }
// center / ljust / rjust / zfill: padded to a width in code points.
Value Justify(const std::string& s, CallArgs& a, char how) {
  const int64_t width = IntArg(a.Get(0, "width"), 0);
  const std::string fill = how == 'z' ? "0" : a.Get(1, "fillchar", Value(" ")).ToString();
  const size_t len = Utf8Length(s);
  if (width > (1 << 20)) Fail("width too large");
  if (width <= static_cast<int64_t>(len)) return Value(s);
  const size_t total = static_cast<size_t>(width) - len;
  auto pad = [&](size_t n) {
    std::string r;
    for (size_t i = 0; i < n; ++i) r += fill;
    return r;
  };
  if (how == 'l') return Value(s + pad(total));
  if (how == 'r') return Value(pad(total) + s);
  if (how == 'z') {
    const size_t sign = !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
    return Value(s.substr(0, sign) + pad(total) + s.substr(sign));
  }
  const size_t left = total / 2 + (total & static_cast<size_t>(width) & 1);  // Python's rounding
  return Value(pad(left) + s + pad(total - left));
}
Value StrCenter(const std::string& s, CallArgs& a) { return Justify(s, a, 'c'); }
Value StrLJust(const std::string& s, CallArgs& a) { return Justify(s, a, 'l'); }
Value StrRJust(const std::string& s, CallArgs& a) { return Justify(s, a, 'r'); }
Value StrZFill(const std::string& s, CallArgs& a) { return Justify(s, a, 'z'); }
Value StrSwapCase(const std::string& s, CallArgs&) {
  std::string r = s;
  for (char& c : r) {
    const auto u = static_cast<unsigned char>(c);
    c = static_cast<char>(std::islower(u) ? std::toupper(u) : std::isupper(u) ? std::tolower(u) : u);
  }
  return Value(r);
}
// isupper / islower: some cased letter, none of the other case.
Value CaseIs(const std::string& s, bool upper) {
  bool cased = false;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (upper ? std::islower(u) : std::isupper(u)) return Value(false);
    cased |= std::isalpha(u) != 0;
  }
  return Value(cased);
}
Value StrIsUpper(const std::string& s, CallArgs&) { return CaseIs(s, true); }
Value StrIsLower(const std::string& s, CallArgs&) { return CaseIs(s, false); }
bool AlnumByte(unsigned char c) { return std::isalnum(c) != 0; }

const std::unordered_map<std::string_view, StrMethodFn>& StrMethods() {
  static const std::unordered_map<std::string_view, StrMethodFn> table = {
      {"strip", StrStrip},         {"lstrip", StrLStrip},   {"rstrip", StrRStrip},     {"split", StrSplit},
      {"startswith", StrStartsWith}, {"endswith", StrEndsWith}, {"replace", StrReplace}, {"upper", StrUpper},
      {"lower", StrLower},         {"title", StrTitle},     {"capitalize", StrCapitalize}, {"format", StrFormat},
      {"join", StrJoin},           {"find", StrFind},       {"count", StrCount},       {"isdigit", StrIs<DigitByte>},
      {"isspace", StrIs<SpaceByte>}, {"isalpha", StrIs<AlphaByte>}, {"splitlines", StrSplitLines},
      {"isalnum", StrIs<AlnumByte>}, {"isupper", StrIsUpper},  {"islower", StrIsLower},   {"rsplit", StrRSplit},
      {"rfind", StrRFind},         {"index", StrIndex},     {"rindex", StrRIndex},     {"partition", StrPartition},
      {"rpartition", StrRPartition}, {"center", StrCenter}, {"ljust", StrLJust},       {"rjust", StrRJust},
      {"zfill", StrZFill},         {"swapcase", StrSwapCase},
  };
  return table;
}

}  // namespace

StrMethodFn FindStrMethod(std::string_view name) {
  const auto it = StrMethods().find(name);
  return it == StrMethods().end() ? nullptr : it->second;
}

}  // namespace pc::jinja
