// The x16 kernels at the AVX2 level (traits in qpack_avx2_pair.h). This
// file alone is compiled with -mavx2 -mfma -mf16c; it runs only after
// ActiveIsa() confirmed them.
#include "kernels/qpack_avx2_pair.h"

namespace pc {
namespace {

const X16Kernels kAvx2 = MakeX16Kernels<Avx2Runner<false>>("avx2");

}  // namespace

const X16Kernels* Avx2X16Kernels() { return &kAvx2; }

}  // namespace pc
