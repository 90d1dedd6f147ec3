// Models split into shards by gguf-split: the first shard holds the
// metadata (and perhaps tensors), each shard its own tensors and the keys
// split.no (0-based), split.count and split.tensors.count (the total).
#include <fmt/format.h>

#include <optional>

#include "gguf/gguf.h"

namespace pc {
namespace {

struct SplitInfo {
  int64_t no = 0, count = 1, tensors = -1;
};

Result<SplitInfo> ReadSplit(const GgufFile& f) {
  SplitInfo s;
  if (f.Find("split.count") == nullptr) return s;
  PC_ASSIGN_OR_RETURN(s.count, f.GetInt("split.count"));
  PC_ASSIGN_OR_RETURN(s.no, f.GetInt("split.no"));
  if (f.Find("split.tensors.count") != nullptr) {
    PC_ASSIGN_OR_RETURN(s.tensors, f.GetInt("split.tensors.count"));
  }
  if (s.count < 1 || s.count > 9999 || s.no < 0 || s.no >= s.count) {
    return Errorf("split.no = {} of split.count = {} is out of range", s.no, s.count);
  }
  return s;
}

// The name of shard i (0-based) of `count` beside `path`, which must follow
// gguf-split's pattern <prefix>-NNNNN-of-MMMMM.gguf.
std::optional<std::string> ShardPath(const std::string& path, int64_t i, int64_t count) {
  const std::string tail = fmt::format("-of-{:05d}.gguf", count);
  const size_t at = path.size() >= tail.size() + 6 ? path.size() - tail.size() - 6 : std::string::npos;
  if (at == std::string::npos || path.compare(path.size() - tail.size(), tail.size(), tail) != 0 || path[at] != '-') {
    return std::nullopt;
  }
  for (size_t k = at + 1; k < at + 6; ++k) {
    if (path[k] < '0' || path[k] > '9') return std::nullopt;
  }
  return fmt::format("{}-{:05d}{}", path.substr(0, at), i + 1, tail);
}

}  // namespace

Status GgufFile::AbsorbShard(GgufFile&& shard) {
  for (GgufTensorInfo& t : shard.tensors_) {
    if (tensor_index_.count(t.name)) return Errorf("tensor '{}' is in two shards", t.name);
    tensor_index_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }
  if (shard.file_) shards_.push_back(std::move(shard.file_));
  return OkStatus();
}

Result<GgufFile> GgufFile::OpenModel(const std::string& path) {
  PC_ASSIGN_OR_RETURN(GgufFile first, Open(path));
  Result<SplitInfo> split = ReadSplit(first);
  if (!split.ok()) return Errorf("{}: {}", path, split.status().message());
  if (split->count == 1) return first;
  const std::optional<std::string> first_name = ShardPath(path, 0, split->count);
  if (split->no != 0) {
    return Errorf("{}: this is part {} of {} of a split model: open its first part{}", path, split->no + 1,
                  split->count, first_name ? " (" + *first_name + ")" : "");
  }
  if (!first_name) {
    return Errorf("{}: the first of {} parts of a split model, but not named <prefix>-00001-of-{:05d}.gguf, so "
                  "its other parts cannot be found",
                  path, split->count, split->count);
  }
  for (int64_t i = 1; i < split->count; ++i) {
    const std::string name = *ShardPath(path, i, split->count);
    Result<GgufFile> part = Open(name);
    if (!part.ok()) return Errorf("part {} of {} of the split model: {}", i + 1, split->count, part.status().message());
    Result<SplitInfo> info = ReadSplit(*part);
    if (!info.ok()) return Errorf("{}: {}", name, info.status().message());
    if (info->no != i || info->count != split->count) {
      return Errorf("{}: split.no = {} of split.count = {}, expected part {} of {}", name, info->no, info->count, i + 1,
                    split->count);
    }
    PC_RETURN_IF_ERROR(first.AbsorbShard(std::move(*part)));
  }
  if (split->tensors >= 0 && static_cast<int64_t>(first.tensors_.size()) != split->tensors) {
    return Errorf("{}: the {} parts hold {} tensors, split.tensors.count says {}", path, split->count,
                  first.tensors_.size(), split->tensors);
  }
  return first;
}

}  // namespace pc
