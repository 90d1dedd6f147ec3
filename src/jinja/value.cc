#include "jinja/value.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace pc::jinja {

const Value* Object::Find(std::string_view key) const {
  auto it = index_.find(std::string(key));
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

Value* Object::Find(std::string_view key) {
  auto it = index_.find(std::string(key));
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

void Object::Set(const std::string& key, Value v) {
  if (Value* old = Find(key)) {
    *old = std::move(v);
    return;
  }
  index_[key] = items_.size();
  items_.emplace_back(key, std::move(v));
  key_values_.emplace_back();
}

void Object::SetKey(const Value& key, Value v) {
  const std::string text = key.ToString();
  const bool fresh = Find(text) == nullptr;
  Set(text, std::move(v));
  if (fresh && !key.is_string()) key_values_.back() = std::make_shared<Value>(key);
}

Value Object::KeyAt(size_t i) const { return key_values_[i] ? *key_values_[i] : Value(items_[i].first); }

Value Value::Undefined(std::string name) {
  Value v;
  v.s_ = std::move(name);
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value::Value(bool b) : kind_(Kind::kBool), b_(b) {}
Value::Value(int64_t i) : kind_(Kind::kInt), i_(i) {}
Value::Value(double d) : kind_(Kind::kFloat), f_(d) {}
Value::Value(std::string s) : kind_(Kind::kString), s_(std::move(s)) {}

Value Value::MakeArray(Array items) {
  Value v;
  v.kind_ = Kind::kArray;
  v.arr_ = std::make_shared<Array>(std::move(items));
  return v;
}

Value Value::MakeTuple(Array items) {
  Value v = MakeArray(std::move(items));
  v.b_ = true;
  return v;
}

Value Value::MakeObject() {
  Value v;
  v.kind_ = Kind::kObject;
  v.obj_ = std::make_shared<Object>();
  return v;
}

Value Value::MakeFunction(std::string name, Function fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.s_ = std::move(name);
  v.fn_ = std::make_shared<Function>(std::move(fn));
  return v;
}

namespace {
template <typename Json>
Value ValueFromJson(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return Value::None();
    case Json::value_t::boolean: return Value(j.template get<bool>());
    case Json::value_t::number_integer: return Value(j.template get<int64_t>());
    case Json::value_t::number_unsigned: return Value(static_cast<int64_t>(j.template get<uint64_t>()));
    case Json::value_t::number_float: return Value(j.template get<double>());
    case Json::value_t::string: return Value(j.template get<std::string>());
    case Json::value_t::array: {
      Array a;
      for (const auto& e : j) a.push_back(ValueFromJson(e));
      return Value::MakeArray(std::move(a));
    }
    case Json::value_t::object: {
      Value o = Value::MakeObject();
      for (const auto& [k, e] : j.items()) o.object().Set(k, ValueFromJson(e));
      return o;
    }
    default: return Value::Undefined();
  }
}
}  // namespace

Value Value::FromJson(const nlohmann::json& j) { return ValueFromJson(j); }
Value Value::FromJson(const nlohmann::ordered_json& j) { return ValueFromJson(j); }

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return f_ != 0;
    case Kind::kString: return !s_.empty();
    case Kind::kArray: return !arr_->empty();
    case Kind::kObject: return obj_->size() > 0;
    case Kind::kFunction: return true;
  }
  return false;
}

std::string FormatFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // The shortest representation that reads back the same, fixed notation
  // from 1e-4 to 1e16 and exponents of two digits or more: fmt's default is
  // Python's repr but for the ".0" Python gives a whole number.
  std::string s = fmt::format("{}", d);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

size_t Utf8Length(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

namespace {

std::string PyQuote(const std::string& s) {
  // Python prefers single quotes, double when the text has a single quote and no double.
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c == q) {
          out += '\\';
          out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7f) {
          out += fmt::format("\\x{:02x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += q;
  return out;
}

// s as a JSON string; with ascii, every code point past ASCII as \\uXXXX
// (a surrogate pair past U+FFFF), as json.dumps(ensure_ascii=True).
void JsonString(std::string& out, const std::string& s, bool ascii) {
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else if (ascii && c >= 0x80) {
          const int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
          char32_t cp = len == 1 ? c : c & (0x7F >> len);
          for (int k = 1; k < len && i + 1 < s.size(); ++k) cp = cp << 6 | (static_cast<unsigned char>(s[++i]) & 0x3F);
          if (cp >= 0x10000) {
            cp -= 0x10000;
            out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
          } else {
            out += fmt::format("\\u{:04x}", static_cast<uint32_t>(cp));
          }
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void ToJsonImpl(const Value& v, const JsonStyle& st, int depth, std::string& out) {
  const int indent = st.indent;
  const std::string nl = indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent * (depth + 1)), ' ') : "";
  const std::string nl_end = indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent * depth), ' ') : "";
  // json.dumps' separators: (', ', ': '), or ',' between items when indented.
  const std::string item_sep = st.item_sep ? *st.item_sep : indent >= 0 ? "," : ", ";
  const std::string key_sep = st.key_sep ? *st.key_sep : ": ";
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += v.b() ? "true" : "false"; return;
    case Value::Kind::kInt: out += std::to_string(v.i()); return;
    case Value::Kind::kFloat:
      out += std::isfinite(v.f()) ? FormatFloat(v.f()) : (std::isnan(v.f()) ? "NaN" : (v.f() > 0 ? "Infinity" : "-Infinity"));
      return;
    case Value::Kind::kString: JsonString(out, v.str(), st.ensure_ascii); return;
    case Value::Kind::kFunction: JsonString(out, "<function " + v.name() + ">", st.ensure_ascii); return;
    case Value::Kind::kArray: {
      if (v.array().empty()) {
        out += "[]";
        return;
      }
      out += "[";
      for (size_t i = 0; i < v.array().size(); ++i) {
        if (i) out += item_sep;
        out += nl;
        ToJsonImpl(v.array()[i], st, depth + 1, out);
      }
      out += nl_end + "]";
      return;
    }
    case Value::Kind::kObject: {
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.object().items()) items.push_back(&kv);
      if (items.empty()) {
        out += "{}";
        return;
      }
      if (st.sort_keys) std::sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out += "{";
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        out += nl;
        JsonString(out, items[i]->first, st.ensure_ascii);
        out += key_sep;
        ToJsonImpl(items[i]->second, st, depth + 1, out);
      }
      out += nl_end + "}";
      return;
    }
  }
}

}  // namespace

std::string Value::Repr() const {
  switch (kind_) {
    case Kind::kString: return PyQuote(s_);
    case Kind::kUndefined: return "";
    case Kind::kArray: {
      std::string out = b_ ? "(" : "[";
      for (size_t i = 0; i < arr_->size(); ++i) out += (i ? ", " : "") + (*arr_)[i].Repr();
      if (b_ && arr_->size() == 1) out += ",";
      return out + (b_ ? ")" : "]");
    }
    case Kind::kObject: {
      std::string out = "{";
      for (size_t i = 0; i < obj_->size(); ++i) {
        out += (i ? ", " : "") + obj_->KeyAt(i).Repr() + ": " + obj_->items()[i].second.Repr();
      }
      return out + "}";
    }
    default: return ToString();
  }
}

std::string Value::ToString() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return b_ ? "True" : "False";
    case Kind::kInt: return std::to_string(i_);
    case Kind::kFloat: return FormatFloat(f_);
    case Kind::kString: return s_;
    case Kind::kFunction: return "<function " + s_ + ">";
    default: return Repr();
  }
}

std::string Value::ToJson(int indent, bool sort_keys) const {
  JsonStyle st;
  st.indent = indent;
  st.sort_keys = sort_keys;
  return ToJson(st);
}

std::string Value::ToJson(const JsonStyle& style) const {
  std::string out;
  ToJsonImpl(*this, style, 0, out);
  return out;
}

bool Value::Equals(const Value& o) const {
  if ((is_number() || is_bool()) && (o.is_number() || o.is_bool())) {
    if (is_int() && o.is_int()) return i_ == o.i_;
    return number() == o.number();
  }
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return s_ == o.s_;
    case Kind::kArray: {
      if (arr_->size() != o.arr_->size() || b_ != o.b_) return false;
      for (size_t i = 0; i < arr_->size(); ++i) {
        if (!(*arr_)[i].Equals((*o.arr_)[i])) return false;
      }
      return true;
    }
    case Kind::kObject: {
      if (obj_->size() != o.obj_->size()) return false;
      for (const auto& [k, v] : obj_->items()) {
        const Value* w = o.obj_->Find(k);
        if (w == nullptr || !v.Equals(*w)) return false;
      }
      return true;
    }
    case Kind::kFunction: return fn_ == o.fn_;
    default: return false;
  }
}

bool Value::SameAs(const Value& o) const {
  if (kind_ != o.kind_) return false;
  if (is_array()) return arr_ == o.arr_;
  if (is_object()) return obj_ == o.obj_;
  return Equals(o);
}

std::optional<size_t> Value::Length() const {
  if (is_string()) return Utf8Length(s_);
  if (is_array()) return arr_->size();
  if (is_object()) return obj_->size();
  return std::nullopt;
}

Value CallArgs::Get(size_t i, const char* name, Value def) const {
  if (i < args.size()) return args[i];
  for (const auto& [k, v] : kwargs) {
    if (k == name) return v;
  }
  return def;
}

}  // namespace pc::jinja
