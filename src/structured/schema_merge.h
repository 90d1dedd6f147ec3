// JSON-level helpers of the schema compiler (internal to src/structured):
// local $ref lookup and the intersection of two schemas (allOf, and a base
// schema with each anyOf/oneOf branch).
#pragma once
#include <nlohmann/json.hpp>

#include <string>

#include "base/status.h"

namespace pc::structured {

using Json = nlohmann::ordered_json;

// The subschema at a local reference ("#", "#/definitions/a", percent- and
// ~-escaped); an error for any other reference.
Result<const Json*> LookupRef(const Json& root, const std::string& ref);

// A schema accepting exactly what both accept, or an error naming the
// keyword whose intersection is not expressible here. Neither side may hold
// a $ref at its top level (resolve first).
Result<Json> MergeSchemas(const Json& a, const Json& b);

}  // namespace pc::structured
