// What a model file may contain: every tensor is used and every <arch>.*
// key is understood, or loading fails with a message naming the piece; the
// architectures' switches do what their metadata says.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <set>

#include "base/check.h"
#include "model/forward.h"
#include "model/sequence.h"
#include "test_support.h"

namespace pc {
namespace {

void CopyMetadata(const GgufFile& src, GgufWriter& w) {
  for (const auto& [key, value] : src.metadata()) w.Set(key, value);
}

void CopyTensor(const GgufTensorInfo& t, GgufWriter& w) {
  PC_CHECK(w.AddTensor(t.name, t.type, t.dims, {t.data, static_cast<size_t>(t.size_bytes)}).ok());
}

// A copy of a GGUF with edits: `meta` may change or add metadata, `tensors`
// may add tensors (written after the original ones).
using MetaEdit = std::function<void(GgufWriter&)>;
std::vector<uint8_t> Rewrite(const GgufFile& src, const MetaEdit& meta, const std::set<std::string>& drop_keys = {},
                             const std::set<std::string>& drop_tensors = {}) {
  GgufWriter w;
  for (const auto& [key, value] : src.metadata()) {
    if (drop_keys.count(key) == 0) w.Set(key, value);
  }
  meta(w);
  for (const GgufTensorInfo& t : src.tensors()) {
    if (drop_tensors.count(t.name)) continue;
    CopyTensor(t, w);
  }
  return w.Serialize();
}

std::string LoadError(const std::vector<uint8_t>& bytes) {
  auto g = GgufFile::Parse(bytes);
  if (!g.ok()) return "parse: " + g.status().message();
  auto m = Model::FromGguf(std::move(*g), 1);
  return m.ok() ? "" : m.status().message();
}

class ModelLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    PC_SHARED_OR_SKIP(path, "models/tiny-llama3-f16.gguf");
    bytes_ = test::ReadBytes(path);
    auto g = GgufFile::Parse(bytes_);
    ASSERT_TRUE(g.ok());
    src_ = std::make_unique<GgufFile>(std::move(*g));
  }
  std::vector<uint8_t> bytes_;
  std::unique_ptr<GgufFile> src_;
};

TEST_F(ModelLoad, TheUneditedCopyLoads) { EXPECT_EQ(LoadError(Rewrite(*src_, [](GgufWriter&) {})), ""); }

TEST_F(ModelLoad, UnknownArchitectureIsNamed) {
  const std::string e = LoadError(Rewrite(*src_, [](GgufWriter& w) {
    w.Set("general.architecture", GgufValue::Of(std::string("rwkv7")));
  }));
  EXPECT_NE(e.find("unsupported architecture 'rwkv7'"), std::string::npos) << e;
  EXPECT_NE(e.find("qwen3"), std::string::npos) << e;
}

// gpt-oss files that do not say what they hold are refused by name: no
// expert count (its FFN is a mixture of experts), sinks of the wrong shape,
// a router bias of the wrong length.
TEST(ModelLoadGptOss, MalformedFilesAreRefusedByName) {
  PC_SHARED_OR_SKIP(path, "models/tiny-gptoss-mxfp4.gguf");
  const std::vector<uint8_t> bytes = test::ReadBytes(path);
  auto g = GgufFile::Parse(bytes);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(LoadError(Rewrite(*g, [](GgufWriter&) {})), "");
  std::string e = LoadError(Rewrite(*g, [](GgufWriter&) {}, {"gpt-oss.expert_count", "gpt-oss.expert_used_count"}));
  EXPECT_NE(e.find("without 'gpt-oss.expert_count'"), std::string::npos) << e;
  e = LoadError(Rewrite(*g, [](GgufWriter&) {},
                        {"gpt-oss.expert_count", "gpt-oss.expert_used_count", "gpt-oss.expert_feed_forward_length"}));
  EXPECT_NE(e.find("expert_count' is missing"), std::string::npos) << e;
  const std::vector<float> wrong(7, 0.0f);
  const std::span<const uint8_t> raw(reinterpret_cast<const uint8_t*>(wrong.data()), wrong.size() * sizeof(float));
  e = LoadError(Rewrite(
      *g, [&](GgufWriter& w) { PC_CHECK(w.AddTensor("blk.1.attn_sinks.weight", TensorType::kF32, {7}, raw).ok()); }, {},
      {"blk.1.attn_sinks.weight"}));
  EXPECT_NE(e.find("blk.1.attn_sinks.weight' has shape [7]"), std::string::npos) << e;
  e = LoadError(Rewrite(
      *g, [&](GgufWriter& w) { PC_CHECK(w.AddTensor("blk.0.ffn_gate_inp.bias", TensorType::kF32, {7}, raw).ok()); }, {},
      {"blk.0.ffn_gate_inp.bias"}));
  EXPECT_NE(e.find("ffn_gate_inp.bias' has shape [7]"), std::string::npos) << e;
}

// Gemma 2 files converted before the soft-capping keys existed carry none;
// the family's caps (50 on attention logits, 30 on final logits) still
// apply, as the reference engine assumes: without the keys the shared file
// (which states 50 and 30) gives the same logits bit for bit.
TEST(ModelLoadGemma2, MissingSoftCapKeysMeanTheFamilysCaps) {
  PC_SHARED_OR_SKIP(path, "models/tiny-gemma2-f16.gguf");
  const std::vector<uint8_t> bytes = test::ReadBytes(path);
  auto with_keys = GgufFile::Parse(bytes);
  ASSERT_TRUE(with_keys.ok());
  const std::vector<uint8_t> rewritten =
      Rewrite(*with_keys, [](GgufWriter&) {}, {"gemma2.attn_logit_softcapping", "gemma2.final_logit_softcapping"});
  auto without = GgufFile::Parse(rewritten);
  ASSERT_TRUE(without.ok());
  ASSERT_EQ(without->Find("gemma2.final_logit_softcapping"), nullptr);
  std::vector<std::vector<float>> logits;
  for (GgufFile* g : {&*with_keys, &*without}) {
    auto m = Model::FromGguf(std::move(*g), 1);
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_EQ((*m)->config().attn_softcap, 50.0f);
    EXPECT_EQ((*m)->config().final_softcap, 30.0f);
    Session s(**m, 16, KvDtype::kF16);
    const std::vector<int32_t> prompt = {1, 300, 411, 266, 290};
    const std::span<const float> out = s.Prefill(prompt);
    logits.emplace_back(out.begin(), out.end());
  }
  EXPECT_EQ(logits[0], logits[1]);
}

TEST_F(ModelLoad, AnUnusedTensorIsNamed) {
  const std::string e = LoadError(Rewrite(*src_, [](GgufWriter& w) {
    const float zeros[64] = {};
    PC_CHECK(w.AddTensor("blk.0.attn_rot_embd", TensorType::kF32, {64},
                         {reinterpret_cast<const uint8_t*>(zeros), sizeof zeros})
                 .ok());
  }));
  EXPECT_NE(e.find("tensor 'blk.0.attn_rot_embd' is not used by the llama recipe"), std::string::npos) << e;
}

TEST_F(ModelLoad, MetadataThatChangesTheArithmeticIsRefusedByName) {
  const std::vector<std::pair<MetaEdit, std::string>> cases = {
      {[](GgufWriter& w) { w.Set("llama.attn_logit_softcapping", GgufValue::Of(50.0f)); },
       "metadata 'llama.attn_logit_softcapping' is not supported"},
      {[](GgufWriter& w) { w.Set("llama.final_logit_softcapping", GgufValue::Of(30.0f)); },
       "metadata 'llama.final_logit_softcapping' is not supported"},
      {[](GgufWriter& w) { w.Set("llama.attention.sliding_window_pattern", GgufValue::Of(uint32_t{2})); },
       "metadata 'llama.attention.sliding_window_pattern' is not supported"},
      {[](GgufWriter& w) { w.Set("llama.rope.scaling.type", GgufValue::Of(std::string("longrope"))); },
       "'llama.rope.scaling.type' = 'longrope' is not supported"},
      {[](GgufWriter& w) {
         w.Set("llama.rope.scaling.type", GgufValue::Of(std::string("yarn")));
       },
       "'llama.rope.scaling.factor' is missing"},
      {[](GgufWriter& w) { w.Set("llama.attention.sliding_window", GgufValue::Of(uint32_t{256})); },
       "the llama recipe has no sliding-window attention"},
      {[](GgufWriter& w) { w.Set("llama.expert_count", GgufValue::Of(uint32_t{8})); },
       "'llama.expert_used_count' = 0 is out of range"},
      {[](GgufWriter& w) {
         w.Set("llama.expert_count", GgufValue::Of(uint32_t{8}));
         w.Set("llama.expert_used_count", GgufValue::Of(uint32_t{2}));
       },
       "tensor 'blk.0.ffn_gate_inp.weight' is missing"},
      {[](GgufWriter& w) { w.Set("llama.attention.value_length", GgufValue::Of(uint32_t{32})); },
       "'llama.attention.value_length' = 32 differs from the key length 64"},
  };
  for (const auto& [edit, want] : cases) {
    const std::string e = LoadError(Rewrite(*src_, edit));
    EXPECT_NE(e.find(want), std::string::npos) << "want '" << want << "', got '" << e << "'";
  }
  // Inert keys load: no experts, a window no shorter than the context.
  EXPECT_EQ(LoadError(Rewrite(*src_, [](GgufWriter& w) {
              w.Set("llama.expert_count", GgufValue::Of(uint32_t{0}));
              w.Set("llama.attention.sliding_window", GgufValue::Of(uint32_t{4096}));
              w.Set("llama.rope.scaling.type", GgufValue::Of(std::string("none")));
            })),
            "");
}

TEST_F(ModelLoad, AVocabularyLargerThanTheEmbeddingIsRefused) {
  std::vector<GgufScalar> tokens;
  for (int i = 0; i < 600; ++i) tokens.emplace_back("t" + std::to_string(i));
  const std::string e = LoadError(Rewrite(*src_, [&](GgufWriter& w) {
    w.Set("tokenizer.ggml.tokens", GgufValue::ArrayOf(GgufType::kString, tokens));
  }));
  EXPECT_NE(e.find("the vocabulary has 600 tokens but token_embd.weight only 512 rows"), std::string::npos) << e;
}

// Logits of a prompt (fresh KV) on a model parsed from bytes.
std::vector<float> Logits(const std::vector<uint8_t>& bytes, const std::vector<int32_t>& prompt) {
  auto g = GgufFile::Parse(bytes);
  PC_CHECK(g.ok());
  auto m = Model::FromGguf(std::move(*g), 1);
  PC_CHECK(m.ok());
  Session s(**m, prompt.size() + 1, KvDtype::kF32);
  std::span<const float> l = s.Prefill(prompt);
  return {l.begin(), l.end()};
}

float MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

// A copy of a mixture-of-experts file with its 3-D expert tensors written
// as one 2-D tensor per expert (`blk.N.ffn_gate.E.weight`), the layout of
// the first Mixtral GGUFs; `skip` names a split tensor to leave out, and
// `keep_stacked` keeps the 3-D tensors as well.
std::vector<uint8_t> SplitExperts(const GgufFile& src, const std::string& skip = "", bool keep_stacked = false) {
  GgufWriter w;
  CopyMetadata(src, w);
  const std::string suffix = "_exps.weight";
  for (const GgufTensorInfo& t : src.tensors()) {
    const size_t at = t.name.rfind(suffix);
    const bool stacked = at != std::string::npos && at + suffix.size() == t.name.size();
    if (!stacked || keep_stacked) {
      CopyTensor(t, w);
    }
    if (!stacked) continue;
    PC_CHECK(t.dims.size() == 3);
    const size_t count = t.dims[2], bytes = static_cast<size_t>(t.size_bytes) / count;
    for (size_t e = 0; e < count; ++e) {
      const std::string name = t.name.substr(0, at) + "." + std::to_string(e) + ".weight";
      if (name == skip) continue;
      PC_CHECK(w.AddTensor(name, t.type, {t.dims[0], t.dims[1]}, {t.data + e * bytes, bytes}).ok());
    }
  }
  return w.Serialize();
}

// Mixtral files with one tensor per expert (converted before the 3-D
// layout) run as the same weights stacked: the same logits bit for bit. A missing expert, or both
// layouts in one file, are refused by name.
TEST(ModelLoadMixtral, OneTensorPerExpertRunsAsTheStackedLayout) {
  PC_SHARED_OR_SKIP(path, "models/tiny-mixtral-q8_0.gguf");
  const std::vector<uint8_t> bytes = test::ReadBytes(path);
  auto g = GgufFile::Parse(bytes);
  ASSERT_TRUE(g.ok());
  ASSERT_NE(g->FindTensor("blk.0.ffn_up_exps.weight"), nullptr);
  const std::vector<uint8_t> split = SplitExperts(*g);
  auto gs = GgufFile::Parse(split);
  ASSERT_TRUE(gs.ok());
  ASSERT_EQ(gs->FindTensor("blk.0.ffn_up_exps.weight"), nullptr);
  ASSERT_NE(gs->FindTensor("blk.0.ffn_up.1.weight"), nullptr);
  const std::vector<int32_t> prompt = {1, 300, 411, 266, 290, 17, 5, 88, 120, 301, 44, 9};
  const auto want = Logits(bytes, prompt);
  EXPECT_EQ(Logits(split, prompt), want);
  std::string e = LoadError(SplitExperts(*g, "blk.1.ffn_down.1.weight"));
  EXPECT_NE(e.find("tensor 'blk.1.ffn_down.1.weight' is missing"), std::string::npos) << e;
  e = LoadError(SplitExperts(*g, "", /*keep_stacked=*/true));
  EXPECT_NE(e.find("ffn_gate.0.weight' is not used by the llama recipe"), std::string::npos) << e;
}

// Keys converters write for routed experts load where they state what the
// recipe computes (the same logits) and are refused by value otherwise.
TEST(ModelLoadMixtral, ExpertKeysLoadWhereTheyStateTheRecipesArithmetic) {
  PC_SHARED_OR_SKIP(path, "models/tiny-mixtral-q8_0.gguf");
  const std::vector<uint8_t> bytes = test::ReadBytes(path);
  auto g = GgufFile::Parse(bytes);
  ASSERT_TRUE(g.ok());
  const std::vector<uint8_t> stated = Rewrite(*g, [](GgufWriter& w) {
    w.Set("llama.expert_gating_func", GgufValue::Of(uint32_t{1}));
    w.Set("llama.expert_weights_norm", GgufValue::Of(true));
    w.Set("llama.expert_weights_scale", GgufValue::Of(1.0f));
    w.Set("llama.expert_shared_count", GgufValue::Of(uint32_t{0}));
  });
  const std::vector<int32_t> prompt = {1, 300, 411, 266, 290};
  EXPECT_EQ(Logits(stated, prompt), Logits(bytes, prompt));
  const std::vector<std::pair<MetaEdit, std::string>> cases = {
      {[](GgufWriter& w) { w.Set("llama.expert_gating_func", GgufValue::Of(uint32_t{2})); },
       "'llama.expert_gating_func' = 2 is not supported: the llama recipe implements softmax gating"},
      {[](GgufWriter& w) { w.Set("llama.expert_weights_norm", GgufValue::Of(false)); },
       "'llama.expert_weights_norm' = 0 is not supported"},
      {[](GgufWriter& w) { w.Set("llama.expert_weights_scale", GgufValue::Of(2.5f)); },
       "'llama.expert_weights_scale' = 2.5 is not supported"},
      {[](GgufWriter& w) { w.Set("llama.expert_shared_count", GgufValue::Of(uint32_t{2})); },
       "'llama.expert_shared_count' = 2 is not supported: the llama recipe implements no shared experts"},
  };
  for (const auto& [edit, want] : cases) {
    const std::string e = LoadError(Rewrite(*g, edit));
    EXPECT_NE(e.find(want), std::string::npos) << "want '" << want << "', got '" << e << "'";
  }
}

// A copy with each layer's gate and up experts in one tensor
// `blk.N.ffn_gate_up_exps.weight` [n_embd, 2 * n_ff, n_expert] (per expert
// its gate rows, then its up rows: the converter's --fuse-gate-up-exps).
std::vector<uint8_t> FuseGateUp(const GgufFile& src) {
  GgufWriter w;
  CopyMetadata(src, w);
  for (const GgufTensorInfo& t : src.tensors()) {
    const size_t at = t.name.find("ffn_gate_exps.weight");
    if (t.name.find("ffn_up_exps.weight") != std::string::npos) continue;
    if (at == std::string::npos) {
      CopyTensor(t, w);
      continue;
    }
    const std::string prefix = t.name.substr(0, at);
    const GgufTensorInfo* up = src.FindTensor(prefix + "ffn_up_exps.weight");
    PC_CHECK(up != nullptr && up->type == t.type && up->dims == t.dims);
    const size_t count = t.dims[2], bytes = static_cast<size_t>(t.size_bytes) / count;
    std::vector<uint8_t> both;
    for (size_t e = 0; e < count; ++e) {
      both.insert(both.end(), t.data + e * bytes, t.data + (e + 1) * bytes);
      both.insert(both.end(), up->data + e * bytes, up->data + (e + 1) * bytes);
    }
    PC_CHECK(w.AddTensor(prefix + "ffn_gate_up_exps.weight", t.type, {t.dims[0], 2 * t.dims[1], count}, both).ok());
  }
  return w.Serialize();
}

// Files with gate and up experts fused run as the separate tensors: the
// same logits bit for bit (a mixture with plain experts, and gpt-oss with
// MXFP4 experts and their separate biases).
TEST(ModelLoadExperts, FusedGateAndUpExpertsRunAsTheSeparateTensors) {
  for (const char* name : {"tiny-qwen3moe-q8_0", "tiny-gptoss-mxfp4"}) {
    PC_SHARED_OR_SKIP(path, std::string("models/") + name + ".gguf");
    const std::vector<uint8_t> bytes = test::ReadBytes(path);
    auto g = GgufFile::Parse(bytes);
    ASSERT_TRUE(g.ok());
    ASSERT_NE(g->FindTensor("blk.0.ffn_up_exps.weight"), nullptr) << name;
    const std::vector<uint8_t> fused = FuseGateUp(*g);
    auto gf = GgufFile::Parse(fused);
    ASSERT_TRUE(gf.ok());
    ASSERT_NE(gf->FindTensor("blk.0.ffn_gate_up_exps.weight"), nullptr) << name;
    ASSERT_EQ(gf->FindTensor("blk.0.ffn_up_exps.weight"), nullptr) << name;
    const std::vector<int32_t> prompt = {1, 300, 411, 266, 290, 17, 5, 88, 120, 301, 44, 9};
    EXPECT_EQ(Logits(fused, prompt), Logits(bytes, prompt)) << name;
  }
}

// `src` written as `parts` shards the way gguf-split does (each named
// <prefix>-0000i-of-0000N.gguf): the first with every metadata key, each
// with split.no, split.count and split.tensors.count and a run of the
// tensors. `edit(i, w)` may change part i's keys. Returns the paths.
std::vector<std::string> WriteShards(const GgufFile& src, int parts, const std::string& prefix,
                                     const std::function<void(int, GgufWriter&)>& edit = nullptr) {
  const size_t n = src.tensors().size(), per = (n + parts - 1) / parts;
  std::vector<std::string> paths;
  for (int i = 0; i < parts; ++i) {
    GgufWriter w;
    if (i == 0) {
      CopyMetadata(src, w);
    }
    w.Set("split.no", GgufValue::Of(static_cast<uint16_t>(i)));
    w.Set("split.count", GgufValue::Of(static_cast<uint16_t>(parts)));
    w.Set("split.tensors.count", GgufValue::Of(static_cast<int32_t>(n)));
    if (edit) edit(i, w);
    for (size_t k = i * per; k < std::min(n, (i + 1) * per); ++k) {
      const GgufTensorInfo& t = src.tensors()[k];
      CopyTensor(t, w);
    }
    paths.push_back(test::TempPath(fmt::format("{}-{:05d}-of-{:05d}.gguf", prefix, i + 1, parts)));
    PC_CHECK(w.WriteFile(paths.back()).ok());
  }
  return paths;
}

std::string LoadPathError(const std::string& path) {
  auto m = Model::Load(path, 1);
  return m.ok() ? "" : m.status().message();
}

// A model split by gguf-split loads from its first part as the whole file
// (the same logits bit for bit); a later part, a missing part, or parts
// that disagree with their split keys are refused by name.
TEST_F(ModelLoad, ASplitModelLoadsFromItsFirstPart) {
  const std::vector<std::string> parts = WriteShards(*src_, 3, "split-llama3");
  auto m = Model::Load(parts[0], 1);
  ASSERT_TRUE(m.ok()) << m.status().message();
  Session s(**m, 16, KvDtype::kF32);
  const std::vector<int32_t> prompt = {1, 50, 60, 70, 80, 90, 100, 110};
  const std::span<const float> got = s.Prefill(prompt);
  EXPECT_EQ(std::vector<float>(got.begin(), got.end()), Logits(bytes_, prompt));
  EXPECT_EQ(LoadPathError(parts[0]), "");

  std::string e = LoadPathError(parts[1]);
  EXPECT_NE(e.find("this is part 2 of 3 of a split model: open its first part (" + parts[0] + ")"), std::string::npos)
      << e;
  const std::vector<std::string> missing = WriteShards(*src_, 3, "split-missing");
  std::filesystem::remove(missing[2]);
  e = LoadPathError(missing[0]);
  EXPECT_NE(e.find("part 3 of 3 of the split model: cannot open '" + missing[2] + "'"), std::string::npos) << e;
  const std::vector<std::string> wrong = WriteShards(*src_, 3, "split-wrong", [](int i, GgufWriter& w) {
    if (i == 2) w.Set("split.no", GgufValue::Of(uint16_t{1}));
  });
  e = LoadPathError(wrong[0]);
  EXPECT_NE(e.find("split.no = 1 of split.count = 3, expected part 3 of 3"), std::string::npos) << e;
  const std::vector<std::string> count = WriteShards(*src_, 2, "split-count", [](int i, GgufWriter& w) {
    if (i == 0) w.Set("split.tensors.count", GgufValue::Of(int32_t{7}));
  });
  e = LoadPathError(count[0]);
  EXPECT_NE(e.find("split.tensors.count says 7"), std::string::npos) << e;
  const std::vector<std::string> range = WriteShards(*src_, 2, "split-range", [](int i, GgufWriter& w) {
    if (i == 0) w.Set("split.no", GgufValue::Of(uint16_t{5}));
  });
  e = LoadPathError(range[0]);
  EXPECT_NE(e.find("split.no = 5 of split.count = 2 is out of range"), std::string::npos) << e;
}

// The switches change the computation: dropping rope_freqs, or scaling
// positions, moves the logits; a linear factor of 1 changes nothing.
TEST_F(ModelLoad, RopeFreqsAndLinearScalingAreApplied) {
  const std::vector<int32_t> prompt = {1, 50, 60, 70, 80, 90, 100, 110};
  const auto base = Logits(bytes_, prompt);
  const auto no_freqs = Logits(Rewrite(*src_, [](GgufWriter&) {}, {}, {"rope_freqs.weight"}), prompt);
  const auto factor1 = Logits(Rewrite(*src_, [](GgufWriter& w) {
    w.Set("llama.rope.scaling.type", GgufValue::Of(std::string("linear")));
    w.Set("llama.rope.scaling.factor", GgufValue::Of(1.0f));
  }), prompt);
  const auto factor4 = Logits(Rewrite(*src_, [](GgufWriter& w) {
    w.Set("llama.rope.scaling.type", GgufValue::Of(std::string("linear")));
    w.Set("llama.rope.scaling.factor", GgufValue::Of(4.0f));
  }), prompt);
  EXPECT_EQ(MaxDiff(base, factor1), 0.0f);
  EXPECT_GT(MaxDiff(base, no_freqs), 1e-3f);
  EXPECT_GT(MaxDiff(base, factor4), 1e-3f);
}

// The fingerprint covers every metadata value and every tensor byte: a copy
// differing in one value, or in one byte deep inside a tensor (where the old
// sampled hash never looked), is another model; an identical copy is not.
TEST_F(ModelLoad, FingerprintCoversEveryValueAndEveryByte) {
  auto fingerprint = [](const std::vector<uint8_t>& bytes) {
    auto g = GgufFile::Parse(bytes);
    PC_CHECK(g.ok());
    auto m = Model::FromGguf(std::move(*g), 1);
    PC_CHECK(m.ok());
    return (*m)->fingerprint();
  };
  const Hash128 base = fingerprint(Rewrite(*src_, [](GgufWriter&) {}));
  EXPECT_EQ(fingerprint(Rewrite(*src_, [](GgufWriter&) {})), base);
  EXPECT_NE(fingerprint(Rewrite(*src_, [](GgufWriter& w) { w.Set("llama.rope.freq_base", GgufValue::Of(500001.0f)); })),
            base);
  EXPECT_NE(fingerprint(Rewrite(*src_, [](GgufWriter& w) { w.Set("general.name", GgufValue::Of(std::string("x"))); })),
            base);
  // One byte of the last layer's ffn_down, 300 KB into the tensor.
  std::vector<uint8_t> bytes = Rewrite(*src_, [](GgufWriter&) {});
  auto g = GgufFile::Parse(bytes);
  ASSERT_TRUE(g.ok());
  const GgufTensorInfo* t = g->FindTensor("blk.3.ffn_down.weight");
  ASSERT_NE(t, nullptr);
  ASSERT_GT(t->size_bytes, 300000u);
  const size_t at = static_cast<size_t>(t->data - bytes.data()) + 300000;
  bytes[at] ^= 0x01;
  EXPECT_NE(fingerprint(bytes), base);
}

}  // namespace
}  // namespace pc
