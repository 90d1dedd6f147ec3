#include "runtime/cpu_features.h"

#include <cpuid.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "base/mutex.h"

namespace pc {
namespace {

uint64_t ReadXcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

CpuFeatures Detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  if (!osxsave) return f;
  const uint64_t xcr0 = ReadXcr0();
  const bool ymm_os = (xcr0 & 0x6) == 0x6;
  const bool zmm_os = (xcr0 & 0xe6) == 0xe6;
  f.fma = ymm_os && ((c >> 12) & 1);
  f.f16c = ymm_os && ((c >> 29) & 1);
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = ymm_os && ((b >> 5) & 1);
  f.avx512f = zmm_os && ((b >> 16) & 1);
  f.avx512bw = zmm_os && ((b >> 30) & 1);
  f.avx512vl = zmm_os && ((b >> 31) & 1);
  f.avx512vnni = zmm_os && ((c >> 11) & 1);
  f.avx512fp16 = zmm_os && ((d >> 23) & 1);
  // AMX as the OS enables it (XCR0 tile bits); reported, not used.
  const bool tile_os = (xcr0 & (3ull << 17)) == (3ull << 17);
  f.amx_bf16 = tile_os && ((d >> 22) & 1);
  f.amx_tile = tile_os && ((d >> 24) & 1);
  f.amx_int8 = tile_os && ((d >> 25) & 1);
  unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  __cpuid_count(7, 1, a1, b1, c1, d1);
  f.avx512bf16 = zmm_os && ((a1 >> 5) & 1);
  f.avx_vnni = ymm_os && ((a1 >> 4) & 1);
  return f;
}

std::once_flag g_once;
Mutex g_mu;
Result<Isa> g_active PC_GUARDED_BY(g_mu) = Isa::kScalar;

}  // namespace

const CpuFeatures& DetectCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

bool IsaSupported(Isa isa) {
  const CpuFeatures& f = DetectCpuFeatures();
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2: return avx2;
    case Isa::kAvxVnni: return avx2 && f.avx_vnni;
    // The AVX-512 kernels multiply bytes with VNNI (Cascade Lake and later,
    // Zen 4): a CPU with AVX-512 but no VNNI runs an AVX2 level.
    case Isa::kAvx512: return avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni;
  }
  return false;
}

std::vector<Isa> SupportedIsas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512}) {
    if (IsaSupported(isa)) out.push_back(isa);
  }
  return out;
}

Isa BestSupportedIsa() { return SupportedIsas().back(); }

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvxVnni: return "avxvnni";
    case Isa::kAvx512: return "avx512";
  }
  return "?";
}

Result<Isa> ParseIsa(const std::string& name) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512}) {
    if (name == IsaName(isa)) return isa;
  }
  return Errorf("unknown instruction set '{}' (expected scalar, avx2, avxvnni or avx512)", name);
}

Result<Isa> ActiveIsa() {
  std::call_once(g_once, [] {
    MutexLock lock(g_mu);
    const char* env = std::getenv("PROMPTCACHE_ISA");
    if (env == nullptr || *env == 0) {
      g_active = BestSupportedIsa();
      return;
    }
    Result<Isa> isa = ParseIsa(env);
    if (!isa.ok()) {
      g_active = Errorf("PROMPTCACHE_ISA: {}", isa.status().message());
    } else if (!IsaSupported(*isa)) {
      g_active = Errorf("PROMPTCACHE_ISA={} is not supported on this CPU (best: {})", env,
                        IsaName(BestSupportedIsa()));
    } else {
      g_active = *isa;
    }
  });
  MutexLock lock(g_mu);
  return g_active;
}

Status SetActiveIsa(Isa isa) {
  (void)ActiveIsa();
  if (!IsaSupported(isa)) {
    return Errorf("{} is not supported on this CPU (best: {})", IsaName(isa),
                  IsaName(BestSupportedIsa()));
  }
  MutexLock lock(g_mu);
  g_active = isa;
  return OkStatus();
}

std::string CpuFeatureSummary() {
  const CpuFeatures& f = DetectCpuFeatures();
  std::string s;
  auto add = [&s](bool on, const char* name) {
    if (on) s += (s.empty() ? "" : " ") + std::string(name);
  };
  add(f.avx2, "avx2"); add(f.fma, "fma"); add(f.f16c, "f16c"); add(f.avx_vnni, "avx-vnni");
  add(f.avx512f, "avx512f"); add(f.avx512bw, "avx512bw"); add(f.avx512vl, "avx512vl");
  add(f.avx512vnni, "avx512vnni"); add(f.avx512bf16, "avx512bf16");
  add(f.avx512fp16, "avx512fp16"); add(f.amx_tile, "amx-tile"); add(f.amx_bf16, "amx-bf16");
  add(f.amx_int8, "amx-int8");
  return s.empty() ? "none" : s;
}

}  // namespace pc
