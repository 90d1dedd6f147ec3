#include "structured/schema_merge.h"

#include <algorithm>

namespace pc::structured {
namespace {

std::vector<std::string> Types(const Json& t) {
  std::vector<std::string> out;
  if (t.is_string()) out.push_back(t.get<std::string>());
  if (t.is_array())
    for (const Json& x : t)
      if (x.is_string()) out.push_back(x.get<std::string>());
  return out;
}

Json IntersectTypes(const Json& a, const Json& b) {
  std::vector<std::string> ta = Types(a), tb = Types(b);
  Json out = Json::array();
  auto has = [](const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); };
  for (const std::string& t : ta) {
    if (has(tb, t)) out.push_back(t);
    else if (t == "integer" && has(tb, "number")) out.push_back("integer");
    else if (t == "number" && has(tb, "integer")) out.push_back("integer");
  }
  return out;
}

bool IsTrue(const Json& s) { return (s.is_boolean() && s.get<bool>()) || (s.is_object() && s.empty()); }

// Applies the other side's additionalProperties to this side's extra keys.
Result<Json> RestrictExtras(Json props, const Json& other_props, const Json& other_additional) {
  Json out = Json::object();
  for (auto& [k, v] : props.items()) {
    if (other_props.is_object() && other_props.contains(k)) { out[k] = v; continue; }
    if (other_additional.is_boolean() && !other_additional.get<bool>()) { out[k] = false; continue; }
    out[k] = Json{{"allOf", Json::array({v, other_additional})}};
  }
  return out;
}

}  // namespace

Result<const Json*> LookupRef(const Json& root, const std::string& ref) {
  if (ref.empty() || ref[0] != '#') return Errorf("$ref: only local references (#/...) are supported, not '{}'", ref);
  const Json* at = &root;
  size_t pos = 1;
  if (pos < ref.size() && ref[pos] != '/') return Errorf("$ref: anchors ('{}') are not supported", ref);
  while (pos < ref.size()) {
    size_t next = ref.find('/', pos + 1);
    std::string raw = ref.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1);
    pos = next == std::string::npos ? ref.size() : next;
    std::string token;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '~' && i + 1 < raw.size()) { token += raw[i + 1] == '1' ? '/' : '~'; ++i; }
      else if (raw[i] == '%' && i + 2 < raw.size() && isxdigit(uint8_t(raw[i + 1])) && isxdigit(uint8_t(raw[i + 2]))) {
        token += char(std::stoi(raw.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        token += raw[i];
      }
    }
    if (at->is_object() && at->contains(token)) { at = &(*at)[token]; continue; }
    if (at->is_array() && !token.empty() && std::all_of(token.begin(), token.end(), ::isdigit) && token.size() < 9 &&
        size_t(std::stoi(token)) < at->size()) {
      at = &(*at)[size_t(std::stoi(token))];
      continue;
    }
    return Errorf("$ref: '{}' does not resolve", ref);
  }
  return at;
}

Result<Json> MergeSchemas(const Json& a_in, const Json& b_in) {
  if (a_in.is_boolean()) return a_in.get<bool>() ? b_in : Json(false);
  if (b_in.is_boolean()) return b_in.get<bool>() ? a_in : Json(false);
  if (!a_in.is_object() || !b_in.is_object()) return Errorf("allOf: a subschema is not an object");
  Json a = a_in, b = b_in;
  // Extra keys of one side meet the other side's additionalProperties.
  Json a_props = a.value("properties", Json::object()), b_props = b.value("properties", Json::object());
  if (a.contains("patternProperties") || b.contains("patternProperties")) {
    if ((a.contains("patternProperties") && (b.contains("properties") || b.contains("additionalProperties"))) ||
        (b.contains("patternProperties") && (a.contains("properties") || a.contains("additionalProperties"))))
      return Errorf("allOf: patternProperties beside another subschema's properties");
  }
  bool a_add = a.contains("additionalProperties") && !IsTrue(a["additionalProperties"]);
  bool b_add = b.contains("additionalProperties") && !IsTrue(b["additionalProperties"]);
  if (a_add && b_add && a["additionalProperties"] != b["additionalProperties"])
    return Errorf("allOf: two different additionalProperties");
  if (a_add && b.contains("properties")) { PC_ASSIGN_OR_RETURN(b["properties"], RestrictExtras(b_props, a_props, a["additionalProperties"])); }
  if (b_add && a.contains("properties")) { PC_ASSIGN_OR_RETURN(a["properties"], RestrictExtras(a_props, b_props, b["additionalProperties"])); }

  Json out = a;
  for (auto& [k, v] : b.items()) {
    if (!out.contains(k)) { out[k] = v; continue; }
    Json& o = out[k];
    if (o == v) continue;
    if (k == "type") {
      o = IntersectTypes(o, v);
    } else if (k == "properties") {
      if (!v.is_object() || !o.is_object()) return Errorf("allOf: properties is not an object");
      for (auto& [pk, pv] : v.items()) {
        if (o.contains(pk)) o[pk] = Json{{"allOf", Json::array({o[pk], pv})}};
        else o[pk] = pv;
      }
    } else if (k == "required") {
      if (!v.is_array() || !o.is_array()) return Errorf("allOf: required is not an array");
      for (const Json& r : v)
        if (std::find(o.begin(), o.end(), r) == o.end()) o.push_back(r);
    } else if (k == "enum") {
      if (!v.is_array() || !o.is_array()) return Errorf("allOf: enum is not an array");
      Json keep = Json::array();
      for (const Json& x : o)
        if (std::find(v.begin(), v.end(), x) != v.end()) keep.push_back(x);
      o = keep;
    } else if (k == "const") {
      out.erase("const");
      out["enum"] = Json::array();  // two different constants: nothing
    } else if (k == "minimum" || k == "exclusiveMinimum" || k == "minLength" || k == "minItems" || k == "minProperties") {
      if (!o.is_number() || !v.is_number()) return Errorf("allOf: {} is not a number", k);
      if (v.get<double>() > o.get<double>()) o = v;
    } else if (k == "maximum" || k == "exclusiveMaximum" || k == "maxLength" || k == "maxItems" || k == "maxProperties") {
      if (!o.is_number() || !v.is_number()) return Errorf("allOf: {} is not a number", k);
      if (v.get<double>() < o.get<double>()) o = v;
    } else if (k == "items" || k == "additionalItems" || k == "additionalProperties" || k == "contains") {
      if (o.is_array() || v.is_array()) return Errorf("allOf: two different {} lists", k);
      o = Json{{"allOf", Json::array({o, v})}};
    } else if (k == "allOf") {
      for (const Json& x : v) o.push_back(x);
    } else if (k == "description" || k == "title" || k == "default" || k == "examples" || k == "$schema" || k == "$id" ||
               k == "id" || k == "$comment" || k == "definitions" || k == "$defs" || k == "readOnly" || k == "writeOnly" ||
               k == "deprecated" || k.rfind("x-", 0) == 0) {
      continue;  // annotations: keep the first
    } else {
      return Errorf("allOf: two different '{}' cannot be combined", k);
    }
  }
  return out;
}

}  // namespace pc::structured
