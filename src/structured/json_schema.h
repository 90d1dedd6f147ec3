// JSON Schema compiled for constrained decoding: a graph of nodes the byte
// matcher (json_matcher.h) walks. Compilation is exact or fails: a keyword
// whose meaning we cannot enforce is an error naming it, never a looser
// grammar (an invalid instance must never be accepted).
//
// Supported: type (one or a list), enum, const, properties, required,
// additionalProperties, patternProperties (at most two per object),
// min/maxProperties, items (a schema or, draft 4, a list), prefixItems,
// additionalItems, min/maxItems, minLength/maxLength (code points), pattern,
// format (date-time, date, time, email, uuid, uri, ipv4, ipv6, hostname, ...;
// formats we do not know are annotations), minimum/maximum/exclusive* (both
// drafts' spellings), multipleOf, $ref (local JSON pointers, recursion),
// $defs/definitions, allOf (merged), anyOf, oneOf (when no value can match
// two alternatives). Keys may come in any order; strings use canonical JSON
// escapes only (as Python's json.dumps(..., ensure_ascii=False) writes).
//
// Thread-safety: a CompiledSchema is immutable after compilation.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "structured/regex.h"

namespace pc::structured {

// Bits of Node::types. kNumber admits every number, kInteger only integers.
enum TypeBit : uint8_t {
  kNull = 1, kBool = 2, kInteger = 4, kNumber = 8, kString = 16, kArray = 32, kObject = 64, kAnyType = 127,
};

// An exact decimal: value = (neg ? -1 : 1) * mant / 10^scale.
struct Decimal {
  bool neg = false;
  uint64_t mant = 0;  // < 10^19
  int scale = 0;      // 0..18
};
// -1, 0, 1 as a < b, a == b, a > b.
int Compare(const Decimal& a, const Decimal& b);

// A byte trie of literal texts (enum values, property names).
struct ByteTrie {
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> kids;  // sorted by byte
    int32_t value = -1;                             // index of the text ending here
  };
  std::vector<Node> nodes{Node{}};
  void Insert(std::string_view text, int32_t value);
  int32_t Child(int32_t node, uint8_t byte) const;
};

struct StringRule {
  uint32_t min_len = 0, max_len = UINT32_MAX;  // code points
  int32_t pattern = -1, format = -1;           // indices into CompiledSchema::dfas
};

struct NumberRule {
  bool has_min = false, has_max = false, min_excl = false, max_excl = false, has_multiple = false;
  Decimal min, max, multiple;
  bool tracked() const { return has_min || has_max || has_multiple; }
};

struct Property {
  std::string name;   // the escaped key text (between the quotes)
  int32_t node = 0;
  int32_t required_bit = -1;  // bit in the object frame's required mask
  int32_t seen_bit = -1;      // bit in its seen mask (first 64 optional ones)
};

inline constexpr int32_t kNoNode = -1;   // nothing allowed (false schema)
inline constexpr int32_t kAnyNode = 0;   // node 0 accepts any JSON value

struct ObjectRule {
  std::vector<Property> props;
  int32_t key_trie = -1;  // index into CompiledSchema::tries; values index props
  // Per key-trie node, the properties below it: their required bits, their
  // seen bits, and whether one is tracked by neither (always available).
  std::vector<uint64_t> sub_required, sub_seen;
  std::vector<uint8_t> sub_untracked;
  // Whether some key below trie node n is not yet in the object.
  bool KeyAvailable(int32_t n, uint64_t seen_required, uint64_t seen_optional) const {
    return sub_untracked[size_t(n)] || (sub_required[size_t(n)] & ~seen_required) || (sub_seen[size_t(n)] & ~seen_optional);
  }
  int32_t additional = kAnyNode;
  std::vector<std::pair<int32_t, int32_t>> pattern_props;  // (dfa, node)
  uint32_t min_props = 0, max_props = UINT32_MAX;
  uint64_t required_mask = 0;
};

struct ArrayRule {
  std::vector<int32_t> prefix;
  int32_t items = kAnyNode;  // after the prefix; kNoNode: none
  uint32_t min_items = 0, max_items = UINT32_MAX;
};

struct Node {
  uint8_t types = kAnyType;
  int32_t literals = -1;      // a trie of canonical texts: the value is one of them
  std::vector<int32_t> alts;  // non-empty: the value matches one of these nodes
  StringRule str;
  NumberRule num;
  ArrayRule arr;
  ObjectRule obj;
};

struct SchemaLimits {
  size_t max_nodes = 20000;
  size_t max_depth = 64;          // nesting of subschemas while compiling
  size_t max_literals = 10000;    // enum values in one schema
  size_t max_alternatives = 64;   // anyOf/oneOf branches after distribution
};

struct CompiledSchema {
  uint64_t uid = 0;  // unique per compilation in this process (cache keys)
  std::vector<Node> nodes;
  std::vector<ByteDfa> dfas;
  std::vector<ByteTrie> tries;
  int32_t root = 0;
  // Built-in tries for true/false and null (values unused).
  int32_t bool_trie = -1, null_trie = -1;
};

Result<std::shared_ptr<const CompiledSchema>> CompileJsonSchema(const nlohmann::ordered_json& schema,
                                                                const SchemaLimits& limits = {});
Result<std::shared_ptr<const CompiledSchema>> CompileJsonSchemaText(std::string_view text,
                                                                    const SchemaLimits& limits = {});

}  // namespace pc::structured
