// The instruction-set levels: names round-trip, every supported level can
// be made active and an unsupported one cannot, and the levels are not a
// chain (AVX-VNNI is not implied by AVX-512: Zen 4 has one, not the other),
// so support follows the CPU's flags level by level.
#include "runtime/cpu_features.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace pc {
namespace {

constexpr Isa kAll[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512};

TEST(CpuFeatures, LevelNamesRoundTripAndUnknownNamesAreRefused) {
  for (Isa isa : kAll) {
    Result<Isa> back = ParseIsa(IsaName(isa));
    ASSERT_TRUE(back.ok()) << IsaName(isa);
    EXPECT_EQ(*back, isa);
  }
  Result<Isa> bad = ParseIsa("avx10");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("avxvnni"), std::string::npos) << bad.status().message();
}

TEST(CpuFeatures, SupportFollowsTheFlagsLevelByLevel) {
  const CpuFeatures& f = DetectCpuFeatures();
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  EXPECT_TRUE(IsaSupported(Isa::kScalar));
  EXPECT_EQ(IsaSupported(Isa::kAvx2), avx2);
  EXPECT_EQ(IsaSupported(Isa::kAvxVnni), avx2 && f.avx_vnni);
  EXPECT_EQ(IsaSupported(Isa::kAvx512), avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni);
  const std::vector<Isa> levels = SupportedIsas();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels.front(), Isa::kScalar);
  EXPECT_TRUE(std::is_sorted(levels.begin(), levels.end()));
  EXPECT_EQ(levels.back(), BestSupportedIsa());
  for (Isa isa : kAll) {
    EXPECT_EQ(std::count(levels.begin(), levels.end(), isa), IsaSupported(isa) ? 1 : 0) << IsaName(isa);
  }
}

TEST(CpuFeatures, OnlySupportedLevelsCanBeMadeActive) {
  for (Isa isa : kAll) {
    const Status st = SetActiveIsa(isa);
    EXPECT_EQ(st.ok(), IsaSupported(isa)) << IsaName(isa) << ": " << st.message();
    if (st.ok()) {
      Result<Isa> active = ActiveIsa();
      ASSERT_TRUE(active.ok());
      EXPECT_EQ(*active, isa);
    }
  }
  ASSERT_TRUE(SetActiveIsa(BestSupportedIsa()).ok());
}

}  // namespace
}  // namespace pc
