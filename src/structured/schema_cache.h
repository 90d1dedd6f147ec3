// Compiled schemas shared across requests, keyed by the schema's text (a
// request stream with one response_format compiles it once).
// Thread-safety: all methods are safe concurrently.
#pragma once
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>

#include "base/mutex.h"
#include <string>
#include <unordered_map>

#include "structured/json_schema.h"

namespace pc::structured {

class SchemaCache {
 public:
  explicit SchemaCache(size_t capacity = 256) : capacity_(capacity) {}
  // The compiled schema, from the cache or compiled now (errors are not kept).
  Result<std::shared_ptr<const CompiledSchema>> Get(const nlohmann::ordered_json& schema);
  size_t hits() const;
  size_t misses() const;
  // The process's cache (the server's).
  static SchemaCache& Global();

 private:
  static constexpr size_t kMaxKeyBytes = 1 << 20;  // bigger schemas compile every time
  mutable Mutex mu_;
  size_t capacity_;
  std::list<std::string> lru_ PC_GUARDED_BY(mu_);  // most recent first
  std::unordered_map<std::string, std::pair<std::shared_ptr<const CompiledSchema>, std::list<std::string>::iterator>> map_
      PC_GUARDED_BY(mu_);
  size_t hits_ PC_GUARDED_BY(mu_) = 0;
  size_t misses_ PC_GUARDED_BY(mu_) = 0;
};

}  // namespace pc::structured
