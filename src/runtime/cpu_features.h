// CPU feature detection and the instruction-set level kernels dispatch on.
// Thread-safe: the detected level is computed once (first call) and cached.
#pragma once
#include <string>

#include "base/status.h"

namespace pc {

// Ordered: a level implies the ones below it were usable on this machine.
// (AMX is detected and reported, but no kernel uses it: no level of its own.)
enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512vnni = false,
       avx512bf16 = false, avx512fp16 = false;
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;
};

const CpuFeatures& DetectCpuFeatures();
// Highest level this machine (and OS) supports.
Isa BestSupportedIsa();
const char* IsaName(Isa isa);
Result<Isa> ParseIsa(const std::string& name);
// The level in force: PROMPTCACHE_ISA if set (error if unknown or
// unsupported here), else the best supported. Computed once.
Result<Isa> ActiveIsa();
// Overrides the active level (tests run every level this machine supports).
Status SetActiveIsa(Isa isa);
std::string CpuFeatureSummary();

}  // namespace pc
