#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "base/check.h"
#include "gguf/gguf.h"

namespace pc {
namespace {

constexpr uint32_t kMagic = 0x46554747;
constexpr uint32_t kVersion = 3;

class Sink {
 public:
  template <typename T>
  void Put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out.insert(out.end(), p, p + sizeof(T));
  }
  void PutString(const std::string& s) {
    Put<uint64_t>(s.size());
    out.insert(out.end(), s.begin(), s.end());
  }
  void PutScalar(const GgufScalar& s) {
    std::visit(
        [this](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::string>) {
            PutString(v);
          } else if constexpr (std::is_same_v<V, bool>) {
            Put<uint8_t>(v ? 1 : 0);
          } else {
            Put<V>(v);
          }
        },
        s);
  }
  void PadTo(uint64_t alignment) {
    while (out.size() % alignment != 0) out.push_back(0);
  }
  std::vector<uint8_t> out;
};

}  // namespace

void GgufWriter::Set(const std::string& key, GgufValue value) {
  for (auto& kv : metadata_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

Status GgufWriter::AddTensor(const std::string& name, TensorType type, std::vector<uint64_t> dims,
                             std::span<const uint8_t> data) {
  if (dims.empty() || dims.size() > 4) return Errorf("tensor '{}': bad rank {}", name, dims.size());
  if (dims[0] % BlockElems(type) != 0) return Errorf("tensor '{}': row length not a block multiple", name);
  uint64_t rows = 1;
  for (size_t i = 1; i < dims.size(); ++i) rows *= dims[i];
  if (data.size() != RowBytes(type, dims[0]) * rows) {
    return Errorf("tensor '{}': {} bytes given, shape needs {}", name, data.size(),
                  RowBytes(type, dims[0]) * rows);
  }
  tensors_.push_back({name, type, std::move(dims), {data.begin(), data.end()}});
  return OkStatus();
}

// Header, metadata and tensor infos; tensor data follows at the aligned end.
static std::vector<uint8_t> SerializeHeader(
    uint64_t alignment, const std::vector<std::pair<std::string, GgufValue>>& metadata,
    const std::vector<std::tuple<std::string, TensorType, std::vector<uint64_t>, uint64_t>>& infos) {
  Sink s;
  s.Put(kMagic);
  s.Put(kVersion);
  s.Put<uint64_t>(infos.size());
  s.Put<uint64_t>(metadata.size());
  for (const auto& [key, v] : metadata) {
    s.PutString(key);
    s.Put(static_cast<uint32_t>(v.type));
    if (v.type != GgufType::kArray) {
      s.PutScalar(v.scalar);
      continue;
    }
    s.Put(static_cast<uint32_t>(v.elem_type));
    s.Put<uint64_t>(v.array.size());
    for (const auto& e : v.array) {
      PC_CHECK(ScalarType(e) == v.elem_type);
      s.PutScalar(e);
    }
  }
  for (const auto& [name, type, dims, offset] : infos) {
    s.PutString(name);
    s.Put<uint32_t>(dims.size());
    for (uint64_t d : dims) s.Put(d);
    s.Put(static_cast<uint32_t>(type));
    s.Put(offset);
  }
  s.PadTo(alignment);
  return std::move(s.out);
}

std::vector<uint8_t> GgufWriter::Header() const {
  std::vector<std::tuple<std::string, TensorType, std::vector<uint64_t>, uint64_t>> infos;
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    infos.emplace_back(t.name, t.type, t.dims, offset);
    offset += (t.data.size() + alignment_ - 1) / alignment_ * alignment_;
  }
  auto meta = metadata_;
  if (alignment_ != 32) {
    bool found = false;
    for (auto& kv : meta) found |= kv.first == "general.alignment";
    if (!found) meta.emplace_back("general.alignment", GgufValue::Of(static_cast<uint32_t>(alignment_)));
  }
  return SerializeHeader(alignment_, meta, infos);
}

std::vector<uint8_t> GgufWriter::Serialize() const {
  std::vector<uint8_t> out = Header();
  for (const auto& t : tensors_) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    while (out.size() % alignment_ != 0) out.push_back(0);
  }
  return out;
}

Status GgufWriter::WriteFile(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(tmp.c_str(), "wb"), &std::fclose);
  if (!f) return Errorf("cannot write '{}': {}", tmp, std::strerror(errno));
  const std::vector<uint8_t> header = Header();
  bool ok = std::fwrite(header.data(), 1, header.size(), f.get()) == header.size();
  static const uint8_t kZeros[64] = {};
  for (const auto& t : tensors_) {
    ok = ok && std::fwrite(t.data.data(), 1, t.data.size(), f.get()) == t.data.size();
    const size_t pad = (alignment_ - t.data.size() % alignment_) % alignment_;
    for (size_t left = pad; ok && left > 0;) {
      const size_t n = std::min<size_t>(left, sizeof(kZeros));
      ok = std::fwrite(kZeros, 1, n, f.get()) == n;
      left -= n;
    }
  }
  if (!ok) return Errorf("short write to '{}' (disk full?)", tmp);
  if (std::fclose(f.release()) != 0) return Errorf("cannot close '{}'", tmp);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return Errorf("cannot rename to '{}'", path);
  return OkStatus();
}

}  // namespace pc
