#include "server/tool_args.h"

#include <fmt/format.h>

#include <cctype>

#include "structured/schema_cache.h"

namespace pc {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

std::string ReplaceAll(std::string s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

bool IsKeyByte(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'; }

const json* PropertySchema(const json* params, const std::string& key) {
  if (params == nullptr || !params->is_object() || !params->contains("properties")) return nullptr;
  const json& props = (*params)["properties"];
  return props.is_object() && props.contains(key) ? &props[key] : nullptr;
}

// Whether a parameter takes strings only (its type, or every enum value).
bool IsStringSchema(const json* schema) {
  if (schema == nullptr || !schema->is_object()) return false;
  if (schema->contains("type")) return (*schema)["type"] == "string";
  if (schema->contains("enum") && (*schema)["enum"].is_array() && !(*schema)["enum"].empty()) {
    for (const json& v : (*schema)["enum"]) {
      if (!v.is_string()) return false;
    }
    return true;
  }
  return false;
}

// A value as a template may print it: JSON, Python's repr (single quotes,
// True/False/None) or the template's own quotes around strings with bare
// object keys (Gemma 4's {k:<|"|>v<|"|>}). Each method returns the position
// after what it read, npos when the text ends inside it or it is none of these.
class LooseReader {
 public:
  // whole: the text is the value and nothing else (a bare word may end with it).
  LooseReader(std::string_view t, const ArgSyntax& s, bool whole) : t_(t), s_(s), whole_(whole) {}

  size_t Value(size_t pos, json* out, int depth = 0) const {
    pos = Skip(pos);
    if (pos >= t_.size() || depth > 64) return kNone;
    const char c = t_[pos];
    if (!s_.str_open.empty() && !s_.str_close.empty() && t_.substr(pos).starts_with(s_.str_open)) {
      const size_t e = t_.find(s_.str_close, pos + s_.str_open.size());
      if (e == kNone) return e;
      *out = std::string(t_.substr(pos + s_.str_open.size(), e - pos - s_.str_open.size()));
      return e + s_.str_close.size();
    }
    if (c == '"' || c == '\'') return Quoted(pos, out);
    if (c == '{' || c == '[') return Compound(pos, out, depth);
    return Word(pos, out);
  }

 private:
  static constexpr size_t kNone = std::string_view::npos;
  size_t Skip(size_t pos) const {
    while (pos < t_.size() && IsToolSpace(t_[pos])) ++pos;
    return pos;
  }
  // JSON's string, or Python's in either quote.
  size_t Quoted(size_t pos, json* out) const {
    const char c = t_[pos];
    std::string v;
    for (size_t i = pos + 1; i < t_.size(); ++i) {
      if (t_[i] == '\\' && i + 1 < t_.size()) {
        const char e = t_[++i];
        v += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
        continue;
      }
      if (t_[i] != c) {
        v += t_[i];
        continue;
      }
      if (c == '"') {  // JSON's escapes (\u...) decoded by the parser
        json j = json::parse(t_.substr(pos, i + 1 - pos), nullptr, false);
        if (j.is_string()) v = j.get<std::string>();
      }
      *out = std::move(v);
      return i + 1;
    }
    return kNone;
  }
  // An object (keys quoted or bare) or a list.
  size_t Compound(size_t pos, json* out, int depth) const {
    const bool obj = t_[pos] == '{';
    json v = obj ? json::object() : json::array();
    for (bool first = true;; first = false) {
      pos = Skip(first ? pos + 1 : pos);
      if (pos >= t_.size()) return kNone;
      if (t_[pos] == (obj ? '}' : ']')) break;
      if (!first && t_[pos++] != ',') return kNone;
      json item;
      if (!obj) {
        if ((pos = Value(pos, &item, depth + 1)) == kNone) return kNone;
        v.push_back(std::move(item));
        continue;
      }
      json key;
      pos = Skip(pos);
      if (pos < t_.size() && IsKeyByte(t_[pos]) && t_[pos] != '-') {
        const size_t b = pos;
        while (pos < t_.size() && IsKeyByte(t_[pos])) ++pos;
        key = std::string(t_.substr(b, pos - b));
      } else if ((pos = Value(pos, &key, depth + 1)) == kNone || !key.is_string()) {
        return kNone;
      }
      pos = Skip(pos);
      if (pos >= t_.size() || t_[pos] != ':') return kNone;
      if ((pos = Value(pos + 1, &item, depth + 1)) == kNone) return kNone;
      v[key.get<std::string>()] = std::move(item);
    }
    *out = std::move(v);
    return pos + 1;
  }
  // A number, or true/false/null in JSON's or Python's spelling.
  size_t Word(size_t pos, json* out) const {
    size_t e = pos;
    while (e < t_.size() && (IsKeyByte(t_[e]) || t_[e] == '+')) ++e;
    if (e == pos || (e == t_.size() && !whole_)) return kNone;
    const std::string word(t_.substr(pos, e - pos));
    if (word == "True" || word == "true" || word == "False" || word == "false") {
      *out = word[0] == 'T' || word[0] == 't';
    } else if (word == "None" || word == "null") {
      *out = nullptr;
    } else {
      json n = json::parse(word, nullptr, false);
      if (n.is_discarded() || !n.is_number()) return kNone;
      *out = n;
    }
    return e;
  }

  std::string_view t_;
  const ArgSyntax& s_;
  bool whole_;
};

// A value written raw up to its terminator: the parameter's type decides;
// without one, a value that parses (LooseReader) is that value.
json TypedValue(const std::string& raw, const json* schema, const ArgSyntax& s) {
  if (IsStringSchema(schema)) return raw;
  json v;
  size_t end = LooseReader(raw, s, /*whole=*/true).Value(0, &v);
  while (end != std::string_view::npos && end < raw.size() && IsToolSpace(raw[end])) ++end;
  return end == raw.size() ? v : json(raw);
}

// The schema of one property, with the root's definitions so its $refs resolve.
Result<std::shared_ptr<const structured::CompiledSchema>> PropertyCompiled(const json& params, const json& prop) {
  ojson s = ojson::parse(prop.dump());
  if (s.is_object()) {
    for (const char* defs : {"$defs", "definitions"}) {
      if (params.contains(defs) && !s.contains(defs)) s[defs] = ojson::parse(params[defs].dump());
    }
  }
  return structured::SchemaCache::Global().Get(s);
}

}  // namespace

MatchResult MatchToolLiteral(std::string_view text, size_t* pos, std::string_view lit) {
  size_t p = *pos;
  for (size_t i = 0; i < lit.size(); ++i) {
    const char c = lit[i];
    if (IsToolSpace(c)) {
      while (p < text.size() && IsToolSpace(text[p])) ++p;
      continue;
    }
    if (i == 0 || IsJsonPunct(c) || IsJsonPunct(lit[i - 1])) {
      while (p < text.size() && IsToolSpace(text[p])) ++p;
    }
    if (p >= text.size()) return MatchResult::kShort;
    if (text[p] != c) return MatchResult::kNo;
    ++p;
  }
  *pos = p;
  return MatchResult::kYes;
}

std::string ArgSyntax::Render(const std::string& key, const json& value) const {
  std::string v;
  if (value.is_string()) v = str_open + (json_strings ? value.dump() : value.get<std::string>()) + str_close;
  else v = other_open + value.dump() + other_close;
  return key_before + key + key_after + v + value_after;
}

std::string ArgSyntax::Terminator() const {
  size_t b = 0;
  while (b < value_after.size() && IsToolSpace(value_after[b])) ++b;
  size_t e = b;
  while (e < value_after.size() && !IsToolSpace(value_after[e])) ++e;
  return value_after.substr(b, e - b);
}

json ArgSyntax::Describe() const {
  return {{"key_before", key_before}, {"key_after", key_after}, {"value_after", value_after}, {"sep", sep},
          {"str_open", str_open},     {"str_close", str_close}, {"other_open", other_open},
          {"other_close", other_close}, {"json_strings", json_strings}, {"compound_json", compound_json}};
}

Result<ArgProbe> DeriveArgSyntax(const std::function<Result<std::string>(const json&)>& region) {
  const std::string ka(kArgProbeKeys[0]), kb(kArgProbeKeys[1]), va(kArgProbeValues[0]), vb(kArgProbeValues[1]);
  Result<std::string> r1 = region({{ka, va}}), r2 = region({{ka, va}, {kb, vb}}), r3 = region({{ka, 7}});
  if (!r1.ok() || !r2.ok() || !r3.ok()) return Status::Error("the template does not render calls with arguments");
  const std::string &one = *r1, &two = *r2, &num = *r3;
  // What the second argument added, starting where a marker does.
  size_t p = CommonToolPrefix(one, two);
  while (p > 0 && std::string_view("<[{|").find(two[p - 1]) != std::string_view::npos) --p;
  const size_t s = std::min({CommonToolSuffix(one, two), one.size() - p, two.size() - p});
  const std::string added = two.substr(p, two.size() - s - p);
  if (added.find(kb) == std::string::npos || added.find(vb) == std::string::npos) {
    return Status::Error("the template's arguments are neither one JSON object nor one element each");
  }
  // added is sep + argument or argument + sep: the argument is the part
  // that, written for the first argument, appears in the one-argument render.
  const std::string x = ReplaceAll(ReplaceAll(added, kb, ka), vb, va);
  std::string arg, sep;
  size_t at = std::string::npos;
  for (size_t i = 0; i <= x.size() && at == std::string::npos; ++i) {
    const std::string a = x.substr(i);
    if (a.find(ka) != std::string::npos && a.find(va) != std::string::npos) at = one.find(a), arg = a, sep = x.substr(0, i);
  }
  for (size_t j = x.size(); j > 0 && at == std::string::npos; --j) {
    const std::string a = x.substr(0, j);
    if (a.find(ka) != std::string::npos && a.find(va) != std::string::npos) at = one.find(a), arg = a, sep = x.substr(j);
  }
  const size_t kpos = arg.find(ka), vpos = kpos == std::string::npos ? kpos : arg.find(va, kpos + ka.size());
  if (at == std::string::npos || vpos == std::string::npos) return Status::Error("the template's arguments repeat no unit");
  ArgProbe out;
  ArgSyntax& syn = out.syntax;
  syn.key_before = arg.substr(0, kpos);
  syn.sep = sep;
  const std::string mid_str = arg.substr(kpos + ka.size(), vpos - kpos - ka.size()), after_str = arg.substr(vpos + va.size());
  // The integer render around the same block: how a value that is not a
  // string is written, hence the string's quotes.
  const std::string before = one.substr(0, at), after = one.substr(at + arg.size());
  if (num.size() < before.size() + after.size() || num.compare(0, before.size(), before) != 0 ||
      num.compare(num.size() - after.size(), after.size(), after) != 0) {
    return Status::Error("the template writes a number argument unlike a string one");
  }
  const std::string m = num.substr(before.size(), num.size() - before.size() - after.size());
  const size_t seven = m.find('7', syn.key_before.size() + ka.size());
  if (m.compare(0, syn.key_before.size() + ka.size(), syn.key_before + ka) != 0 || seven == std::string::npos) {
    return Status::Error("the template writes a number argument unlike a string one");
  }
  // What the two renders share around the value is the argument's frame;
  // the rest wraps a string (str_open, str_close) or the number (other_*).
  const std::string mid_num = m.substr(syn.key_before.size() + ka.size(), seven - syn.key_before.size() - ka.size()),
                    after_num = m.substr(seven + 1);
  syn.key_after = mid_num.substr(0, CommonToolPrefix(mid_str, mid_num));
  syn.value_after = after_num.substr(after_num.size() - CommonToolSuffix(after_str, after_num));
  syn.str_open = mid_str.substr(syn.key_after.size());
  syn.str_close = after_str.substr(0, after_str.size() - syn.value_after.size());
  syn.other_open = mid_num.substr(syn.key_after.size());
  syn.other_close = after_num.substr(0, after_num.size() - syn.value_after.size());
  if ((!syn.other_open.empty() && syn.str_open.starts_with(syn.other_open)) ||
      (!syn.str_open.empty() && syn.other_open.starts_with(syn.str_open))) {
    return Status::Error("the template writes strings and numbers apart by more than quotes");
  }
  if (!syn.str_open.empty() && syn.str_open.back() == '"' && !syn.str_close.empty() && syn.str_close.front() == '"') {
    syn.json_strings = true;  // tojson: the quotes and escapes are JSON's
    syn.str_open.pop_back();
    syn.str_close.erase(0, 1);
  }
  if (syn.str_open.empty() && syn.str_close.empty() && syn.Terminator().empty() && !syn.json_strings) {
    return Status::Error("the template writes string arguments with nothing to end them");
  }
  Result<std::string> list = region({{ka, json::array({va})}});
  syn.compound_json = list.ok() && list->find("\"" + va + "\"") != std::string::npos;
  out.region = one;
  out.block_begin = at;
  out.block_end = at + arg.size();
  return out;
}

size_t ParseArgBlock(const ArgSyntax& s, std::string_view text, size_t pos, const json* params, std::string* args_json,
                     bool* short_text) {
  *short_text = false;
  std::string out = "{";
  const std::string term = s.Terminator();
  auto cut = [&] {
    *short_text = true;
    *args_json = out;
    return std::string_view::npos;
  };
  for (bool first = true;; first = false) {
    size_t q = pos;
    MatchResult mr = first ? MatchResult::kYes : MatchToolLiteral(text, &q, s.sep);
    if (mr == MatchResult::kYes) mr = MatchToolLiteral(text, &q, s.key_before);
    if (mr == MatchResult::kShort) return cut();
    if (mr == MatchResult::kNo) break;
    size_t k = q;
    while (k < text.size() && IsKeyByte(text[k])) ++k;
    if (k == text.size()) return cut();
    if (k == q) break;
    const std::string key(text.substr(q, k - q));
    q = k;
    mr = MatchToolLiteral(text, &q, s.key_after);
    if (mr != MatchResult::kYes) return mr == MatchResult::kShort ? cut() : std::string_view::npos;
    const json* schema = PropertySchema(params, key);
    json value;
    const bool quoted = !s.str_open.empty() && text.substr(q).starts_with(s.str_open);
    if (s.json_strings && text.substr(q).starts_with(s.str_open + "\"")) {
      const size_t b = q + s.str_open.size();
      size_t end = b + 1;
      for (bool esc = false; end < text.size() && (esc || text[end] != '"'); ++end) esc = !esc && text[end] == '\\';
      if (end >= text.size()) return cut();
      value = json::parse(text.substr(b, end + 1 - b), nullptr, false);
      if (value.is_discarded()) return std::string_view::npos;
      q = end + 1;
      if (MatchToolLiteral(text, &q, s.str_close) != MatchResult::kYes) return std::string_view::npos;
    } else if (quoted) {  // up to its close, else (GigaChat's) to what ends any value
      const size_t b = q + s.str_open.size();
      const std::string end_lit = s.str_close.empty() ? term : s.str_close;
      const size_t e = end_lit.empty() ? std::string_view::npos : text.find(end_lit, b);
      if (e == std::string_view::npos) return cut();
      value = std::string(text.substr(b, e - b));
      q = e + s.str_close.size();
    } else if (!s.other_open.empty() && text.substr(q).starts_with(s.other_open)) {
      // A value the template marks as not a string: JSON (or Python's repr)
      // up to what ends it.
      const size_t b = q + s.other_open.size();
      const std::string end_lit = s.other_close.empty() ? term : s.other_close;
      const size_t e = end_lit.empty() ? std::string_view::npos : text.find(end_lit, b);
      if (e == std::string_view::npos) return cut();
      value = TypedValue(std::string(text.substr(b, e - b)), nullptr, s);
      q = e + s.other_close.size();
    } else if (!term.empty()) {
      const size_t e = text.find(term, q);
      if (e == std::string_view::npos) return cut();
      std::string raw(text.substr(q, e - q));
      // The line breaks the template puts around a value are not the value's.
      for (size_t i = 0; i < s.value_after.size() && IsToolSpace(s.value_after[i]) && !raw.empty() && IsToolSpace(raw.back()); ++i)
        raw.pop_back();
      value = TypedValue(raw, schema, s);
      q = e;
    } else {
      const size_t e = LooseReader(text, s, /*whole=*/false).Value(q, &value);
      if (e == std::string_view::npos) return cut();
      q = e;
    }
    mr = MatchToolLiteral(text, &q, s.value_after);
    if (mr != MatchResult::kYes) return mr == MatchResult::kShort ? cut() : std::string_view::npos;
    out += fmt::format("{}{}: {}", first ? "" : ", ", json(key).dump(), value.dump());
    pos = q;
  }
  *args_json = out + "}";
  return pos;
}

Status AddArgBlock(const ArgSyntax& s, structured::SeqGrammar* g, int32_t from, int32_t to, const json& params) {
  const json props = params.contains("properties") && params["properties"].is_object() ? params["properties"] : json::object();
  std::vector<std::pair<std::string, json>> list;
  for (const auto& it : props.items()) list.emplace_back(it.key(), it.value());
  std::vector<bool> required(list.size(), false);
  if (params.contains("required") && params["required"].is_array()) {
    for (size_t j = 0; j < list.size(); ++j) {
      for (const json& r : params["required"]) required[j] = required[j] || r == list[j].first;
    }
  }
  const size_t n = list.size();
  const std::string term = s.str_close.empty() ? s.Terminator() : s.str_close;
  std::vector<int32_t> some(n + 1);  // some[i]: i properties considered, one or more written
  for (size_t i = 1; i <= n; ++i) some[i] = g->AddState();
  // One property written from x to some[j + 1].
  auto write = [&](int32_t x, size_t j, bool with_sep) -> Status {
    const auto& [key, schema] = list[j];
    const std::string lit = (with_sep ? s.sep : "") + s.key_before + key + s.key_after;
    const bool str = IsStringSchema(&schema), raw = str && !s.json_strings;
    if (raw && term.empty()) return Errorf("string argument '{}' has nothing to end it in this template's syntax", key);
    auto compiled = PropertyCompiled(params, schema);
    if (!compiled.ok()) return Errorf("argument '{}': {}", key, compiled.status().message());
    const int32_t open = g->AddState(), value = g->AddState();
    g->Literal(x, open, lit + (str ? s.str_open : s.other_open));
    // A raw string keeps its schema (enum, length, pattern) without quotes.
    if (raw) g->RawString(open, value, *compiled, term);
    else g->Json(open, value, *compiled);
    g->Literal(value, some[j + 1], (str ? s.str_close : s.other_close) + s.value_after);
    return OkStatus();
  };
  // From x (with `written` properties before), every next property reachable
  // by skipping optional ones; the block's end when all that follow are.
  auto from_state = [&](int32_t x, size_t i, bool written) -> Status {
    size_t j = i;
    for (; j < n; ++j) {
      PC_RETURN_IF_ERROR(write(x, j, written));
      if (required[j]) break;
    }
    if (j == n) g->Literal(x, to, "");
    return OkStatus();
  };
  PC_RETURN_IF_ERROR(from_state(from, 0, false));
  for (size_t i = 1; i <= n; ++i) PC_RETURN_IF_ERROR(from_state(some[i], i, true));
  return OkStatus();
}

}  // namespace pc
