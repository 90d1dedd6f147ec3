#include "base/tensor_type.h"

#include "base/check.h"

namespace pc {

const char* TensorTypeName(TensorType t) {
  switch (t) {
    case TensorType::kF32: return "f32";
    case TensorType::kF16: return "f16";
    case TensorType::kQ4_0: return "q4_0";
    case TensorType::kQ8_0: return "q8_0";
    case TensorType::kBF16: return "bf16";
    case TensorType::kQ6_K: return "q6_k";
  }
  return "invalid";
}

Result<TensorType> ParseTensorType(const std::string& name) {
  for (TensorType t : {TensorType::kF32, TensorType::kF16, TensorType::kBF16, TensorType::kQ8_0,
                       TensorType::kQ4_0}) {
    if (name == TensorTypeName(t)) return t;
  }
  return Errorf("unknown tensor type '{}' (expected f32, f16, bf16, q8_0 or q4_0)", name);
}

bool IsSupportedTensorType(uint32_t raw) {
  return raw == 0 || raw == 1 || raw == 2 || raw == 8 || raw == 14 || raw == 30;
}

size_t BlockElems(TensorType t) {
  if (t == TensorType::kQ6_K) return 256;
  return (t == TensorType::kQ4_0 || t == TensorType::kQ8_0) ? 32 : 1;
}

size_t BlockBytes(TensorType t) {
  switch (t) {
    case TensorType::kF32: return 4;
    case TensorType::kF16:
    case TensorType::kBF16: return 2;
    case TensorType::kQ4_0: return 18;  // fp16 scale + 16 bytes of nibbles
    case TensorType::kQ8_0: return 34;  // fp16 scale + 32 int8
    case TensorType::kQ6_K: return 210;  // 128 low nibbles, 64 high bits, 16 scales, fp16 d
  }
  PC_CHECK(false);
  return 0;
}

size_t RowBytes(TensorType t, size_t n) {
  PC_CHECK(n % BlockElems(t) == 0);
  return n / BlockElems(t) * BlockBytes(t);
}

}  // namespace pc
