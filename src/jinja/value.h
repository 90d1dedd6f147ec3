// Values of the Jinja interpreter, with Python's semantics where templates
// rely on them: lists and dicts are shared references (a namespace is a dict
// whose attributes may be assigned), strings are values, None and Undefined
// are distinct (Undefined renders as nothing, None as "None"), truthiness,
// equality and str() are Python's.
// Thread-safety: a Value tree may be read from several threads; the
// interpreter mutates only values it created during one render.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace pc::jinja {

class Value;
using Array = std::vector<Value>;

// An insertion-ordered dict with string keys (Python dicts keep insertion order).
class Object {
 public:
  const Value* Find(std::string_view key) const;
  Value* Find(std::string_view key);
  void Set(const std::string& key, Value v);
  // A key that is not a string (Python dicts allow numbers): stored under its
  // text, iterated as itself.
  void SetKey(const Value& key, Value v);
  const std::vector<std::pair<std::string, Value>>& items() const { return items_; }
  // The i-th key as the template wrote it (a string, or a number).
  Value KeyAt(size_t i) const;
  size_t size() const;  // defined below, once Value is complete
  bool is_namespace = false;  // created by namespace(): attributes may be set

 private:
  std::vector<std::pair<std::string, Value>> items_;
  std::vector<std::shared_ptr<Value>> key_values_;  // null: the string key itself
  std::unordered_map<std::string, size_t> index_;
};

// json.dumps' options: indent (< 0: one line), sort_keys, ensure_ascii
// (non-ASCII as \uXXXX) and separators (unset: json.dumps' defaults).
struct JsonStyle {
  int indent = -1;
  bool sort_keys = false;
  bool ensure_ascii = false;
  std::optional<std::string> item_sep, key_sep;
};

struct CallArgs;
// A function value: a macro, a builtin, or a bound method.
using Function = std::function<Value(CallArgs&)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kFunction };

  Value() = default;  // undefined
  static Value Undefined(std::string name = "");
  static Value None();
  Value(bool b);
  Value(int64_t i);
  Value(int i) : Value(static_cast<int64_t>(i)) {}
  Value(size_t i) : Value(static_cast<int64_t>(i)) {}
  Value(double d);
  Value(std::string s);
  Value(const char* s) : Value(std::string(s)) {}
  static Value MakeArray(Array items = {});
  // A tuple: an array that prints as Python's tuple, `(1, 2)` or `(1,)`
  // (tuple literals, dict items, str.partition), and is not equal to a list.
  static Value MakeTuple(Array items);
  static Value MakeObject();
  static Value MakeFunction(std::string name, Function fn);
  static Value FromJson(const nlohmann::json& j);
  static Value FromJson(const nlohmann::ordered_json& j);  // keys in the text's order

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_tuple() const { return kind_ == Kind::kArray && b_; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_function() const { return kind_ == Kind::kFunction; }

  bool b() const { return b_; }
  int64_t i() const { return i_; }
  double f() const { return f_; }
  double number() const { return kind_ == Kind::kInt ? static_cast<double>(i_) : (kind_ == Kind::kBool ? b_ : f_); }
  const std::string& str() const { return s_; }
  // The undefined name (for error messages), or the function's name.
  const std::string& name() const { return s_; }
  Array& array() const { return *arr_; }
  Object& object() const { return *obj_; }
  const Function& function() const { return *fn_; }

  bool Truthy() const;
  // Python's str(): None -> "None", True -> "True", lists and dicts as repr.
  std::string ToString() const;
  // Python's repr() (strings quoted).
  std::string Repr() const;
  // json.dumps(ensure_ascii=False) with the given indent (< 0: one line,
  // ", " and ": " separators) and key sorting.
  std::string ToJson(int indent = -1, bool sort_keys = false) const;
  std::string ToJson(const struct JsonStyle& style) const;
  // Python ==.
  bool Equals(const Value& o) const;
  // Same object (lists, dicts) or equal scalars: the `sameas` test.
  bool SameAs(const Value& o) const;
  // len() where defined: strings (code points), lists, dicts.
  std::optional<size_t> Length() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;  // kBool's value; for kArray: a tuple
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<Array> arr_;
  std::shared_ptr<Object> obj_;
  std::shared_ptr<Function> fn_;
};

inline size_t Object::size() const { return items_.size(); }

// Positional and keyword arguments of a call.
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
  // The i-th positional argument, else the keyword `name`, else def.
  Value Get(size_t i, const char* name, Value def = Value()) const;
};

// Python's float formatting (repr): 1.0, 0.1, 1e-05, inf.
std::string FormatFloat(double d);
// Number of UTF-8 code points.
size_t Utf8Length(std::string_view s);

}  // namespace pc::jinja
