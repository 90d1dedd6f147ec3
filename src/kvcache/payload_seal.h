// Integrity of spill-tier entries. With a secret (serve --tier-secret-file)
// every entry carries HMAC-SHA256(secret, key || payload): whoever can write
// to a shared tier (Redis, a disk shared between hosts) but does not hold
// the secret cannot make us load K/V they chose, for any key or tenant.
// Without one, an unkeyed XXH3-128 checksum catches accidental corruption
// only; the server refuses shared tiers in that mode unless the operator
// says --tier-trust-unauthenticated.
// Thread-safety: immutable after construction; Tag/Verify may run
// concurrently.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/hash128.h"
#include "base/status.h"

namespace pc {

class PayloadSeal {
 public:
  static constexpr size_t kTagBytes = 32;
  using Tag = std::array<uint8_t, kTagBytes>;

  PayloadSeal() = default;  // unkeyed
  // The secret: the file's bytes (trailing newlines dropped), at least 16.
  static Result<PayloadSeal> FromSecretFile(const std::string& path);
  static Result<PayloadSeal> FromSecret(std::string secret);

  bool keyed() const { return !secret_.empty(); }
  Tag Compute(const Hash128& key, std::span<const uint8_t> payload) const;
  // Constant-time comparison for the keyed form.
  bool Verify(const Hash128& key, std::span<const uint8_t> payload, std::span<const uint8_t> tag) const;
  // A stored value: tag, then payload (the Redis tier's values).
  std::string Seal(const Hash128& key, std::span<const uint8_t> payload) const;
  // The payload of a stored value if its tag verifies, else false (short
  // values included). Untrusted input: never reads past value.
  bool Open(const Hash128& key, std::span<const uint8_t> value, std::vector<uint8_t>* payload) const;

 private:
  std::string secret_;
};

}  // namespace pc
