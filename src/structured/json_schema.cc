// JSON Schema -> node graph. Each subschema is compiled into a node slot it
// reserved first, so $ref recursion points at a slot being filled.
#include "structured/json_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "structured/json_matcher.h"
#include "structured/schema_merge.h"
#include "structured/schema_values.h"

namespace pc::structured {

void ByteTrie::Insert(std::string_view text, int32_t value) {
  int32_t at = 0;
  for (char ch : text) {
    uint8_t b = uint8_t(ch);
    int32_t next = Child(at, b);
    if (next < 0) {
      next = int32_t(nodes.size());
      nodes.emplace_back();
      auto& kids = nodes[size_t(at)].kids;
      kids.insert(std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, int32_t(-1))), {b, next});
    }
    at = next;
  }
  if (nodes[size_t(at)].value < 0) nodes[size_t(at)].value = value;
}

int32_t ByteTrie::Child(int32_t node, uint8_t byte) const {
  for (const auto& [b, to] : nodes[size_t(node)].kids) {
    if (b == byte) return to;
    if (b > byte) break;
  }
  return -1;
}

namespace {

// Keywords that assert something we do not enforce: an error, not a looser
// grammar.
constexpr const char* kUnsupported[] = {
    "not", "if", "then", "else", "contains", "minContains", "maxContains", "propertyNames", "dependencies",
    "dependentRequired", "dependentSchemas", "unevaluatedItems", "unevaluatedProperties", "$dynamicRef",
    "$recursiveRef", "uniqueItems",
};

class Compiler {
 public:
  Compiler(const Json& root, const SchemaLimits& limits) : root_(root), limits_(limits) {
    out_ = std::make_shared<CompiledSchema>();
    out_->nodes.emplace_back();  // kAnyNode
    ByteTrie bools, null;
    bools.Insert("true", 0);
    bools.Insert("false", 1);
    null.Insert("null", 0);
    out_->bool_trie = AddTrie(std::move(bools));
    out_->null_trie = AddTrie(std::move(null));
  }

  Result<std::shared_ptr<const CompiledSchema>> Run() {
    PC_ASSIGN_OR_RETURN(int32_t root, Compile(root_, -1, 0));
    out_->root = root;
    if (!Productive(root))
      return Errorf("schema: admits no finite value (a $ref cycle without a base case, or contradictory keywords)");
    static std::atomic<uint64_t> next_uid{1};
    out_->uid = next_uid.fetch_add(1);
    return std::shared_ptr<const CompiledSchema>(std::move(out_));
  }

 private:
  int32_t AddTrie(ByteTrie t) {
    out_->tries.push_back(std::move(t));
    return int32_t(out_->tries.size() - 1);
  }
  Result<int32_t> NewNode() {
    if (out_->nodes.size() >= limits_.max_nodes) return Errorf("schema: too large (over {} nodes)", limits_.max_nodes);
    out_->nodes.emplace_back();
    return int32_t(out_->nodes.size() - 1);
  }
  Result<int32_t> Never() {
    if (never_ < 0) {
      PC_ASSIGN_OR_RETURN(never_, NewNode());
      out_->nodes[size_t(never_)].types = 0;
    }
    return never_;
  }
  Result<int32_t> AddDfa(const std::string& pattern, bool search) {
    auto key = std::make_pair(pattern, search);
    auto it = dfa_memo_.find(key);
    if (it != dfa_memo_.end()) return it->second;
    PC_ASSIGN_OR_RETURN(ByteDfa dfa, CompileRegex(pattern, search));
    out_->dfas.push_back(std::move(dfa));
    int32_t id = int32_t(out_->dfas.size() - 1);
    dfa_memo_[key] = id;
    return id;
  }

  // A subschema reached by reference is compiled once (recursion allowed).
  Result<int32_t> CompileRef(const std::string& ref, int depth) {
    auto it = ref_memo_.find(ref);
    if (it != ref_memo_.end()) return it->second;
    PC_ASSIGN_OR_RETURN(const Json* target, LookupRef(root_, ref));
    PC_ASSIGN_OR_RETURN(int32_t slot, NewNode());
    out_->nodes[size_t(slot)].types = 0;  // nothing, until filled (a bare self-reference stays so)
    ref_memo_[ref] = slot;
    PC_ASSIGN_OR_RETURN(int32_t got, Compile(*target, slot, depth + 1));
    if (got != slot) {  // an alias: one alternative
      Node alias;
      alias.alts = {got};
      out_->nodes[size_t(slot)] = std::move(alias);
    }
    return slot;
  }

  // Replaces a top-level $ref by the referenced schema merged with the
  // siblings (the siblings apply too, as in 2019-09 and later).
  Result<Json> Inline(const Json& s, int depth) {
    if (!s.is_object() || !s.contains("$ref")) return s;
    if (depth > int(limits_.max_depth)) return Errorf("$ref: chain too deep (a reference to itself?)");
    if (!s["$ref"].is_string()) return Errorf("$ref: not a string");
    PC_ASSIGN_OR_RETURN(const Json* target, LookupRef(root_, s["$ref"].get<std::string>()));
    Json rest = s;
    rest.erase("$ref");
    PC_ASSIGN_OR_RETURN(Json t, Inline(*target, depth + 1));
    return MergeSchemas(t, rest);
  }

  static bool HasAssertions(const Json& s) {
    static const char* kNotes[] = {"description", "title", "default", "examples", "$schema", "$id", "id", "$comment",
                                   "definitions", "$defs", "readOnly", "writeOnly", "deprecated", "example", "$ref"};
    for (auto& [k, v] : s.items()) {
      (void)v;
      if (k.rfind("x-", 0) == 0 || std::find(std::begin(kNotes), std::end(kNotes), k) != std::end(kNotes)) continue;
      return true;
    }
    return false;
  }

  // Compiles schema s into `slot` (reserved by CompileRef; -1: a new one).
  // Returns the node that stands for s (not slot for booleans and aliases).
  Result<int32_t> Compile(const Json& s, int32_t slot, int depth) {
    if (depth > int(limits_.max_depth)) return Errorf("schema: nested deeper than {}", limits_.max_depth);
    if (s.is_boolean()) return s.get<bool>() ? kAnyNode : Never();
    if (!s.is_object()) return Errorf("schema: a subschema is neither an object nor a boolean");
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) return Errorf("$ref: not a string");
      if (!HasAssertions(s)) return CompileRef(s["$ref"].get<std::string>(), depth);
      PC_ASSIGN_OR_RETURN(Json merged, Inline(s, depth));
      return Compile(merged, slot, depth + 1);
    }
    for (const char* k : kUnsupported) {
      if (!s.contains(k)) continue;
      if (std::string(k) == "uniqueItems" &&
          (!(s[k].is_boolean() && s[k].get<bool>()) || (s.contains("maxItems") && s["maxItems"].is_number() && s["maxItems"].get<double>() <= 1)))
        continue;
      return Errorf("schema: keyword '{}' is not supported", k);
    }
    if (s.contains("allOf")) {
      if (!s["allOf"].is_array()) return Errorf("allOf: not an array");
      Json merged = s;
      merged.erase("allOf");
      for (const Json& part : s["allOf"]) {
        PC_ASSIGN_OR_RETURN(Json p, Inline(part, depth));
        PC_ASSIGN_OR_RETURN(merged, MergeSchemas(merged, p));
      }
      return Compile(merged, slot, depth + 1);
    }
    if (slot < 0) { PC_ASSIGN_OR_RETURN(slot, NewNode()); }
    PC_ASSIGN_OR_RETURN(Node node, CompileObject(s, depth));
    out_->nodes[size_t(slot)] = std::move(node);
    return slot;
  }

  // Whether some finite JSON value satisfies node `id`: a least fixed point
  // over the graph (recursion must bottom out).
  bool Productive(int32_t id) const {
    const auto& nodes = out_->nodes;
    std::vector<char> prod(nodes.size(), 0);
    auto ok = [&](int32_t n) { return n != kNoNode && prod[size_t(n)]; };
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < nodes.size(); ++i) {
        if (prod[i]) continue;
        const Node& n = nodes[i];
        auto productive = [&] {
          if (n.literals >= 0) return true;
          if (!n.alts.empty()) return std::any_of(n.alts.begin(), n.alts.end(), ok);
          if (n.types & (kNull | kBool | kInteger | kNumber)) return true;
          if ((n.types & kString) && n.str.min_len <= n.str.max_len) return true;
          if ((n.types & kObject) && n.obj.min_props <= n.obj.max_props &&
              std::all_of(n.obj.props.begin(), n.obj.props.end(),
                          [&](const Property& pr) { return pr.required_bit < 0 || ok(pr.node); }))
            return true;
          if (!(n.types & kArray) || n.arr.min_items > n.arr.max_items) return false;
          for (uint32_t k = 0; k < n.arr.min_items; ++k)
            if (!ok(k < n.arr.prefix.size() ? n.arr.prefix[k] : n.arr.items)) return false;
          return true;
        };
        bool p = productive();
        if (p) { prod[i] = 1; changed = true; }
      }
    }
    return prod[size_t(id)] != 0;
  }

  Result<Node> CompileObject(const Json& s, int depth);
  Result<Node> CompileBranches(const Json& s, int depth);
  Status CompileString(const Json& s, Node* n);
  Status CompileNumber(const Json& s, Node* n);
  Status CompileArray(const Json& s, Node* n, int depth);
  Status CompileObjectRule(const Json& s, Node* n, int depth);
  Status DeclareProperty(const std::string& name, const Json* sub, const std::vector<std::pair<std::string, Json>>& patterns,
                         ObjectRule* o, int depth);
  Status CompileRequired(const Json& s, const std::vector<std::pair<std::string, Json>>& patterns, Node* n, int depth);
  void IndexKeys(ObjectRule* o);
  Result<bool> Disjoint(int32_t a, int32_t b, int depth = 0);

  const Json& root_;
  SchemaLimits limits_;
  std::shared_ptr<CompiledSchema> out_;
  std::map<std::string, int32_t> ref_memo_;
  std::map<int32_t, std::vector<std::string>> literal_texts_;  // by trie
  std::map<std::pair<std::string, bool>, int32_t> dfa_memo_;
  int32_t never_ = -1;
  size_t literals_ = 0;
};

Result<Node> Compiler::CompileObject(const Json& s, int depth) {
  if (s.contains("anyOf") || s.contains("oneOf")) return CompileBranches(s, depth);
  if (s.contains("enum") || s.contains("const")) {
    Json base = s;
    base.erase("enum");
    base.erase("const");
    PC_ASSIGN_OR_RETURN(int32_t b, Compile(base, -1, depth + 1));
    std::vector<Json> values;
    if (s.contains("enum")) {
      if (!s["enum"].is_array()) return Errorf("enum: not an array");
      for (const Json& v : s["enum"])
        if (!s.contains("const") || v == s["const"]) values.push_back(v);
    } else {
      values.push_back(s["const"]);
    }
    literals_ += values.size();
    if (literals_ > limits_.max_literals) return Errorf("enum: more than {} values in one schema", limits_.max_literals);
    ByteTrie trie;
    std::vector<std::string> texts;
    for (const Json& v : values) {
      std::string text = v.dump(-1, ' ', false, Json::error_handler_t::replace);
      if (!Accepts(*out_, b, text)) continue;  // the value breaks the schema's other keywords
      trie.Insert(text, int32_t(texts.size()));
      texts.push_back(std::move(text));
    }
    Node n;
    if (texts.empty()) {
      n.types = 0;
      return n;
    }
    n.literals = AddTrie(std::move(trie));
    literal_texts_[n.literals] = std::move(texts);
    return n;
  }
  Node n;
  if (s.contains("type")) {
    const Json& t = s["type"];
    std::vector<Json> names = t.is_array() ? std::vector<Json>(t.begin(), t.end()) : std::vector<Json>{t};
    n.types = 0;
    for (const Json& name : names) {
      std::string v = name.is_string() ? name.get<std::string>() : "";
      if (v == "null") n.types |= kNull;
      else if (v == "boolean") n.types |= kBool;
      else if (v == "integer") n.types |= kInteger;
      else if (v == "number") n.types |= kInteger | kNumber;
      else if (v == "string") n.types |= kString;
      else if (v == "array") n.types |= kArray;
      else if (v == "object") n.types |= kObject;
      else return Errorf("type: unknown type {}", name.dump());
    }
  }
  PC_RETURN_IF_ERROR(CompileString(s, &n));
  PC_RETURN_IF_ERROR(CompileNumber(s, &n));
  PC_RETURN_IF_ERROR(CompileArray(s, &n, depth));
  PC_RETURN_IF_ERROR(CompileObjectRule(s, &n, depth));
  return n;
}

Result<Node> Compiler::CompileBranches(const Json& s, int depth) {
  if (s.contains("anyOf") && s.contains("oneOf")) return Errorf("schema: anyOf beside oneOf is not supported");
  const bool one_of = s.contains("oneOf");
  const Json& list = one_of ? s["oneOf"] : s["anyOf"];
  const char* kw = one_of ? "oneOf" : "anyOf";
  if (!list.is_array() || list.empty()) return Errorf("{}: not a non-empty array", kw);
  if (list.size() > limits_.max_alternatives) return Errorf("{}: more than {} branches", kw, limits_.max_alternatives);
  Json base = s;
  base.erase(kw);
  const bool plain = !HasAssertions(base);
  std::vector<int32_t> branches;
  for (const Json& a : list) {
    int32_t id;
    if (plain) {
      PC_ASSIGN_OR_RETURN(id, Compile(a, -1, depth + 1));
    } else {
      PC_ASSIGN_OR_RETURN(Json inl, Inline(a, depth));
      PC_ASSIGN_OR_RETURN(Json m, MergeSchemas(base, inl));
      PC_ASSIGN_OR_RETURN(id, Compile(m, -1, depth + 1));
    }
    branches.push_back(id);
  }
  if (one_of) {
    for (size_t i = 0; i < branches.size(); ++i)
      for (size_t j = i + 1; j < branches.size(); ++j) {
        PC_ASSIGN_OR_RETURN(bool d, Disjoint(branches[i], branches[j]));
        if (!d) return Errorf("oneOf: branches {} and {} may both match one value (not supported)", i, j);
      }
  }
  Node n;
  for (int32_t id : branches) {
    const Node& b = out_->nodes[size_t(id)];
    if (!b.alts.empty()) n.alts.insert(n.alts.end(), b.alts.begin(), b.alts.end());
    else n.alts.push_back(id);
  }
  if (n.alts.size() > limits_.max_alternatives) return Errorf("{}: more than {} branches", kw, limits_.max_alternatives);
  return n;
}

// Whether no value can match both nodes (conservative: false when unsure).
Result<bool> Compiler::Disjoint(int32_t a, int32_t b, int depth) {
  if (depth > 8) return false;
  const Node& x = out_->nodes[size_t(a)];
  const Node& y = out_->nodes[size_t(b)];
  for (int32_t alt : x.alts) { PC_ASSIGN_OR_RETURN(bool d, Disjoint(alt, b, depth + 1)); if (!d) return false; }
  if (!x.alts.empty()) return true;
  for (int32_t alt : y.alts) { PC_ASSIGN_OR_RETURN(bool d, Disjoint(a, alt, depth + 1)); if (!d) return false; }
  if (!y.alts.empty()) return true;
  if (x.literals >= 0 || y.literals >= 0) {
    const Node& lit = x.literals >= 0 ? x : y;
    int32_t other = x.literals >= 0 ? b : a;
    for (const std::string& t : literal_texts_[lit.literals])
      if (Accepts(*out_, other, t)) return false;
    return true;
  }
  uint8_t common = x.types & y.types;
  if (common == 0) return true;
  if (common != kObject) return false;
  // Objects: a required key one side forbids, or a required key whose
  // values cannot agree.
  auto forbids = [&](const ObjectRule& o, const std::string& key) {
    if (o.additional != kNoNode || !o.pattern_props.empty()) return false;
    for (const Property& p : o.props)
      if (p.name == key) return false;
    return true;
  };
  for (int side = 0; side < 2; ++side) {
    const ObjectRule& o = side ? y.obj : x.obj;
    const ObjectRule& other = side ? x.obj : y.obj;
    for (const Property& p : o.props) {
      if (p.required_bit < 0) continue;
      if (forbids(other, p.name)) return true;
      for (const Property& q : other.props) {
        if (q.name != p.name) continue;
        const Node& pn = out_->nodes[size_t(p.node)];
        const Node& qn = out_->nodes[size_t(q.node)];
        if (pn.literals >= 0 || qn.literals >= 0) {
          PC_ASSIGN_OR_RETURN(bool d, Disjoint(p.node, q.node, depth + 1));
          if (d) return true;
        }
      }
    }
  }
  return false;
}

Status Compiler::CompileString(const Json& s, Node* n) {
  PC_RETURN_IF_ERROR(CountKeyword(s, "minLength", &n->str.min_len));
  PC_RETURN_IF_ERROR(CountKeyword(s, "maxLength", &n->str.max_len));
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string()) return Errorf("pattern: not a string");
    auto dfa = AddDfa(s["pattern"].get<std::string>(), true);
    if (!dfa.ok()) return dfa.status();
    n->str.pattern = *dfa;
  }
  if (s.contains("format") && s["format"].is_string()) {
    std::string f = s["format"].get<std::string>();
    if (const char* re = FormatRegex(f)) {
      PC_ASSIGN_OR_RETURN(n->str.format, AddDfa(re, false));
      if (f == "hostname") n->str.max_len = std::min<uint32_t>(n->str.max_len, 253);
    }
  }
  return OkStatus();
}

Status Compiler::CompileNumber(const Json& s, Node* n) {
  NumberRule& r = n->num;
  // Lower bounds: minimum, exclusiveMinimum (a number, or draft 4's flag).
  for (int upper = 0; upper < 2; ++upper) {
    const char* incl = upper ? "maximum" : "minimum";
    const char* excl = upper ? "exclusiveMaximum" : "exclusiveMinimum";
    std::vector<std::pair<Json, bool>> bounds;
    if (s.contains(incl)) {
      if (!s[incl].is_number()) return Errorf("{}: not a number", incl);
      bool flag = s.contains(excl) && s[excl].is_boolean() && s[excl].get<bool>();
      bounds.push_back({s[incl], flag});
    }
    if (s.contains(excl) && !s[excl].is_boolean()) {
      if (!s[excl].is_number()) return Errorf("{}: not a number", excl);
      bounds.push_back({s[excl], true});
    }
    for (auto& [v, strict] : bounds) {
      std::optional<Decimal> d = ToDecimal(v, !upper);
      double x = v.get<double>();
      if (!d) {  // beyond 19 digits: either no bound or no number at all
        if ((x > 0) != bool(upper)) n->types &= uint8_t(~(kInteger | kNumber));
        continue;
      }
      bool& has = upper ? r.has_max : r.has_min;
      Decimal& cur = upper ? r.max : r.min;
      bool& cur_excl = upper ? r.max_excl : r.min_excl;
      int c = has ? Compare(*d, cur) : 0;
      if (!has || (upper ? c < 0 : c > 0) || (c == 0 && strict)) {
        has = true;
        cur = *d;
        cur_excl = strict;
      }
    }
  }
  if (s.contains("multipleOf")) {
    if (!s["multipleOf"].is_number() || s["multipleOf"].get<double>() <= 0) return Errorf("multipleOf: not a positive number");
    std::optional<Decimal> lo = ToDecimal(s["multipleOf"], false), hi = ToDecimal(s["multipleOf"], true);
    if (!lo || Compare(*lo, *hi) != 0 || lo->mant == 0) return Errorf("multipleOf: {} is not supported", s["multipleOf"].dump());
    r.has_multiple = true;
    r.multiple = *lo;
  }
  return OkStatus();
}

Status Compiler::CompileArray(const Json& s, Node* n, int depth) {
  ArrayRule& a = n->arr;
  PC_RETURN_IF_ERROR(CountKeyword(s, "minItems", &a.min_items));
  PC_RETURN_IF_ERROR(CountKeyword(s, "maxItems", &a.max_items));
  auto compile = [&](const Json& sub) -> Result<int32_t> {
    PC_ASSIGN_OR_RETURN(int32_t id, Compile(sub, -1, depth + 1));
    if (id != kAnyNode && out_->nodes[size_t(id)].types == 0 && out_->nodes[size_t(id)].alts.empty() &&
        out_->nodes[size_t(id)].literals < 0)
      return kNoNode;
    return id;
  };
  const Json* prefix = s.contains("prefixItems") ? &s["prefixItems"] : nullptr;
  const Json* rest = nullptr;
  if (s.contains("items")) {
    if (s["items"].is_array()) {
      if (prefix) return Errorf("items: a list beside prefixItems");
      prefix = &s["items"];
      if (s.contains("additionalItems")) rest = &s["additionalItems"];
    } else {
      rest = &s["items"];
    }
  }
  if (prefix) {
    if (!prefix->is_array()) return Errorf("prefixItems: not an array");
    for (const Json& p : *prefix) {
      PC_ASSIGN_OR_RETURN(int32_t id, compile(p));
      a.prefix.push_back(id);
    }
  }
  if (rest) { PC_ASSIGN_OR_RETURN(a.items, compile(*rest)); }
  return OkStatus();
}

Status Compiler::CompileObjectRule(const Json& s, Node* n, int depth) {
  ObjectRule& o = n->obj;
  PC_RETURN_IF_ERROR(CountKeyword(s, "minProperties", &o.min_props));
  PC_RETURN_IF_ERROR(CountKeyword(s, "maxProperties", &o.max_props));
  if (s.contains("additionalProperties")) {
    const Json& ad = s["additionalProperties"];
    if (ad.is_boolean() && !ad.get<bool>()) {
      o.additional = kNoNode;
    } else {
      PC_ASSIGN_OR_RETURN(o.additional, Compile(ad, -1, depth + 1));
    }
  }
  std::vector<std::pair<std::string, Json>> patterns;
  if (s.contains("patternProperties")) {
    const Json& pp = s["patternProperties"];
    if (!pp.is_object()) return Errorf("patternProperties: not an object");
    if (pp.size() > 2) return Errorf("patternProperties: more than two patterns are not supported");
    for (auto& [pat, sub] : pp.items()) {
      PC_ASSIGN_OR_RETURN(int32_t dfa, AddDfa(pat, true));
      PC_ASSIGN_OR_RETURN(int32_t id, Compile(sub, -1, depth + 1));
      o.pattern_props.push_back({dfa, id});
      patterns.push_back({pat, sub});
    }
  }
  if (s.contains("properties")) {
    if (!s["properties"].is_object()) return Errorf("properties: not an object");
    for (auto& [name, sub] : s["properties"].items()) PC_RETURN_IF_ERROR(DeclareProperty(name, &sub, patterns, &o, depth));
  }
  PC_RETURN_IF_ERROR(CompileRequired(s, patterns, n, depth));
  IndexKeys(&o);
  return OkStatus();
}

// A property (sub: its schema; null for a required name no "properties"
// declares). A declared name matching a pattern must satisfy both schemas.
Status Compiler::DeclareProperty(const std::string& name, const Json* sub,
                                 const std::vector<std::pair<std::string, Json>>& patterns, ObjectRule* o, int depth) {
  Json merged = sub ? *sub : Json(true);
  bool matched = false;
  for (size_t i = 0; i < patterns.size(); ++i) {
    if (!out_->dfas[size_t(o->pattern_props[i].first)].Matches(name)) continue;
    matched = true;
    PC_ASSIGN_OR_RETURN(Json a, Inline(merged, depth));
    PC_ASSIGN_OR_RETURN(Json b, Inline(patterns[i].second, depth));
    PC_ASSIGN_OR_RETURN(merged, MergeSchemas(a, b));
  }
  Property p;
  p.name = Json(name).dump(-1, ' ', false, Json::error_handler_t::replace);
  p.name = p.name.substr(1, p.name.size() - 2);
  if (!sub && !matched) {
    p.node = o->additional;  // required but not declared: an extra key
  } else {
    PC_ASSIGN_OR_RETURN(p.node, Compile(merged, -1, depth + 1));
  }
  o->props.push_back(std::move(p));
  return OkStatus();
}

// "required": a bit per name (at most 64), declaring names no property has.
Status Compiler::CompileRequired(const Json& s, const std::vector<std::pair<std::string, Json>>& patterns, Node* n,
                                 int depth) {
  if (!s.contains("required")) return OkStatus();
  ObjectRule& o = n->obj;
  if (!s["required"].is_array()) return Errorf("required: not an array");
  int bit = 0;
  for (const Json& r : s["required"]) {
    if (!r.is_string()) return Errorf("required: not a list of strings");
    std::string escaped = Json(r).dump(-1, ' ', false, Json::error_handler_t::replace);
    escaped = escaped.substr(1, escaped.size() - 2);
    auto it = std::find_if(o.props.begin(), o.props.end(), [&](const Property& p) { return p.name == escaped; });
    if (it == o.props.end()) {
      PC_RETURN_IF_ERROR(DeclareProperty(r.get<std::string>(), nullptr, patterns, &o, depth));
      it = o.props.end() - 1;
    }
    if (it->required_bit >= 0) continue;
    if (bit >= 64) return Errorf("required: more than 64 names are not supported");
    if (it->node == kNoNode) n->types &= uint8_t(~kObject);  // a required key no schema allows
    it->required_bit = bit;
    o.required_mask |= uint64_t(1) << bit++;
  }
  return OkStatus();
}

// The properties' names in a trie (escaped, as they appear in JSON text),
// with each trie node's required / seen / untracked properties below it.
void Compiler::IndexKeys(ObjectRule* o) {
  int seen = 0;
  ByteTrie trie;
  for (size_t i = 0; i < o->props.size(); ++i) {
    if (o->props[i].required_bit < 0 && seen < 64) o->props[i].seen_bit = seen++;
    trie.Insert(o->props[i].name, int32_t(i));
  }
  if (o->props.empty()) return;
  o->sub_required.assign(trie.nodes.size(), 0);
  o->sub_seen.assign(trie.nodes.size(), 0);
  o->sub_untracked.assign(trie.nodes.size(), 0);
  for (const Property& p : o->props) {
    int32_t at = 0;
    for (size_t i = 0;; ++i) {
      if (p.required_bit >= 0) o->sub_required[size_t(at)] |= uint64_t(1) << p.required_bit;
      else if (p.seen_bit >= 0) o->sub_seen[size_t(at)] |= uint64_t(1) << p.seen_bit;
      else o->sub_untracked[size_t(at)] = 1;
      if (i == p.name.size()) break;
      at = trie.Child(at, uint8_t(p.name[i]));
    }
  }
  o->key_trie = AddTrie(std::move(trie));
}

}  // namespace

Result<std::shared_ptr<const CompiledSchema>> CompileJsonSchema(const Json& schema, const SchemaLimits& limits) {
  Compiler c(schema, limits);
  return c.Run();
}

Result<std::shared_ptr<const CompiledSchema>> CompileJsonSchemaText(std::string_view text, const SchemaLimits& limits) {
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded()) return Errorf("schema: not valid JSON");
  return CompileJsonSchema(j, limits);
}

}  // namespace pc::structured
