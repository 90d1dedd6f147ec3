#include "structured/schema_cache.h"

namespace pc::structured {

Result<std::shared_ptr<const CompiledSchema>> SchemaCache::Get(const nlohmann::ordered_json& schema) {
  std::string key = schema.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  {
    MutexLock lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) {
      ++hits_;
      lru_.splice(lru_.begin(), lru_, it->second.second);
      return it->second.first;
    }
    ++misses_;
  }
  // Compiled outside the lock: a slow schema does not stall other requests.
  auto compiled = CompileJsonSchema(schema);
  if (!compiled.ok() || key.size() > kMaxKeyBytes) return compiled;
  MutexLock lock(mu_);
  if (map_.count(key)) return map_[key].first;
  lru_.push_front(key);
  map_.emplace(std::move(key), std::make_pair(*compiled, lru_.begin()));
  while (map_.size() > capacity_) {
    map_.erase(lru_.back());
    lru_.pop_back();
  }
  return compiled;
}

size_t SchemaCache::hits() const {
  MutexLock lock(mu_);
  return hits_;
}

size_t SchemaCache::misses() const {
  MutexLock lock(mu_);
  return misses_;
}

SchemaCache& SchemaCache::Global() {
  static SchemaCache cache;
  return cache;
}

}  // namespace pc::structured
