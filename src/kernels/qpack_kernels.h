// Tables of x16 kernels (qpack.h) per instruction-set level.
// Thread-safety: immutable tables.
#pragma once
#include <iterator>
#include <utility>

#include "kernels/qpack.h"
#include "runtime/cpu_features.h"

namespace pc {

// The types that have x16 kernels: every quantized weight type.
constexpr TensorType kX16Types[] = {TensorType::kQ8_0,   TensorType::kQ4_0, TensorType::kQ4_1, TensorType::kQ5_0,
                                    TensorType::kQ5_1,   TensorType::kIQ4_NL, TensorType::kQ2_K, TensorType::kQ3_K,
                                    TensorType::kQ4_K,   TensorType::kQ5_K, TensorType::kQ6_K, TensorType::kIQ4_XS,
                                    TensorType::kMXFP4};
constexpr int kNumX16Types = static_cast<int>(std::size(kX16Types));

constexpr int X16Index(TensorType t) {
  for (int i = 0; i < kNumX16Types; ++i) {
    if (kX16Types[i] == t) return i;
  }
  return -1;
}

struct X16Kernels {
  const char* name;
  X16Kernel kernel[kNumX16Types];
  // Null where a level has no pair kernel for a type.
  X16PairKernel pair[kNumX16Types] = {};
  // Null for types without an x16 layout.
  X16Kernel For(TensorType t) const {
    const int i = X16Index(t);
    return i < 0 ? nullptr : kernel[i];
  }
  X16PairKernel PairFor(TensorType t) const {
    const int i = X16Index(t);
    return i < 0 ? nullptr : pair[i];
  }
};

// R::Run<T> is the kernel of type T.
template <class R, int... I>
constexpr X16Kernels MakeX16KernelsImpl(const char* name, std::integer_sequence<int, I...>) {
  return X16Kernels{name, {&R::template Run<kX16Types[I]>...}};
}
template <class R>
constexpr X16Kernels MakeX16Kernels(const char* name) {
  return MakeX16KernelsImpl<R>(name, std::make_integer_sequence<int, kNumX16Types>{});
}

// Null where this binary was built without that level.
const X16Kernels* Avx2X16Kernels();
const X16Kernels* AvxVnniX16Kernels();
const X16Kernels* Avx512X16Kernels();
// The best table at or below isa; null at the scalar level (which computes
// the file's layout with QuantDot and never repacks).
const X16Kernels* X16KernelsFor(Isa isa);

}  // namespace pc
