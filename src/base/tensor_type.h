// Tensor element types we support, numbered as ggml (and so GGUF) numbers them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace pc {

// Weight types (readable and writable), activation-only types (kQ8_K, and
// kQ8A, which is ours: a block of 32 int8 with a float scale and the
// integer sum, never found in a file).
enum class TensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ4_NL = 20,
  kIQ4_XS = 23,
  kBF16 = 30,
  kMXFP4 = 39,
  kQ8A = 0x10000,
};
const char* TensorTypeName(TensorType t);
// "f32", "q4_k", ... (weight types only).
Result<TensorType> ParseTensorType(const std::string& name);
// Every type a GGUF tensor may have here, in ggml's order.
const std::vector<TensorType>& WeightTensorTypes();
bool IsSupportedTensorType(uint32_t raw);
// A name for a ggml type number we do not support ("iq2_xxs (type 16)", "42").
std::string RawTensorTypeName(uint32_t raw);
// Elements per block (1 for float types, 32 or 256 for block formats) and
// bytes per block.
size_t BlockElems(TensorType t);
size_t BlockBytes(TensorType t);
// The largest BlockBytes of any type (Q8_K), for block buffers on the stack.
constexpr size_t kMaxBlockBytes = 292;
// Bytes of a row of n elements; n must be a multiple of BlockElems(t).
size_t RowBytes(TensorType t, size_t n);
bool IsQuantized(TensorType t);

}  // namespace pc
