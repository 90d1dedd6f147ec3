// Untrusted JSON bodies parsed with a bound on nesting. nlohmann's parser is
// iterative, but copying, comparing or dumping a value recurses once per
// level: a 200 KB body of 100,000 nested arrays overflowed the stack in the
// first copy. The depth is checked by a linear scan before anything is built.
// Thread-safety: pure functions.
#pragma once
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace pc {

// Deeper than any request we accept needs (messages -> content parts -> part
// is 4 levels; tools schemas a few more).
constexpr size_t kMaxJsonDepth = 64;

// The deepest nesting of arrays and objects in text (brackets inside strings
// not counted), stopping early once it exceeds limit.
size_t JsonNestingDepth(std::string_view text, size_t limit);

// The parsed value, or nullopt with *err set when the text is not JSON or
// nests deeper than max_depth.
std::optional<nlohmann::json> ParseJsonBounded(std::string_view text, std::string* err,
                                               size_t max_depth = kMaxJsonDepth);

}  // namespace pc
