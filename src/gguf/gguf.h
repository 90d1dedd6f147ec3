// GGUF reader (versions 2 and 3) and writer.
//
// The reader treats the file as untrusted: every count, length, offset and
// shape is checked against the bytes actually present before use, so a
// corrupt file yields an error naming the problem, never a crash or a huge
// allocation. Tensor data is referenced in place (mmap), not copied.
// Thread-safety: a loaded GgufFile is immutable and may be read concurrently.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "base/status.h"
#include "gguf/gguf_types.h"

namespace pc {

struct GgufTensorInfo {
  std::string name;
  TensorType type = TensorType::kF32;
  std::vector<uint64_t> dims;  // dims[0] is the innermost (row length)
  uint64_t offset = 0;         // relative to the data section
  uint64_t size_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapped file

  uint64_t NumElements() const;
  uint64_t Rows() const { return NumElements() / (dims.empty() ? 1 : dims[0]); }
};

class GgufFile {
 public:
  static Result<GgufFile> Open(const std::string& path);
  // A model file, which may be the first of the shards gguf-split writes
  // (`split.count` N > 1, named <prefix>-00001-of-0000N.gguf): the others
  // are opened beside it and their tensors joined to the first's (the
  // metadata is the first shard's, as the splitter writes it). Any other
  // file opens as Open does; a later shard is refused, naming the first.
  static Result<GgufFile> OpenModel(const std::string& path);
  // Parses bytes that must outlive the returned object.
  static Result<GgufFile> Parse(std::span<const uint8_t> bytes);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  // Drops mapped pages of [p, p + n) from the resident set (MappedFile::
  // Release); a no-op for parsed bytes the caller owns.
  void ReleasePages(const uint8_t* p, size_t n) const {
    if (file_) file_->Release(p, n);
    for (const auto& shard : shards_) shard->Release(p, n);  // each clamps to its own range
  }

  const GgufValue* Find(const std::string& key) const;
  const GgufTensorInfo* FindTensor(const std::string& name) const;

  // Typed getters: error if missing or of an incompatible type.
  Result<std::string> GetString(const std::string& key) const;
  Result<int64_t> GetInt(const std::string& key) const;
  Result<double> GetFloat(const std::string& key) const;
  Result<bool> GetBool(const std::string& key) const;
  Result<std::vector<std::string>> GetStringArray(const std::string& key) const;
  Result<std::vector<double>> GetFloatArray(const std::string& key) const;
  Result<std::vector<int64_t>> GetIntArray(const std::string& key) const;

 private:
  // Appends a later shard's tensors (and keeps its mapping alive).
  Status AbsorbShard(GgufFile&& shard);

  std::shared_ptr<MappedFile> file_;  // keeps tensor data alive
  std::vector<std::shared_ptr<MappedFile>> shards_;  // the later shards of a split model
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::map<std::string, size_t> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;

  friend class GgufParser;
};

// Builds a GGUF file. Metadata and tensors are written in insertion order.
class GgufWriter {
 public:
  explicit GgufWriter(uint64_t alignment = 32) : alignment_(alignment) {}
  void Set(const std::string& key, GgufValue value);
  // data must hold RowBytes(type, dims[0]) * rows bytes; it is copied.
  Status AddTensor(const std::string& name, TensorType type, std::vector<uint64_t> dims,
                   std::span<const uint8_t> data);
  Status WriteFile(const std::string& path) const;
  std::vector<uint8_t> Serialize() const;

 private:
  std::vector<uint8_t> Header() const;
  struct Tensor {
    std::string name;
    TensorType type;
    std::vector<uint64_t> dims;
    std::vector<uint8_t> data;
  };
  uint64_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace pc
