#include "model/fingerprint.h"

#include <cstring>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace pc {
namespace {

void Append(std::vector<uint8_t>& out, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}

void AppendU64(std::vector<uint8_t>& out, uint64_t v) { Append(out, &v, sizeof v); }

// A scalar as its type tag and value bytes (strings length-prefixed), so no
// two different values serialize alike.
void AppendScalar(std::vector<uint8_t>& out, const GgufScalar& s) {
  AppendU64(out, static_cast<uint64_t>(ScalarType(s)));
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          AppendU64(out, v.size());
          Append(out, v.data(), v.size());
        } else {
          Append(out, &v, sizeof v);
        }
      },
      s);
}

}  // namespace

Hash128 ModelFingerprint(const GgufFile& g, ThreadPool& pool) {
  const std::vector<GgufTensorInfo>& tensors = g.tensors();
  std::vector<Hash128> data_hashes(tensors.size());
  pool.ParallelForEach(tensors.size(), [&](size_t i, int) {
    data_hashes[i] = HashBytes({tensors[i].data, static_cast<size_t>(tensors[i].size_bytes)});
  });
  std::vector<uint8_t> buf;
  for (const auto& [key, v] : g.metadata()) {
    AppendU64(buf, key.size());
    Append(buf, key.data(), key.size());
    AppendU64(buf, static_cast<uint64_t>(v.type));
    if (v.type == GgufType::kArray) {
      AppendU64(buf, static_cast<uint64_t>(v.elem_type));
      AppendU64(buf, v.array.size());
      for (const GgufScalar& s : v.array) AppendScalar(buf, s);
    } else {
      AppendScalar(buf, v.scalar);
    }
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensorInfo& t = tensors[i];
    AppendU64(buf, t.name.size());
    Append(buf, t.name.data(), t.name.size());
    AppendU64(buf, static_cast<uint64_t>(t.type));
    AppendU64(buf, t.dims.size());
    for (uint64_t d : t.dims) AppendU64(buf, d);
    Append(buf, &data_hashes[i], sizeof(Hash128));
  }
  return HashBytes(buf);
}

}  // namespace pc
