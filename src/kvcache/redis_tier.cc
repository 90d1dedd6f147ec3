#include "kvcache/redis_tier.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "base/clock.h"

namespace pc {

namespace {
struct ReplyDeleter {
  void operator()(redisReply* r) const {
    if (r) freeReplyObject(r);
  }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// Reads one pipelined reply; nullptr on a connection error.
Reply GetReply(redisContext* c) {
  void* r = nullptr;
  if (redisGetReply(c, &r) != REDIS_OK) return nullptr;
  return Reply(static_cast<redisReply*>(r));
}
}  // namespace

Status ParseRedisAddress(const std::string& host_port, RedisTierOptions* o) {
  const size_t colon = host_port.rfind(':');
  o->host = host_port.substr(0, colon);
  if (colon == std::string::npos) return OkStatus();
  char* end = nullptr;
  const long port = std::strtol(host_port.c_str() + colon + 1, &end, 10);
  if (o->host.empty() || *end != '\0' || end == host_port.c_str() + colon + 1 || port < 1 || port > 65535) {
    return Errorf("a Redis address must be HOST:PORT, got '{}'", host_port);
  }
  o->port = static_cast<int>(port);
  return OkStatus();
}

RedisTier::RedisTier(RedisTierOptions opt) : opt_(std::move(opt)) {
  prefix_ = opt_.ns + ":" + opt_.fingerprint.Hex() + ":";
  MutexLock lock(mu_);
  EnsureConnectedLocked();
}

RedisTier::~RedisTier() {
  if (ctx_) redisFree(ctx_);
}

std::string RedisTier::Key(const Hash128& h) const { return prefix_ + h.Hex(); }

void RedisTier::FailLocked() {
  ++stats_.num_errors;
  stats_.healthy = false;
  if (ctx_) redisFree(ctx_);
  ctx_ = nullptr;
  retry_at_ns_ = NowNs() + static_cast<int64_t>(backoff_s_ * 1e9);
  backoff_s_ = std::min(backoff_s_ * 2, 30.0);
}

bool RedisTier::EnsureConnectedLocked() {
  if (ctx_) return true;
  if (NowNs() < retry_at_ns_) return false;
  const timeval tv{opt_.timeout_ms / 1000, (opt_.timeout_ms % 1000) * 1000};
  ctx_ = redisConnectWithTimeout(opt_.host.c_str(), opt_.port, tv);
  if (ctx_ == nullptr || ctx_->err || redisSetTimeout(ctx_, tv) != REDIS_OK) {
    FailLocked();
    return false;
  }
  stats_.healthy = true;
  backoff_s_ = 0.25;
  return true;
}

void RedisTier::Insert(std::span<const BlockPayload> blocks) {
  MutexLock lock(mu_);
  if (blocks.empty()) return;
  if (!EnsureConnectedLocked()) {
    stats_.num_dropped += blocks.size();
    return;
  }
  std::string value;
  for (const BlockPayload& b : blocks) {
    value = opt_.seal.Seal(b.key, b.bytes);
    const std::string key = Key(b.key), ttl = std::to_string(opt_.ttl_s);
    const char* argv[] = {"SET", key.c_str(), value.data(), "EX", ttl.c_str()};
    const size_t lens[] = {3, key.size(), value.size(), 2, ttl.size()};
    redisAppendCommandArgv(ctx_, 5, argv, lens);
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    Reply r = GetReply(ctx_);
    if (!r) {
      stats_.num_dropped += blocks.size() - i;
      FailLocked();
      return;
    }
    if (r->type == REDIS_REPLY_ERROR) ++stats_.num_dropped;  // e.g. maxmemory: refused, fine
    else ++stats_.num_inserted;
  }
}

size_t RedisTier::CountLeading(std::span<const Hash128> keys) {
  MutexLock lock(mu_);
  if (keys.empty() || !EnsureConnectedLocked()) return 0;
  for (const Hash128& k : keys) {
    const std::string key = Key(k);
    const char* argv[] = {"EXISTS", key.c_str()};
    const size_t lens[] = {6, key.size()};
    redisAppendCommandArgv(ctx_, 2, argv, lens);
  }
  size_t n = 0;
  bool leading = true;
  for (size_t i = 0; i < keys.size(); ++i) {
    Reply r = GetReply(ctx_);
    if (!r) {
      FailLocked();
      return 0;
    }
    if (leading && r->type == REDIS_REPLY_INTEGER && r->integer == 1) ++n;
    else leading = false;
  }
  return n;
}

size_t RedisTier::LoadInto(std::span<const Hash128> keys, std::vector<std::vector<uint8_t>>* out) {
  MutexLock lock(mu_);
  size_t n = 0;
  if (keys.empty() || !EnsureConnectedLocked()) return n;
  for (const Hash128& k : keys) {
    const std::string key = Key(k);
    const char* argv[] = {"GET", key.c_str()};
    const size_t lens[] = {3, key.size()};
    redisAppendCommandArgv(ctx_, 2, argv, lens);
  }
  bool leading = true;
  for (size_t i = 0; i < keys.size(); ++i) {
    Reply r = GetReply(ctx_);  // read every reply to keep the pipeline in step
    if (!r) {
      FailLocked();
      return n;
    }
    if (!leading) continue;
    if (r->type != REDIS_REPLY_STRING) {
      leading = false;  // gone (expired, evicted) since CountLeading
      continue;
    }
    const std::span<const uint8_t> value(reinterpret_cast<const uint8_t*>(r->str), r->len);
    if (!opt_.seal.Open(keys[i], value, &LoadSlot(out, n))) {
      ++stats_.num_corrupt;  // short, tampered, or sealed under another secret
      leading = false;
      continue;
    }
    ++stats_.num_loaded;
    ++n;
  }
  return n;
}

void RedisTier::Probe() {
  MutexLock lock(mu_);
  if (!EnsureConnectedLocked()) return;  // reconnects once the backoff has passed
  Reply r(static_cast<redisReply*>(redisCommand(ctx_, "PING")));
  if (!r || r->type == REDIS_REPLY_ERROR) FailLocked();
}

void RedisTier::Erase(std::span<const Hash128> keys) {
  MutexLock lock(mu_);
  if (keys.empty() || !EnsureConnectedLocked()) return;
  for (const Hash128& k : keys) {
    const std::string key = Key(k);
    const char* argv[] = {"DEL", key.c_str()};
    const size_t lens[] = {3, key.size()};
    redisAppendCommandArgv(ctx_, 2, argv, lens);
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!GetReply(ctx_)) {
      FailLocked();
      return;
    }
  }
}

TierStats RedisTier::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

}  // namespace pc
