// Mutation test: thousands of corrupted copies of a real model must each load
// or fail with a message, never crash, hang or allocate without bound. Run it
// under the sanitizer build (see .ci/run).
#include <random>

#include "model/forward.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace pc {
namespace {

// Parse, read the config, bind weights and build the tokenizer: everything a
// load does before inference.
bool LoadEverything(const std::vector<uint8_t>& bytes, std::string* error) {
  auto gguf = GgufFile::Parse(bytes);
  if (!gguf.ok()) {
    *error = gguf.status().message();
    return false;
  }
  auto tok = Tokenizer::FromGguf(*gguf);
  if (!tok.ok()) {
    *error = tok.status().message();
    return false;
  }
  auto model = Model::FromGguf(std::move(*gguf), 1);
  if (!model.ok()) {
    *error = model.status().message();
    return false;
  }
  return true;
}

TEST(GgufFuzz, TruncationsAndByteFlipsNeverCrash) {
  PC_SHARED_OR_SKIP(path, "models/stories260K.gguf");
  const std::vector<uint8_t> original = test::ReadBytes(path);
  ASSERT_GT(original.size(), 100000u);
  std::string error;
  ASSERT_TRUE(LoadEverything(original, &error)) << error;
  // Where the header, metadata and tensor table end: the first tensor's data.
  auto parsed = GgufFile::Parse(original);
  ASSERT_TRUE(parsed.ok());
  size_t header_end = original.size();
  for (const auto& t : parsed->tensors()) header_end = std::min<size_t>(header_end, t.data - original.data());
  std::mt19937_64 rng(12345);
  int variants = 0, loaded = 0, rejected = 0;
  auto run = [&](const std::vector<uint8_t>& bytes) {
    ++variants;
    std::string err;
    if (LoadEverything(bytes, &err)) {
      ++loaded;
    } else {
      ++rejected;
      EXPECT_FALSE(err.empty());
    }
  };
  // 1. Truncations: every prefix length near the start, then spread over the file.
  for (size_t len = 0; len < 600; ++len) run({original.begin(), original.begin() + len});
  for (int i = 0; i < 400; ++i) {
    const size_t len = rng() % original.size();
    run({original.begin(), original.begin() + len});
  }
  // 2. Random byte flips in the header, metadata and tensor table.
  for (int i = 0; i < 1200; ++i) {
    auto bytes = original;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      const size_t at = rng() % header_end;
      bytes[at] = static_cast<uint8_t>(rng() % 3 == 0 ? 0xff : rng());
    }
    run(bytes);
  }
  // 3. Flips that set length/count fields to huge values (8-byte aligned words).
  for (int i = 0; i < 300; ++i) {
    auto bytes = original;
    const size_t at = (rng() % (header_end / 8)) * 8;
    for (int b = 0; b < 8; ++b) bytes[at + b] = static_cast<uint8_t>(b < 7 ? 0xff : 0x7f);
    run(bytes);
  }
  std::printf("%d variants: %d loaded, %d rejected with an error\n", variants, loaded, rejected);
  EXPECT_GE(variants, 2000);
  EXPECT_GT(rejected, 1000);
}

}  // namespace
}  // namespace pc
