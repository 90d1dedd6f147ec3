// A value read back from Redis (or any shared store): opened with a keyed
// and an unkeyed seal, then installed into a pool as the engine would. Any
// bytes must be refused or give a payload of the right shape, never crash;
// a value not sealed under the secret must never open.
#include <cstddef>
#include <cstdint>
#include <span>

#include "kvcache/payload_seal.h"
#include "kvcache/prefix_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const pc::PayloadSeal keyed = *pc::PayloadSeal::FromSecret("fuzzing secret, sixteen+ bytes");
  // One layer, one K/V head of 4 elements, a 64-token context.
  static const pc::KvShape shape{1, 4, 64};
  static pc::PrefixCache cache(shape, pc::Hash128{3, 4}, pc::CacheOptions{2, pc::KvDtype::kF16, 4096});
  const pc::Hash128 key{5, 6};
  const std::span<const uint8_t> value(data, size);
  std::vector<uint8_t> payload;
  if (keyed.Open(key, value, &payload)) __builtin_trap();  // forging HMAC-SHA256 is not the fuzzer's to do
  if (pc::PayloadSeal().Open(key, value, &payload)) {
    const int32_t tokens[2] = {1, 2};
    const pc::PrefixCache::Install got = cache.InstallBlock(key, payload, tokens);
    if (got.installed()) {
      cache.ReleaseBlock(got.block);
      if (payload.size() != cache.payload_bytes()) __builtin_trap();
    } else if (got.result == pc::PrefixCache::Install::Result::kMalformed && payload.size() == cache.payload_bytes()) {
      __builtin_trap();  // a payload of the right size is never called malformed
    }
  }
  return 0;
}
