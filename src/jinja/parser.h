// Template source -> syntax tree (see parser.cc for the whitespace rules).
#pragma once
#include <string_view>

#include "base/status.h"
#include "jinja/ast.h"

namespace pc::jinja {

Result<Body> ParseTemplate(std::string_view source);

}  // namespace pc::jinja
