// Python's str methods, found by name in one table; each runs on a copy of
// the string it was looked up on. Thread-safety: pure functions.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string_view>
#include <unordered_map>

#include "jinja/builtin_util.h"
#include "jinja/interp.h"

namespace pc::jinja {
namespace {

bool IsSpaceByte(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Case mapping of one code point for the scripts chat templates and their
// messages use most (ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic), as
// Python's str.upper/lower map them; other code points stay as they are.
// 0 from Upper: two letters (U+00DF becomes "SS").
char32_t UpperCp(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z' ? c - 32 : c;
  if (c == 0xDF) return 0;
  if (c == 0xB5) return 0x39C;
  if (c == 0xFF) return 0x178;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 0x20;
  if (c == 0x131) return 'I';
  if (c == 0x17F) return 'S';
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return c & ~char32_t{1};
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c & 1) == 0 ? c - 1 : c;
  if (c == 0x3C2) return 0x3A3;
  if (c >= 0x3B1 && c <= 0x3CB) return c - 0x20;
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 0x25;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 0x3F;
  if (c >= 0x430 && c <= 0x44F) return c - 0x20;
  if (c >= 0x450 && c <= 0x45F) return c - 0x50;
  if ((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF)) return c & ~char32_t{1};
  return c;
}
char32_t LowerCp(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 0x20;
  if (c == 0x178) return 0xFF;
  if ((c >= 0x100 && c <= 0x137 && c != 0x130) || (c >= 0x14A && c <= 0x177)) return c | 1;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c & 1) == 1 ? c + 1 : c;
  if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 0x20;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 0x25;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 0x3F;
  if (c >= 0x410 && c <= 0x42F) return c + 0x20;
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  if ((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF)) return c | 1;
  return c;
}

// s with each well-formed 2-byte UTF-8 sequence (U+0080..U+07FF, where the
// mapped scripts live) and each ASCII byte mapped; other bytes copied.
std::string MapCase(const std::string& s, bool upper) {
  std::string out;
  out.reserve(s.size());
  auto put = [&](char32_t c) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  };
  for (size_t i = 0; i < s.size(); ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    char32_t c = b;
    bool two = false;
    if (b >= 0xC2 && b <= 0xDF && i + 1 < s.size() && (static_cast<unsigned char>(s[i + 1]) & 0xC0) == 0x80) {
      c = (char32_t{b} & 0x1F) << 6 | (static_cast<unsigned char>(s[i + 1]) & 0x3F);
      two = true;
    } else if (b >= 0x80) {
      out += s[i];
      continue;
    }
    const char32_t m = upper ? UpperCp(c) : LowerCp(c);
    if (m == 0) {
      out += "SS";
    } else {
      put(m);
    }
    i += two ? 1 : 0;
  }
  return out;
}

}  // namespace

namespace {

// The parts of a format spec (FormatSpec).
struct Spec {
  char fill = ' ', align = 0, sign = '-', type = 0, group = 0;
  bool alt = false, zero = false;
  int width = 0, precision = -1;
};

Spec ParseSpec(const std::string& spec) {
  Spec p;
  size_t i = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '=' || c == '^'; };
  if (spec.size() >= 2 && is_align(spec[1])) {
    p.fill = spec[0], p.align = spec[1], i = 2;
  } else if (!spec.empty() && is_align(spec[0])) {
    p.align = spec[0], i = 1;
  }
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) p.sign = spec[i++];
  if (i < spec.size() && spec[i] == '#') p.alt = true, ++i;
  if (i < spec.size() && spec[i] == '0') {
    if (p.align == 0) p.fill = '0', p.zero = true;  // '=' for numbers, '<' for strings
    ++i;
  }
  while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i])) && p.width < 100000) {
    p.width = p.width * 10 + (spec[i++] - '0');
  }
  if (i < spec.size() && (spec[i] == ',' || spec[i] == '_')) p.group = spec[i++];
  if (i < spec.size() && spec[i] == '.') {
    p.precision = 0;
    for (++i; i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i])) && p.precision < 1000; ++i) {
      p.precision = p.precision * 10 + (spec[i] - '0');
    }
  }
  if (i < spec.size()) p.type = spec[i++];
  if (i != spec.size()) Fail("Invalid format specifier '" + spec + "'");
  return p;
}

// Digits of an integer part with a separator every three.
std::string Group(const std::string& digits, char sep) {
  if (sep == 0) return digits;
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += sep;
    out += digits[i];
  }
  return out;
}

// A number's text without its sign: body; negative says whether it had one.
std::string NumberBody(const Value& v, const Spec& p, bool* negative) {
  const bool as_int = v.is_int() || v.is_bool();
  const char t = p.type;
  if (as_int && (t == 0 || t == 'd' || t == 'n' || t == 'x' || t == 'X' || t == 'o' || t == 'b' || t == 'c')) {
    const int64_t n = v.is_int() ? v.i() : v.b();
    *negative = n < 0;
    uint64_t m = n < 0 ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
    if (t == 'c') {
      if (n < 0 || m > 0x7F) Fail("%c arg not in range(128)");
      return std::string(1, static_cast<char>(m));
    }
    const int base = t == 'x' || t == 'X' ? 16 : t == 'o' ? 8 : t == 'b' ? 2 : 10;
    std::string d;
    do {
      d.insert(d.begin(), "0123456789abcdef"[m % static_cast<uint64_t>(base)]);
      m /= static_cast<uint64_t>(base);
    } while (m != 0);
    if (t == 'X') d = Upper(d);
    const std::string prefix = !p.alt || base == 10 ? "" : base == 16 ? (t == 'X' ? "0X" : "0x") : base == 8 ? "0o" : "0b";
    return prefix + Group(d, p.group);
  }
  double x = v.number();
  *negative = std::signbit(x);
  x = std::fabs(x);
  if (t == 0 && p.precision < 0) return FormatFloat(x);
  const int prec = p.precision < 0 ? 6 : p.precision;
  char buf[512];
  std::string body;
  if (t == '%') {
    std::snprintf(buf, sizeof buf, "%.*f", prec, x * 100);
    body = std::string(buf) + "%";
  } else if (t == 'f' || t == 'F' || t == 'e' || t == 'E' || t == 'g' || t == 'G') {
    const char f[] = {'%', '.', '*', t == 'F' ? 'f' : t, 0};
    std::snprintf(buf, sizeof buf, f, prec, x);
    body = buf;
  } else if (t == 0 || t == 'n') {  // like g, a float keeping a point
    std::snprintf(buf, sizeof buf, "%.*g", std::max(prec, 1), x);
    body = buf;
    if (t == 0 && body.find_first_of(".e") == std::string::npos) body += ".0";
  } else {
    Fail(std::string("Unknown format code '") + t + "' for a number");
  }
  if (p.group != 0) {
    const size_t e = body.find_first_not_of("0123456789");
    body = Group(body.substr(0, e), p.group) + (e == std::string::npos ? "" : body.substr(e));
  }
  return body;
}

}  // namespace

std::string FormatSpec(const Value& v, const std::string& spec) {
  const Spec p = ParseSpec(spec);
  std::string sign, body;
  char align = p.align;
  if (v.is_number() || v.is_bool()) {  // a bool with a spec formats as its int
    if (!v.is_float() && p.precision >= 0 && (p.type == 0 || p.type == 'd' || p.type == 'x' || p.type == 'X' ||
                                             p.type == 'o' || p.type == 'b' || p.type == 'c' || p.type == 'n')) {
      Fail("Precision not allowed in integer format specifier");
    }
    if (p.type == 's') Fail("Unknown format code 's' for a number");
    bool negative = false;
    body = NumberBody(v, p, &negative);
    sign = negative ? "-" : p.sign == '+' ? "+" : p.sign == ' ' ? " " : "";
    if (align == 0) align = p.zero ? '=' : '>';
  } else {
    if (p.type != 0 && p.type != 's') Fail(std::string("Unknown format code '") + p.type + "' for a string");
    if (p.group != 0 || p.sign != '-' || align == '=') Fail("Invalid format specifier for a string");
    body = v.ToString();
    if (p.precision >= 0) {
      const Array chars = Iterate(Value(body));
      body.clear();
      for (size_t i = 0; i < chars.size() && i < static_cast<size_t>(p.precision); ++i) body += chars[i].str();
    }
    if (align == 0) align = '<';
  }
  const size_t len = Utf8Length(sign + body), width = static_cast<size_t>(p.width);
  if (len >= width) return sign + body;
  const std::string pad_all(width - len, p.fill);
  switch (align) {
    case '<': return sign + body + pad_all;
    case '^': {
      const size_t left = (width - len) / 2;
      return std::string(left, p.fill) + sign + body + std::string(width - len - left, p.fill);
    }
    case '=': return sign + pad_all + body;
    default: return pad_all + sign + body;
  }
}

std::string Lower(std::string s) { return MapCase(s, false); }
std::string Upper(std::string s) { return MapCase(s, true); }

namespace {


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
// partition / rpartition: (head, sep, tail) a tuple.
Value Partition(const std::string& s, CallArgs& a, bool right) {
  const std::string sep = a.Get(0, "sep").ToString();
  if (sep.empty()) Fail("empty separator");
  const size_t p = right ? s.rfind(sep) : s.find(sep);
  if (p == std::string::npos) {
    return right ? Value::MakeTuple({Value(""), Value(""), Value(s)}) : Value::MakeTuple({Value(s), Value(""), Value("")});
  }
  return Value::MakeTuple({Value(s.substr(0, p)), Value(sep), Value(s.substr(p + sep.size()))});
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
