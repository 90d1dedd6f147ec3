// GGUF reader/writer: round trips of every value type, alignment, and a clear
// error for each kind of corruption.
#include <cstring>

#include "gguf/gguf.h"
#include "test_support.h"

namespace pc {
namespace {

std::vector<uint8_t> SampleFile(uint64_t alignment = 32) {
  GgufWriter w(alignment);
  w.Set("general.architecture", GgufValue::Of(std::string("llama")));
  w.Set("u8", GgufValue::Of(uint8_t{200}));
  w.Set("i8", GgufValue::Of(int8_t{-100}));
  w.Set("u16", GgufValue::Of(uint16_t{60000}));
  w.Set("i16", GgufValue::Of(int16_t{-30000}));
  w.Set("u32", GgufValue::Of(uint32_t{4000000000u}));
  w.Set("i32", GgufValue::Of(int32_t{-2000000000}));
  w.Set("f32", GgufValue::Of(1.5f));
  w.Set("bool", GgufValue::Of(true));
  w.Set("str", GgufValue::Of(std::string("héllo")));
  w.Set("u64", GgufValue::Of(uint64_t{1} << 60));
  w.Set("i64", GgufValue::Of(int64_t{-1} << 60));
  w.Set("f64", GgufValue::Of(2.25));
  w.Set("arr.str", GgufValue::ArrayOf(GgufType::kString, {std::string("a"), std::string(""), std::string("ccc")}));
  w.Set("arr.i32", GgufValue::ArrayOf(GgufType::kInt32, {int32_t{1}, int32_t{-2}, int32_t{3}}));
  w.Set("arr.f32", GgufValue::ArrayOf(GgufType::kFloat32, {0.5f, 1.5f}));
  w.Set("arr.empty", GgufValue::ArrayOf(GgufType::kUint8, {}));
  std::vector<float> a(64), b(96);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = -static_cast<float>(i);
  EXPECT_TRUE(w.AddTensor("a", TensorType::kF32, {16, 4}, {reinterpret_cast<uint8_t*>(a.data()), 256}).ok());
  EXPECT_TRUE(w.AddTensor("b", TensorType::kF32, {96}, {reinterpret_cast<uint8_t*>(b.data()), 384}).ok());
  return w.Serialize();
}

TEST(Gguf, RoundTripsEveryValueTypeAndTensor) {
  const auto bytes = SampleFile();
  auto f = GgufFile::Parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(*f->GetString("str"), "héllo");
  EXPECT_EQ(*f->GetInt("u8"), 200);
  EXPECT_EQ(*f->GetInt("i8"), -100);
  EXPECT_EQ(*f->GetInt("u16"), 60000);
  EXPECT_EQ(*f->GetInt("i16"), -30000);
  EXPECT_EQ(*f->GetInt("u32"), 4000000000);
  EXPECT_EQ(*f->GetInt("i32"), -2000000000);
  EXPECT_EQ(*f->GetInt("u64"), int64_t{1} << 60);
  EXPECT_EQ(*f->GetInt("i64"), -(int64_t{1} << 60));
  EXPECT_EQ(*f->GetFloat("f32"), 1.5);
  EXPECT_EQ(*f->GetFloat("f64"), 2.25);
  EXPECT_TRUE(*f->GetBool("bool"));
  EXPECT_EQ(*f->GetStringArray("arr.str"), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(*f->GetIntArray("arr.i32"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(*f->GetFloatArray("arr.f32"), (std::vector<double>{0.5, 1.5}));
  EXPECT_TRUE(f->GetIntArray("arr.empty")->empty());
  EXPECT_FALSE(f->GetString("u8").ok());
  EXPECT_FALSE(f->GetInt("missing").ok());
  const GgufTensorInfo* a = f->FindTensor("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dims, (std::vector<uint64_t>{16, 4}));
  float v;
  std::memcpy(&v, a->data + 4 * 37, 4);
  EXPECT_EQ(v, 37.0f);
  const GgufTensorInfo* b = f->FindTensor("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->offset % 32, 0u);
  std::memcpy(&v, b->data + 4 * 95, 4);
  EXPECT_EQ(v, -95.0f);
}

TEST(Gguf, HonoursGeneralAlignment) {
  const auto bytes = SampleFile(64);
  auto f = GgufFile::Parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->alignment(), 64u);
  for (const auto& t : f->tensors()) {
    EXPECT_EQ(t.offset % 64, 0u);
    EXPECT_EQ((t.data - bytes.data()) % 64, 0);
  }
}

TEST(Gguf, WritesAndMapsAFile) {
  const std::string path = test::TempPath("sample.gguf");
  test::WriteBytes(path, SampleFile());
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->tensors().size(), 2u);
  auto missing = GgufFile::Open(path + ".nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot open"), std::string::npos);
}

// Expects Parse to fail with a message containing `want`.
void ExpectError(const std::vector<uint8_t>& bytes, const std::string& want) {
  auto f = GgufFile::Parse(bytes);
  ASSERT_FALSE(f.ok()) << "expected an error containing '" << want << "'";
  EXPECT_NE(f.status().message().find(want), std::string::npos) << f.status().message();
}

size_t Find(const std::vector<uint8_t>& b, const std::string& s) {
  auto it = std::search(b.begin(), b.end(), s.begin(), s.end(),
                        [](uint8_t x, char y) { return x == static_cast<uint8_t>(y); });
  return static_cast<size_t>(it - b.begin());
}

TEST(Gguf, RejectsCorruptionWithAClearMessage) {
  const auto good = SampleFile();
  auto bad = good;
  bad[0] = 'X';
  ExpectError(bad, "bad magic");
  bad = good;
  bad[4] = 1;
  ExpectError(bad, "unsupported GGUF version 1");
  bad = good;
  std::memset(&bad[16], 0xff, 8);  // metadata count
  ExpectError(bad, "metadata count");
  bad = good;
  std::memset(&bad[8], 0x7f, 8);  // tensor count
  ExpectError(bad, "tensor count");
  ExpectError({good.begin(), good.begin() + 6}, "truncated");
  ExpectError({good.begin(), good.begin() + 60}, "truncated");
  ExpectError({good.begin(), good.end() - 100}, "outside the file");
  // A string length far beyond the file.
  bad = good;
  const size_t key = Find(bad, "llama");
  std::memset(&bad[key - 8], 0x7f, 8);
  ExpectError(bad, "claims length");
  // Tensor offset: the last 8 bytes of the last tensor info ("b") are its offset.
  const size_t b_name = Find(bad = good, std::string("\x01\x00\x00\x00\x00\x00\x00\x00" "b", 9));
  const size_t b_offset = b_name + 9 + 4 + 8 + 4;
  uint64_t off = 1ull << 40;
  std::memcpy(&bad[b_offset], &off, 8);
  ExpectError(bad, "outside the file");
  off = 8;
  std::memcpy(&bad[b_offset], &off, 8);
  ExpectError(bad, "not aligned");
  off = 0;
  std::memcpy(&bad[b_offset], &off, 8);
  ExpectError(bad, "overlap");
  // Unsupported tensor type names the tensor.
  bad = good;
  uint32_t type = 16;  // IQ2_XXS
  std::memcpy(&bad[b_offset - 4], &type, 4);
  ExpectError(bad, "tensor 'b' has unsupported type iq2_xxs (type 16)");
  type = 77;
  std::memcpy(&bad[b_offset - 4], &type, 4);
  ExpectError(bad, "tensor 'b' has unsupported type 77");
  // Shape whose byte size runs past the end of the data.
  bad = good;
  uint64_t dim = 1000;
  std::memcpy(&bad[b_name + 9 + 4], &dim, 8);
  ExpectError(bad, "outside the file");
  // Row length that is not a block multiple for a quantized type.
  type = 8;
  std::memcpy(&bad[b_offset - 4], &type, 4);
  dim = 33;
  std::memcpy(&bad[b_name + 9 + 4], &dim, 8);
  ExpectError(bad, "not a multiple");
}

TEST(Gguf, WriterRejectsWrongSizes) {
  GgufWriter w;
  std::vector<uint8_t> data(10);
  EXPECT_FALSE(w.AddTensor("x", TensorType::kF32, {4}, data).ok());
  EXPECT_FALSE(w.AddTensor("x", TensorType::kQ8_0, {16}, data).ok());
}

}  // namespace
}  // namespace pc
