// GGUF container types: metadata values and tensor element types.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "base/status.h"
#include "base/tensor_type.h"

namespace pc {

// Metadata value types, numbered as in the GGUF specification.
enum class GgufType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5,
  kFloat32 = 6, kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11,
  kFloat64 = 12,
};
const char* GgufTypeName(GgufType t);

using GgufScalar = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float,
                                bool, std::string, uint64_t, int64_t, double>;

// A metadata value: a scalar, or an array of scalars of one element type.
struct GgufValue {
  GgufType type = GgufType::kUint32;
  GgufScalar scalar;
  GgufType elem_type = GgufType::kUint32;  // arrays only
  std::vector<GgufScalar> array;           // arrays only

  static GgufValue Of(GgufScalar s);
  static GgufValue ArrayOf(GgufType elem_type, std::vector<GgufScalar> items);
};

// GgufType of the scalar held in a variant.
GgufType ScalarType(const GgufScalar& s);
// Integer / float views that accept any numeric scalar (false otherwise).
bool ScalarAsInt(const GgufScalar& s, int64_t* out);
bool ScalarAsDouble(const GgufScalar& s, double* out);

}  // namespace pc
