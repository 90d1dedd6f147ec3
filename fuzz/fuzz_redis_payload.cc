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
  static pc::ModelConfig config = [] {
    pc::ModelConfig c;
    c.n_layer = 1;
    c.n_kv_head = 1;
    c.head_dim = 4;
    c.n_head = 1;
    c.n_embd = 4;
    c.n_ctx = 64;
    return c;
  }();
  static pc::PrefixCache cache(config, pc::Hash128{3, 4}, pc::CacheOptions{2, pc::KvDtype::kF16, 4096});
  const pc::Hash128 key{5, 6};
  const std::span<const uint8_t> value(data, size);
  std::vector<uint8_t> payload;
  if (keyed.Open(key, value, &payload)) __builtin_trap();  // forging HMAC-SHA256 is not the fuzzer's to do
  if (pc::PayloadSeal().Open(key, value, &payload)) {
    const int32_t tokens[2] = {1, 2};
    std::optional<int32_t> b = cache.InstallBlock(key, payload, tokens);
    if (b) {
      cache.ReleaseBlock(*b);
      if (payload.size() != cache.payload_bytes()) __builtin_trap();
    }
  }
  return 0;
}
