#include "gguf/gguf_types.h"

#include "base/check.h"

namespace pc {

const char* GgufTypeName(GgufType t) {
  static const char* kNames[] = {"uint8", "int8",  "uint16", "int16", "uint32", "int32", "float32",
                                 "bool",  "string", "array", "uint64", "int64", "float64"};
  const auto i = static_cast<uint32_t>(t);
  return i < 13 ? kNames[i] : "invalid";
}

GgufValue GgufValue::Of(GgufScalar s) {
  GgufValue v;
  v.type = ScalarType(s);
  v.scalar = std::move(s);
  return v;
}

GgufValue GgufValue::ArrayOf(GgufType elem_type, std::vector<GgufScalar> items) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.elem_type = elem_type;
  v.array = std::move(items);
  return v;
}

GgufType ScalarType(const GgufScalar& s) {
  static const GgufType kByIndex[] = {
      GgufType::kUint8, GgufType::kInt8,    GgufType::kUint16, GgufType::kInt16,
      GgufType::kUint32, GgufType::kInt32,  GgufType::kFloat32, GgufType::kBool,
      GgufType::kString, GgufType::kUint64, GgufType::kInt64,  GgufType::kFloat64};
  return kByIndex[s.index()];
}

bool ScalarAsInt(const GgufScalar& s, int64_t* out) {
  return std::visit(
      [out](const auto& v) -> bool {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_integral_v<V> && !std::is_same_v<V, bool>) {
          if constexpr (std::is_same_v<V, uint64_t>) {
            if (v > static_cast<uint64_t>(INT64_MAX)) return false;
          }
          *out = static_cast<int64_t>(v);
          return true;
        } else {
          return false;
        }
      },
      s);
}

bool ScalarAsDouble(const GgufScalar& s, double* out) {
  return std::visit(
      [out](const auto& v) -> bool {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_arithmetic_v<V> && !std::is_same_v<V, bool>) {
          *out = static_cast<double>(v);
          return true;
        } else {
          return false;
        }
      },
      s);
}

}  // namespace pc
