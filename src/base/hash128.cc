#include "base/hash128.h"

#include <fmt/format.h>
#include <xxhash.h>

namespace pc {

std::string Hash128::Hex() const { return fmt::format("{:016x}{:016x}", hi, lo); }

Hash128 HashBytes(std::span<const uint8_t> bytes, uint64_t seed) {
  const XXH128_hash_t h = XXH3_128bits_withSeed(bytes.data(), bytes.size(), seed);
  return Hash128{h.low64, h.high64};
}

}  // namespace pc
