// The x16 kernels at the AVX-VNNI level: the AVX2 traits with vpdpbusd
// (VEX form) for every product (qpack_avx2_pair.h). This file alone is
// compiled with -mavxvnni; it runs only after ActiveIsa() confirmed it.
#include "kernels/qpack_avx2_pair.h"

namespace pc {
namespace {

const X16Kernels kAvxVnni = MakeX16Kernels<Avx2Runner<true>>("avxvnni");

}  // namespace

const X16Kernels* AvxVnniX16Kernels() { return &kAvxVnni; }

}  // namespace pc
