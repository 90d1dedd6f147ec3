// Values a JSON Schema compiler reads: exact decimals for numeric bounds
// and multipleOf, and the regular expressions of the string formats it
// enforces. Internal to src/structured. Thread-safety: pure functions.
#pragma once
#include <optional>
#include <string>

#include "base/status.h"
#include "structured/json_schema.h"
#include "structured/schema_merge.h"

namespace pc::structured {

// Anchored regular expression of a string format (date, time, date-time,
// email, uuid, ipv4, ipv6, hostname, uri, uri-reference); null if unknown.
const char* FormatRegex(const std::string& format);

// A JSON number as an exact decimal, rounded toward +inf (round_up) or -inf
// when it does not fit; nullopt when out of range.
std::optional<Decimal> ToDecimal(const Json& j, bool round_up);

// A count keyword (minLength, maxItems, ...) into *out when present: a
// non-negative integer, capped at 4e9; an error naming it otherwise.
Status CountKeyword(const Json& s, const char* k, uint32_t* out);

}  // namespace pc::structured
