#include "server/json_body.h"

#include <fmt/format.h>

namespace pc {

size_t JsonNestingDepth(std::string_view text, size_t limit) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char ch : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if ((ch == ']' || ch == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

std::optional<nlohmann::json> ParseJsonBounded(std::string_view text, std::string* err, size_t max_depth) {
  if (JsonNestingDepth(text, max_depth) > max_depth) {
    *err = fmt::format("the request body nests arrays and objects more than {} levels deep", max_depth);
    return std::nullopt;
  }
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    *err = "the request body is not valid JSON";
    return std::nullopt;
  }
  return j;
}

}  // namespace pc
