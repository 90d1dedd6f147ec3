// 128-bit XXH3 hashing. Stable across processes and machines (keys of cached
// KV outlive the process), unlike std::hash.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace pc {

struct Hash128 {
  uint64_t lo = 0;
  uint64_t hi = 0;
  bool operator==(const Hash128&) const = default;
  std::string Hex() const;
};

// For unordered containers (the low bits are already well mixed).
struct Hash128Hasher {
  size_t operator()(const Hash128& h) const { return static_cast<size_t>(h.lo ^ (h.hi * 0x9e3779b97f4a7c15ull)); }
};

Hash128 HashBytes(std::span<const uint8_t> bytes, uint64_t seed = 0);

}  // namespace pc
