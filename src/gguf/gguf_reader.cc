// Hardened GGUF parser. Every read goes through Cursor, which checks bounds;
// counts are checked against the bytes left before anything is reserved.
#include <algorithm>
#include <cstring>
#include <limits>

#include "gguf/gguf.h"

namespace pc {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kMaxKeyBytes = 65536;

class Cursor {
 public:
  explicit Cursor(std::span<const uint8_t> b) : b_(b) {}
  size_t pos() const { return pos_; }
  size_t left() const { return b_.size() - pos_; }

  template <typename T>
  Status Read(T* out, const char* what) {
    if (left() < sizeof(T)) return Errorf("file truncated at byte {} while reading {}", pos_, what);
    std::memcpy(out, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return OkStatus();
  }

  Status ReadString(std::string* out, const char* what, uint64_t max_len) {
    uint64_t len = 0;
    PC_RETURN_IF_ERROR(Read(&len, what));
    if (len > left()) {
      return Errorf("{} at byte {} claims length {} but only {} bytes remain", what, pos_ - 8, len,
                    left());
    }
    if (len > max_len) return Errorf("{} at byte {} is too long ({} bytes)", what, pos_ - 8, len);
    out->assign(reinterpret_cast<const char*>(b_.data() + pos_), len);
    pos_ += len;
    return OkStatus();
  }

 private:
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
};

// Smallest encoded size of one value of type t (for count plausibility).
uint64_t MinEncodedBytes(GgufType t) {
  switch (t) {
    case GgufType::kUint8: case GgufType::kInt8: case GgufType::kBool: return 1;
    case GgufType::kUint16: case GgufType::kInt16: return 2;
    case GgufType::kUint32: case GgufType::kInt32: case GgufType::kFloat32: return 4;
    case GgufType::kString: case GgufType::kUint64: case GgufType::kInt64:
    case GgufType::kFloat64: return 8;
    case GgufType::kArray: return 12;
  }
  return 1;
}

Status ReadScalar(Cursor& c, GgufType t, GgufScalar* out, const std::string& key) {
  auto read = [&](auto v) -> Status {
    PC_RETURN_IF_ERROR(c.Read(&v, "metadata value"));
    *out = v;
    return OkStatus();
  };
  switch (t) {
    case GgufType::kUint8: return read(uint8_t{});
    case GgufType::kInt8: return read(int8_t{});
    case GgufType::kUint16: return read(uint16_t{});
    case GgufType::kInt16: return read(int16_t{});
    case GgufType::kUint32: return read(uint32_t{});
    case GgufType::kInt32: return read(int32_t{});
    case GgufType::kFloat32: return read(float{});
    case GgufType::kUint64: return read(uint64_t{});
    case GgufType::kInt64: return read(int64_t{});
    case GgufType::kFloat64: return read(double{});
    case GgufType::kBool: {
      uint8_t b = 0;
      PC_RETURN_IF_ERROR(c.Read(&b, "bool value"));
      if (b > 1) return Errorf("metadata '{}': bool value {} is neither 0 nor 1", key, b);
      *out = b != 0;
      return OkStatus();
    }
    case GgufType::kString: {
      std::string s;
      PC_RETURN_IF_ERROR(c.ReadString(&s, "string value", std::numeric_limits<uint64_t>::max()));
      *out = std::move(s);
      return OkStatus();
    }
    case GgufType::kArray: break;
  }
  return Errorf("metadata '{}': invalid value type {}", key, static_cast<uint32_t>(t));
}

bool ValidType(uint32_t raw) { return raw <= 12; }

Status ReadValue(Cursor& c, const std::string& key, GgufValue* out) {
  uint32_t raw = 0;
  PC_RETURN_IF_ERROR(c.Read(&raw, "metadata value type"));
  if (!ValidType(raw)) return Errorf("metadata '{}': invalid value type {}", key, raw);
  out->type = static_cast<GgufType>(raw);
  if (out->type != GgufType::kArray) return ReadScalar(c, out->type, &out->scalar, key);
  uint32_t elem_raw = 0;
  uint64_t count = 0;
  PC_RETURN_IF_ERROR(c.Read(&elem_raw, "array element type"));
  if (!ValidType(elem_raw)) return Errorf("metadata '{}': invalid array element type {}", key, elem_raw);
  out->elem_type = static_cast<GgufType>(elem_raw);
  if (out->elem_type == GgufType::kArray) {
    return Errorf("metadata '{}': nested arrays are not supported", key);
  }
  PC_RETURN_IF_ERROR(c.Read(&count, "array length"));
  if (count > c.left() / MinEncodedBytes(out->elem_type)) {
    return Errorf("metadata '{}': array claims {} elements but only {} bytes remain", key, count,
                  c.left());
  }
  out->array.resize(count);
  for (uint64_t i = 0; i < count; ++i) {
    PC_RETURN_IF_ERROR(ReadScalar(c, out->elem_type, &out->array[i], key));
  }
  return OkStatus();
}

}  // namespace

// Friend of GgufFile: fills its private fields.
class GgufParser {
 public:
  static Status Run(std::span<const uint8_t> bytes, GgufFile* f);
  static Status ReadTensorInfos(Cursor& c, uint64_t n, GgufFile* f);
  static Status PlaceTensors(std::span<const uint8_t> bytes, size_t header_end, GgufFile* f);
};

Status GgufParser::Run(std::span<const uint8_t> bytes, GgufFile* f) {
  Cursor c(bytes);
  uint32_t magic = 0;
  PC_RETURN_IF_ERROR(c.Read(&magic, "magic"));
  if (magic != kMagic) return Errorf("not a GGUF file (bad magic 0x{:08x})", magic);
  PC_RETURN_IF_ERROR(c.Read(&f->version_, "version"));
  if (f->version_ != 2 && f->version_ != 3) {
    return Errorf("unsupported GGUF version {} (supported: 2, 3)", f->version_);
  }
  uint64_t n_tensors = 0, n_kv = 0;
  PC_RETURN_IF_ERROR(c.Read(&n_tensors, "tensor count"));
  PC_RETURN_IF_ERROR(c.Read(&n_kv, "metadata count"));
  // A key-value pair takes at least 8 (key length) + 4 (type) + 1 bytes.
  if (n_kv > c.left() / 13) return Errorf("metadata count {} is impossible for a file of {} bytes (truncated or corrupt)", n_kv, bytes.size());
  if (n_tensors > c.left() / 24) return Errorf("tensor count {} is impossible for a file of {} bytes (truncated or corrupt)", n_tensors, bytes.size());
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key;
    PC_RETURN_IF_ERROR(c.ReadString(&key, "metadata key", kMaxKeyBytes));
    if (f->metadata_index_.count(key)) return Errorf("duplicate metadata key '{}'", key);
    GgufValue v;
    PC_RETURN_IF_ERROR(ReadValue(c, key, &v));
    f->metadata_index_[key] = f->metadata_.size();
    f->metadata_.emplace_back(std::move(key), std::move(v));
  }
  if (const GgufValue* a = f->Find("general.alignment")) {
    int64_t align = 0;
    if (a->type != GgufType::kUint32 || !ScalarAsInt(a->scalar, &align) || align <= 0 ||
        (align & (align - 1)) != 0 || align > (1 << 20)) {
      return Status::Error("general.alignment must be a uint32 power of two");
    }
    f->alignment_ = static_cast<uint64_t>(align);
  }
  PC_RETURN_IF_ERROR(ReadTensorInfos(c, n_tensors, f));
  return PlaceTensors(bytes, c.pos(), f);
}

Status GgufParser::ReadTensorInfos(Cursor& c, uint64_t n, GgufFile* f) {
  f->tensors_.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    GgufTensorInfo t;
    PC_RETURN_IF_ERROR(c.ReadString(&t.name, "tensor name", kMaxKeyBytes));
    uint32_t n_dims = 0;
    PC_RETURN_IF_ERROR(c.Read(&n_dims, "tensor dimension count"));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return Errorf("tensor '{}': {} dimensions (expected 1 to {})", t.name, n_dims, kMaxDims);
    }
    uint64_t elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = 0;
      PC_RETURN_IF_ERROR(c.Read(&dim, "tensor dimension"));
      if (dim == 0 || dim > (uint64_t{1} << 40) || elems > (uint64_t{1} << 50) / dim) {
        return Errorf("tensor '{}': dimension {} has absurd size {}", t.name, d, dim);
      }
      elems *= dim;
      t.dims.push_back(dim);
    }
    uint32_t type = 0;
    PC_RETURN_IF_ERROR(c.Read(&type, "tensor type"));
    if (!IsSupportedTensorType(type)) {
      std::string names;
      for (TensorType w : WeightTensorTypes()) names += (names.empty() ? "" : ", ") + std::string(TensorTypeName(w));
      return Errorf("tensor '{}' has unsupported type {} (supported: {})", t.name, RawTensorTypeName(type), names);
    }
    t.type = static_cast<TensorType>(type);
    if (t.dims[0] % BlockElems(t.type) != 0) {
      return Errorf("tensor '{}': row length {} is not a multiple of the {} block size {}", t.name,
                    t.dims[0], TensorTypeName(t.type), BlockElems(t.type));
    }
    t.size_bytes = RowBytes(t.type, t.dims[0]) * (elems / t.dims[0]);
    PC_RETURN_IF_ERROR(c.Read(&t.offset, "tensor offset"));
    if (t.offset % f->alignment_ != 0) {
      return Errorf("tensor '{}': offset {} is not aligned to {}", t.name, t.offset, f->alignment_);
    }
    if (f->tensor_index_.count(t.name)) return Errorf("duplicate tensor name '{}'", t.name);
    f->tensor_index_[t.name] = f->tensors_.size();
    f->tensors_.push_back(std::move(t));
  }
  return OkStatus();
}

Status GgufParser::PlaceTensors(std::span<const uint8_t> bytes, size_t header_end, GgufFile* f) {
  const uint64_t data_start = (header_end + f->alignment_ - 1) / f->alignment_ * f->alignment_;
  if (f->tensors_.empty()) return OkStatus();
  if (data_start > bytes.size()) return Errorf("file truncated: tensor data section is missing");
  const uint64_t data_size = bytes.size() - data_start;
  std::vector<size_t> order(f->tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [f](size_t a, size_t b) { return f->tensors_[a].offset < f->tensors_[b].offset; });
  uint64_t prev_end = 0;
  const GgufTensorInfo* prev = nullptr;
  for (size_t i : order) {
    GgufTensorInfo& t = f->tensors_[i];
    if (t.offset > data_size || t.size_bytes > data_size - t.offset) {
      return Errorf("tensor '{}': data [{}, {}) lies outside the file's data section ({} bytes); "
                    "file truncated or offset corrupt", t.name, t.offset, t.offset + t.size_bytes,
                    data_size);
    }
    if (prev != nullptr && t.offset < prev_end) {
      return Errorf("tensors '{}' and '{}' overlap", prev->name, t.name);
    }
    prev_end = t.offset + t.size_bytes;
    prev = &t;
    t.data = bytes.data() + data_start + t.offset;
  }
  return OkStatus();
}

uint64_t GgufTensorInfo::NumElements() const {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  return n;
}

Result<GgufFile> GgufFile::Parse(std::span<const uint8_t> bytes) {
  GgufFile f;
  PC_RETURN_IF_ERROR(GgufParser::Run(bytes, &f));
  return f;
}

Result<GgufFile> GgufFile::Open(const std::string& path) {
  PC_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::Open(path));
  auto shared = std::make_shared<MappedFile>(std::move(mapped));
  Result<GgufFile> f = Parse(shared->bytes());
  if (!f.ok()) return Errorf("{}: {}", path, f.status().message());
  f->file_ = std::move(shared);
  return f;
}

const GgufValue* GgufFile::Find(const std::string& key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufTensorInfo* GgufFile::FindTensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {
Result<const GgufValue*> FindTyped(const GgufFile& f, const std::string& key, bool want_array) {
  const GgufValue* v = f.Find(key);
  if (v == nullptr) return Errorf("metadata key '{}' is missing", key);
  if (want_array != (v->type == GgufType::kArray)) {
    return Errorf("metadata key '{}' has type {}", key, GgufTypeName(v->type));
  }
  return v;
}
}  // namespace

Result<std::string> GgufFile::GetString(const std::string& key) const {
  PC_ASSIGN_OR_RETURN(const GgufValue* v, FindTyped(*this, key, false));
  if (const auto* s = std::get_if<std::string>(&v->scalar)) return *s;
  return Errorf("metadata key '{}' has type {}, expected string", key, GgufTypeName(v->type));
}

Result<int64_t> GgufFile::GetInt(const std::string& key) const {
  PC_ASSIGN_OR_RETURN(const GgufValue* v, FindTyped(*this, key, false));
  int64_t out = 0;
  if (ScalarAsInt(v->scalar, &out)) return out;
  return Errorf("metadata key '{}' has type {}, expected an integer", key, GgufTypeName(v->type));
}

Result<double> GgufFile::GetFloat(const std::string& key) const {
  PC_ASSIGN_OR_RETURN(const GgufValue* v, FindTyped(*this, key, false));
  double out = 0;
  if (ScalarAsDouble(v->scalar, &out)) return out;
  return Errorf("metadata key '{}' has type {}, expected a number", key, GgufTypeName(v->type));
}

Result<bool> GgufFile::GetBool(const std::string& key) const {
  PC_ASSIGN_OR_RETURN(const GgufValue* v, FindTyped(*this, key, false));
  if (const auto* b = std::get_if<bool>(&v->scalar)) return *b;
  return Errorf("metadata key '{}' has type {}, expected bool", key, GgufTypeName(v->type));
}

Result<std::vector<std::string>> GgufFile::GetStringArray(const std::string& key) const {
  PC_ASSIGN_OR_RETURN(const GgufValue* v, FindTyped(*this, key, true));
  if (v->elem_type != GgufType::kString) return Errorf("metadata key '{}' is not a string array", key);
  std::vector<std::string> out;
  out.reserve(v->array.size());
  for (const auto& s : v->array) out.push_back(std::get<std::string>(s));
  return out;
}

Result<std::vector<double>> GgufFile::GetFloatArray(const std::string& key) const {
  PC_ASSIGN_OR_RETURN(const GgufValue* v, FindTyped(*this, key, true));
  std::vector<double> out(v->array.size());
  for (size_t i = 0; i < out.size(); ++i) {
    if (!ScalarAsDouble(v->array[i], &out[i])) return Errorf("metadata key '{}' is not a numeric array", key);
  }
  return out;
}

Result<std::vector<int64_t>> GgufFile::GetIntArray(const std::string& key) const {
  PC_ASSIGN_OR_RETURN(const GgufValue* v, FindTyped(*this, key, true));
  std::vector<int64_t> out(v->array.size());
  for (size_t i = 0; i < out.size(); ++i) {
    if (!ScalarAsInt(v->array[i], &out[i])) return Errorf("metadata key '{}' is not an integer array", key);
  }
  return out;
}

}  // namespace pc
