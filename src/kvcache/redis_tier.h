// The Redis tier (hiredis): the store users already run, shared by several
// servers. Key = namespace ":" layout fingerprint ":" block hash (hex);
// value = seal tag (32 bytes, PayloadSeal: an HMAC-SHA256 under the tier
// secret, so a writer without it cannot plant K/V) + payload; a value whose
// tag does not verify is refused and counted corrupt. Every SET carries a TTL. Each
// batch call is one pipelined round trip. A connection or command failure
// (refused, timeout, error reply) marks the tier unhealthy: calls answer
// "nothing stored / nothing found" at once until a reconnect succeeds, tried
// after a backoff that doubles from 0.25 s to 30 s.
// Thread-safety: all methods lock one mutex (one connection).
#pragma once
#include <string>

#include "base/status.h"

#include "base/mutex.h"
#include "kvcache/payload_seal.h"
#include "kvcache/tier.h"

struct redisContext;

namespace pc {

struct RedisTierOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string ns = "promptcache";
  int ttl_s = 3600;
  int timeout_ms = 250;  // connect and per-command
  Hash128 fingerprint;
  PayloadSeal seal;
};

// Fills host and port from "HOST:PORT" (or "HOST": port 6379).
Status ParseRedisAddress(const std::string& host_port, RedisTierOptions* o);

class RedisTier : public KvTier {
 public:
  explicit RedisTier(RedisTierOptions opt);
  ~RedisTier() override;
  const std::string& name() const override { return name_; }
  void Insert(std::span<const BlockPayload> blocks) override;
  size_t CountLeading(std::span<const Hash128> keys) override;
  size_t LoadInto(std::span<const Hash128> keys, std::vector<std::vector<uint8_t>>* out) override;
  void Erase(std::span<const Hash128> keys) override;
  TierStats stats() const override;
  void Probe() override;

 private:
  bool EnsureConnectedLocked() PC_REQUIRES(mu_);
  void FailLocked() PC_REQUIRES(mu_);
  std::string Key(const Hash128& h) const;

  std::string name_ = "redis";
  RedisTierOptions opt_;
  std::string prefix_;
  mutable Mutex mu_;
  redisContext* ctx_ PC_GUARDED_BY(mu_) = nullptr;
  int64_t retry_at_ns_ PC_GUARDED_BY(mu_) = 0;
  double backoff_s_ PC_GUARDED_BY(mu_) = 0.25;
  TierStats stats_ PC_GUARDED_BY(mu_);
};

}  // namespace pc
