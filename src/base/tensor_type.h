// Tensor element types we support, numbered as ggml (and so GGUF) numbers them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace pc {

// Q6_K is read (not written): quantizers commonly store the output matrix of
// Q4_0 models in it.
enum class TensorType : uint32_t { kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ8_0 = 8, kQ6_K = 14, kBF16 = 30 };
const char* TensorTypeName(TensorType t);
Result<TensorType> ParseTensorType(const std::string& name);  // "f32", "q8_0", ...
bool IsSupportedTensorType(uint32_t raw);
// Elements per block (1 for float types, 32 for Q8_0/Q4_0) and bytes per block.
size_t BlockElems(TensorType t);
size_t BlockBytes(TensorType t);
// Bytes of a row of n elements; n must be a multiple of BlockElems(t).
size_t RowBytes(TensorType t, size_t n);

}  // namespace pc
