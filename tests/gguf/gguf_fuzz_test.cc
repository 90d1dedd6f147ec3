// Mutation test: thousands of corrupted copies of real models, in every
// weight type and architecture, must each load or fail with a message, never
// crash, hang or allocate without bound; and a model whose tensor bytes are
// random (any scale, any quant bits) must run a forward pass without
// crashing. Run under the sanitizer build too (see .ci/run).
#include <fstream>
#include <random>

#include "model/forward.h"
#include "model/make_model.h"
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

// Corrupts the header, metadata and tensor table of `original` in `scale`
// x 250 ways (truncations, byte flips, huge counts); returns how many of
// the variants were rejected.
int FuzzHeader(const std::vector<uint8_t>& original, int scale, uint64_t seed) {
  std::string error;
  EXPECT_TRUE(LoadEverything(original, &error)) << error;
  auto parsed = GgufFile::Parse(original);
  EXPECT_TRUE(parsed.ok());
  // Where the header, metadata and tensor table end: the first tensor's data.
  size_t header_end = original.size();
  for (const auto& t : parsed->tensors()) header_end = std::min<size_t>(header_end, t.data - original.data());
  std::mt19937_64 rng(seed);
  int rejected = 0;
  auto run = [&](const std::vector<uint8_t>& bytes) {
    std::string err;
    if (!LoadEverything(bytes, &err)) {
      ++rejected;
      EXPECT_FALSE(err.empty());
    }
  };
  // 1. Truncations: every prefix length near the start, then spread over the file.
  for (size_t len = 0; len < static_cast<size_t>(75 * scale); ++len) run({original.begin(), original.begin() + len});
  for (int i = 0; i < 50 * scale; ++i) run({original.begin(), original.begin() + rng() % original.size()});
  // 2. Random byte flips in the header, metadata and tensor table.
  for (int i = 0; i < 150 * scale; ++i) {
    auto bytes = original;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) bytes[rng() % header_end] = static_cast<uint8_t>(rng() % 3 == 0 ? 0xff : rng());
    run(bytes);
  }
  // 3. Flips that set length/count fields to huge values (8-byte aligned words).
  for (int i = 0; i < 40 * scale; ++i) {
    auto bytes = original;
    const size_t at = (rng() % (header_end / 8)) * 8;
    for (int b = 0; b < 8; ++b) bytes[at + b] = static_cast<uint8_t>(b < 7 ? 0xff : 0x7f);
    run(bytes);
  }
  return rejected;
}

TEST(GgufFuzz, TruncationsAndByteFlipsNeverCrash) {
  PC_SHARED_OR_SKIP(path, "models/stories260K.gguf");
  const std::vector<uint8_t> original = test::ReadBytes(path);
  ASSERT_GT(original.size(), 100000u);
  const int rejected = FuzzHeader(original, 8, 12345);  // 2,520 variants
  std::printf("stories260K: 2520 variants, %d rejected with an error\n", rejected);
  EXPECT_GT(rejected, 1000);
}

// The downloads' layouts: K-quant mixes, qwen2 biases, qwen3 norms, phi3
// fused matrices, llama3 rope_freqs.
TEST(GgufFuzz, EveryArchitectureAndKQuantFileSurvivesCorruption) {
  // gemma3: windows, post norms, tied output; qwen3moe: the router and 3-D
  // expert tensors; gpt-oss: sinks, expert biases, MXFP4 experts.
  for (const char* name : {"tiny-gqa-q4_k_m", "tiny-gqa-q5_k_m", "tiny-gqa-q6_k", "tiny-qwen2-q4_k_m", "tiny-qwen3-q8_0",
                           "tiny-phi3-q4_k_m", "tiny-llama3-q4_k_m", "tiny-gemma3-q8_0", "tiny-qwen3moe-q8_0",
                           "tiny-gptoss-mxfp4"}) {
    PC_SHARED_OR_SKIP(path, std::string("models/") + name + ".gguf");
    const int rejected = FuzzHeader(test::ReadBytes(path), 2, 777);  // 630 variants
    std::printf("%s: 630 variants, %d rejected with an error\n", name, rejected);
    EXPECT_GT(rejected, 200) << name;
  }
}

// Random tensor bytes in every weight type: the scales may be infinities or
// NaNs and every quant field takes any value; loading, repacking and a
// forward pass must survive (the logits' values are not checked).
TEST(GgufFuzz, RandomTensorBytesInEveryTypeRunWithoutCrashing) {
  for (TensorType t : WeightTensorTypes()) {
    MakeModelOptions opt;
    opt.shape = ModelShape{"fuzz", 256, 1, 4, 2, 256, true, 64};
    opt.type = t;
    opt.vocab_size = 512;
    const std::string path = test::TempPath(std::string("fuzz-") + TensorTypeName(t) + ".gguf");
    const std::string words = test::TempPath("fuzz-words.txt");
    std::ofstream(words) << "alpha\nbeta\ngamma\n";
    opt.words_path = words;
    ASSERT_TRUE(MakeModel(opt, path).ok()) << TensorTypeName(t);
    std::vector<uint8_t> bytes = test::ReadBytes(path);
    auto parsed = GgufFile::Parse(bytes);
    ASSERT_TRUE(parsed.ok());
    std::mt19937 rng(static_cast<uint32_t>(t) + 1);
    for (const GgufTensorInfo& ti : parsed->tensors()) {
      if (ti.dims.size() < 2) continue;  // norms stay sane so the pass reaches every matmul
      const size_t off = static_cast<size_t>(ti.data - bytes.data());
      for (size_t i = 0; i < ti.size_bytes; ++i) bytes[off + i] = static_cast<uint8_t>(rng());
    }
    auto gguf = GgufFile::Parse(bytes);
    ASSERT_TRUE(gguf.ok());
    auto model = Model::FromGguf(std::move(*gguf), 2);
    ASSERT_TRUE(model.ok()) << TensorTypeName(t) << ": " << model.status().message();
    KvStore kv(1, static_cast<size_t>((*model)->config().kv_dim()), 16, 2, KvDtype::kF16);
    const std::vector<int32_t> table = {0, 1};
    std::vector<BatchToken> batch;
    for (int32_t p = 0; p < 20; ++p) batch.push_back({p * 7 % 512, p, table, p == 19});
    std::vector<float> logits;
    (*model)->Forward(batch, kv, &logits);
    EXPECT_EQ(logits.size(), 512u) << TensorTypeName(t);
  }
}

}  // namespace
}  // namespace pc
