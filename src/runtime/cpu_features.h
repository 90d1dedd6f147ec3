// CPU feature detection and the instruction-set level kernels dispatch on.
// Thread-safe: the detected level is computed once (first call) and cached.
#pragma once
#include <string>
#include <vector>

#include "base/status.h"

namespace pc {

// Ordered by preference. kAvxVnni is AVX2 plus the VEX-encoded byte dot
// product (Intel Alder Lake and later, AMD Zen 5): the AVX2 kernels with
// the prefill matmul multiplying bytes by VNNI. Every level implies AVX2,
// but not every CPU with kAvx512 has kAvxVnni (Zen 4, Ice Lake lack the VEX
// form): ask IsaSupported, never compare against BestSupportedIsa.
// (AMX is detected and reported, but no kernel uses it: no level of its own.)
enum class Isa { kScalar = 0, kAvx2 = 1, kAvxVnni = 2, kAvx512 = 3 };

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false, avx_vnni = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512vnni = false,
       avx512bf16 = false, avx512fp16 = false;
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;
};

const CpuFeatures& DetectCpuFeatures();
// Highest level this machine (and OS) supports.
Isa BestSupportedIsa();
// Whether this machine can run `isa`'s kernels.
bool IsaSupported(Isa isa);
// Every level this machine supports, lowest first (tests run each).
std::vector<Isa> SupportedIsas();
const char* IsaName(Isa isa);
Result<Isa> ParseIsa(const std::string& name);
// The level in force: PROMPTCACHE_ISA if set (error if unknown or
// unsupported here), else the best supported. Computed once.
Result<Isa> ActiveIsa();
// Overrides the active level (tests run every level this machine supports).
Status SetActiveIsa(Isa isa);
std::string CpuFeatureSummary();

}  // namespace pc
