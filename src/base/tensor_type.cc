#include "base/tensor_type.h"

#include <fmt/format.h>

#include "base/check.h"

namespace pc {
namespace {

struct TypeInfo {
  TensorType type;
  const char* name;
  size_t block_elems, block_bytes;
};

// Block sizes are the file format's (ggml's block structs).
constexpr TypeInfo kTypes[] = {
    {TensorType::kF32, "f32", 1, 4},          {TensorType::kF16, "f16", 1, 2},
    {TensorType::kQ4_0, "q4_0", 32, 18},      {TensorType::kQ4_1, "q4_1", 32, 20},
    {TensorType::kQ5_0, "q5_0", 32, 22},      {TensorType::kQ5_1, "q5_1", 32, 24},
    {TensorType::kQ8_0, "q8_0", 32, 34},      {TensorType::kQ2_K, "q2_k", 256, 84},
    {TensorType::kQ3_K, "q3_k", 256, 110},    {TensorType::kQ4_K, "q4_k", 256, 144},
    {TensorType::kQ5_K, "q5_k", 256, 176},    {TensorType::kQ6_K, "q6_k", 256, 210},
    {TensorType::kQ8_K, "q8_k", 256, 292},    {TensorType::kIQ4_NL, "iq4_nl", 32, 18},
    {TensorType::kIQ4_XS, "iq4_xs", 256, 136}, {TensorType::kBF16, "bf16", 1, 2},
    {TensorType::kMXFP4, "mxfp4", 32, 17},    {TensorType::kQ8A, "q8a", 32, 40},
};

const TypeInfo* Info(TensorType t) {
  for (const TypeInfo& i : kTypes) {
    if (i.type == t) return &i;
  }
  return nullptr;
}

// ggml's names for the types it has and we do not (for error messages).
constexpr std::pair<uint32_t, const char*> kOtherGgmlTypes[] = {
    {4, "q4_2 (removed)"}, {5, "q4_3 (removed)"}, {9, "q8_1"},     {16, "iq2_xxs"}, {17, "iq2_xs"},
    {18, "iq3_xxs"},       {19, "iq1_s"},         {21, "iq3_s"},   {22, "iq2_s"},   {24, "i8"},
    {25, "i16"},           {26, "i32"},           {27, "i64"},     {28, "f64"},     {29, "iq1_m"},
    {34, "tq1_0"},         {35, "tq2_0"},
};

}  // namespace

const char* TensorTypeName(TensorType t) {
  const TypeInfo* i = Info(t);
  return i != nullptr ? i->name : "invalid";
}

const std::vector<TensorType>& WeightTensorTypes() {
  static const std::vector<TensorType> types = [] {
    std::vector<TensorType> v;
    for (const TypeInfo& i : kTypes) {
      if (i.type != TensorType::kQ8_K && i.type != TensorType::kQ8A) v.push_back(i.type);
    }
    return v;
  }();
  return types;
}

Result<TensorType> ParseTensorType(const std::string& name) {
  std::string names;
  for (TensorType t : WeightTensorTypes()) {
    if (name == TensorTypeName(t)) return t;
    names += (names.empty() ? "" : ", ") + std::string(TensorTypeName(t));
  }
  return Errorf("unknown tensor type '{}' (expected one of {})", name, names);
}

bool IsSupportedTensorType(uint32_t raw) {
  for (TensorType t : WeightTensorTypes()) {
    if (static_cast<uint32_t>(t) == raw) return true;
  }
  return false;
}

std::string RawTensorTypeName(uint32_t raw) {
  if (IsSupportedTensorType(raw)) return TensorTypeName(static_cast<TensorType>(raw));
  for (const auto& [n, name] : kOtherGgmlTypes) {
    if (n == raw) return fmt::format("{} (type {})", name, raw);
  }
  return std::to_string(raw);
}

size_t BlockElems(TensorType t) {
  const TypeInfo* i = Info(t);
  PC_CHECK(i != nullptr);
  return i->block_elems;
}

size_t BlockBytes(TensorType t) {
  const TypeInfo* i = Info(t);
  PC_CHECK(i != nullptr);
  return i->block_bytes;
}

size_t RowBytes(TensorType t, size_t n) {
  PC_CHECK(n % BlockElems(t) == 0);
  return n / BlockElems(t) * BlockBytes(t);
}

bool IsQuantized(TensorType t) { return BlockElems(t) > 1; }

}  // namespace pc
