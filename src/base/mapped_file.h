// Read-only memory map of a whole file. Movable, not copyable.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "base/status.h"

namespace pc {

class MappedFile {
 public:
  static Result<MappedFile> Open(const std::string& path);
  MappedFile() = default;
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  // Drops the whole pages inside [p, p + n) from this process's resident set
  // (the page cache keeps them; a later read maps them again). For data
  // copied elsewhere, e.g. repacked weights. Safe from any thread.
  void Release(const uint8_t* p, size_t n) const;

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace pc
