// make-model output loads back and runs, in every weight type, with the
// built-in vocabulary and with a copied one.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <cstring>
#include <fstream>

#include "kernels/quant.h"
#include "model/sequence.h"
#include "model/make_model.h"
#include "reference_generate.h"
#include "test_support.h"

namespace pc {
namespace {

std::string WordList() {
  const std::string path = test::TempPath("words.txt");
  std::ofstream f(path);
  for (const char* w : {"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "hello", "world"}) f << w << "\n";
  return path;
}

MakeModelOptions TinyOptions(TensorType type) {
  MakeModelOptions opt;
  opt.shape = *BuiltinShape("tiny");
  opt.type = type;
  opt.vocab_size = 1024;
  opt.words_path = WordList();
  return opt;
}

// opt written to the temp file `name` and loaded on two threads; null
// (with a test failure) when either step fails.
std::unique_ptr<Model> WriteAndLoad(const MakeModelOptions& opt, const std::string& name) {
  const std::string path = test::TempPath(name);
  const Status made = MakeModel(opt, path);
  EXPECT_TRUE(made.ok()) << made.message();
  if (!made.ok()) return nullptr;
  auto model = Model::Load(path, 2);
  EXPECT_TRUE(model.ok()) << model.status().message();
  return model.ok() ? std::move(*model) : nullptr;
}

// The tiny shape in Q8_0 with n_layer layers (WriteAndLoad).
std::unique_ptr<Model> TinyQ8Model(const std::string& name, int n_layer) {
  MakeModelOptions opt = TinyOptions(TensorType::kQ8_0);
  opt.shape.n_layer = n_layer;
  return WriteAndLoad(opt, name);
}

// A built-in shape of another architecture shrunk to test size: 2 layers
// of 128, 8 experts of 64 with 2 used, an FFN of 256, windows of 8.
ModelShape Shrunk(ModelShape shape) {
  shape.n_embd = 128, shape.n_layer = 2, shape.n_ctx = 512;
  if (shape.n_expert > 0) shape.n_expert = 8, shape.n_expert_used = 2, shape.n_ff_expert = 64;
  if (shape.n_ff > 0) shape.n_ff = 256;
  if (shape.sliding_window > 0) shape.sliding_window = 8;
  return shape;
}

// That shape in Q8_0 (WriteAndLoad).
std::unique_ptr<Model> ShrunkQ8Model(const std::string& builtin) {
  MakeModelOptions opt = TinyOptions(TensorType::kQ8_0);
  opt.shape = Shrunk(*BuiltinShape(builtin));
  return WriteAndLoad(opt, "shrunk-" + builtin + ".gguf");
}

class MakeModelTypes : public ::testing::TestWithParam<TensorType> {};

TEST_P(MakeModelTypes, LoadsBackAndGenerates) {
  const std::string path = test::TempPath(std::string("tiny-") + TensorTypeName(GetParam()) + ".gguf");
  ASSERT_TRUE(MakeModel(TinyOptions(GetParam()), path).ok());
  auto model = Model::Load(path, 2);
  ASSERT_TRUE(model.ok()) << model.status().message();
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.n_embd, 128);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_kv_head, 2);
  EXPECT_EQ(c.n_vocab, 1024);
  const GgufTensorInfo* q = (*model)->gguf().FindTensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, GetParam());
  EXPECT_EQ((*model)->gguf().FindTensor("output.weight"), nullptr) << "tiny is tied";
  auto tok = Tokenizer::FromGguf((*model)->gguf());
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EXPECT_EQ(tok->n_vocab(), c.n_vocab) << "one embedding row per token";
  // The built-in vocabulary spells words whole.
  const auto ids = tok->Encode("hello world", {.add_special = false});
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_EQ(tok->Decode(ids), " hello world");
  GenerateOptions opt;
  opt.max_tokens = 8;
  opt.sampling.temperature = 0;
  opt.ignore_eos = true;
  std::vector<int32_t> out;
  auto st = Generate(**model, *tok, tok->Encode("the quick brown fox"), opt, [&](const TokenEvent& e) {
    out.push_back(e.id);
    return true;
  });
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(out.size(), 8u);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MakeModelTypes,
                         ::testing::Values(TensorType::kF32, TensorType::kF16, TensorType::kBF16,
                                           TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kMXFP4),
                         [](const auto& info) { return std::string(TensorTypeName(info.param)); });

// --copy writes an induction head into the first layers: after the first
// tokens of a passage of its prompt, the model continues the passage (in
// every shape that has room for it: tiny, and a 3-layer one whose other layer
// is random), and the file says which rope base it was built for. Shapes
// without room are refused by name.
TEST(MakeModel, CopyModelContinuesAPassageOfItsPrompt) {
  for (int layers : {2, 3}) {
    MakeModelOptions opt = TinyOptions(TensorType::kQ8_0);
    opt.shape.n_layer = layers;
    opt.copy = true;
    const std::string path = test::TempPath("tiny-copy.gguf");
    ASSERT_TRUE(MakeModel(opt, path).ok());
    auto model = Model::Load(path, 2);
    ASSERT_TRUE(model.ok()) << model.status().message();
    EXPECT_FLOAT_EQ((*model)->config().rope_base, 1e12f);
    auto tok = Tokenizer::FromGguf((*model)->gguf());
    ASSERT_TRUE(tok.ok());
    std::vector<int32_t> doc(300);
    for (size_t i = 0; i < doc.size(); ++i) doc[i] = static_cast<int32_t>(10 + (i * 389) % 1000);  // distinct
    std::vector<int32_t> prompt(doc.begin(), doc.end());
    prompt.insert(prompt.end(), doc.begin() + 120, doc.begin() + 128);
    GenerateOptions g;
    g.max_tokens = 24;
    g.sampling.temperature = 0;
    g.ignore_eos = true;
    std::vector<int32_t> out;
    ASSERT_TRUE(Generate(**model, *tok, prompt, g, [&](const TokenEvent& e) {
                  out.push_back(e.id);
                  return true;
                }).ok());
    EXPECT_EQ(out, std::vector<int32_t>(doc.begin() + 128, doc.begin() + 152)) << layers << " layers";
  }
  MakeModelOptions narrow = TinyOptions(TensorType::kQ8_0);
  narrow.copy = true;
  narrow.shape.n_kv_head = narrow.shape.n_head;  // one query head per KV head: no room for the second head
  const Status st = MakeModel(narrow, test::TempPath("tiny-copy-narrow.gguf"));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--copy"), std::string::npos) << st.message();
}

// A long prompt runs in chunks of kPrefillChunkTokens; since every kernel is
// batch-invariant, the cache and logits equal those of one forward pass over
// the whole prompt, and of the prompt fed in uneven pieces (as the server's
// token budget cuts it), bit for bit. Quantized and float weights (their
// matmuls tile tokens differently).
class ChunkedPrefill : public ::testing::TestWithParam<TensorType> {};

TEST_P(ChunkedPrefill, EqualsOneForwardPass) {
  const std::string path = test::TempPath(std::string("tiny-chunks-") + TensorTypeName(GetParam()) + ".gguf");
  ASSERT_TRUE(MakeModel(TinyOptions(GetParam()), path).ok());
  auto model = Model::Load(path, 2);
  ASSERT_TRUE(model.ok()) << model.status().message();
  Model& m = **model;
  const size_t n = kPrefillChunkTokens * 2 + 77;
  std::vector<int32_t> prompt(n);
  for (size_t i = 0; i < n; ++i) prompt[i] = static_cast<int32_t>(1 + (i * 7919) % 1000);
  Session chunked(m, n, KvDtype::kF16), whole(m, n, KvDtype::kF16), pieces(m, n, KvDtype::kF16),
      small(m, n, KvDtype::kF16);
  auto copy = [](std::span<const float> l) { return std::vector<float>(l.begin(), l.end()); };
  const std::vector<float> a = copy(chunked.Prefill(prompt));
  // One forward pass over everything, bypassing the chunking.
  ASSERT_TRUE(whole.Reserve(n).ok());
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < n; ++i) batch.push_back({prompt[i], static_cast<int32_t>(i), whole.block_table(), i + 1 == n});
  std::vector<float> b;
  m.Forward(batch, whole.store(), &b);
  // Uneven pieces: 1, 53, 209, 677, ... tokens.
  std::vector<float> c;
  for (size_t at = 0, len = 1; at < n; at += len, len = len * 3 + 50) {
    len = std::min(len, n - at);
    c = copy(pieces.Prefill({prompt.data() + at, len}));
  }
  // Short pieces such as cache hits add, whose attention is cut by head and
  // row across the two threads (model/attn_plan.h): 1, 3, 4, ..., 30 tokens,
  // then the rest.
  std::vector<float> d;
  {
    const size_t lens[] = {1, 3, 4, 5, 7, 8, 9, 12, 16, 17, 25, 30};
    size_t at = 0;
    for (size_t i = 0; at < n; ++i) {
      const size_t len = i < std::size(lens) ? lens[i] : n - at;
      d = copy(small.Prefill({prompt.data() + at, len}));
      at += len;
    }
  }
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "chunked vs one pass";
  ASSERT_EQ(a.size(), d.size());
  EXPECT_EQ(0, std::memcmp(a.data(), d.data(), a.size() * sizeof(float))) << "chunked vs short pieces";
  ASSERT_EQ(a.size(), c.size());
  EXPECT_EQ(0, std::memcmp(a.data(), c.data(), a.size() * sizeof(float))) << "chunked vs pieces";
  const size_t layer_bytes = chunked.store().block_layer_bytes();
  for (size_t blk = 0; blk * chunked.store().block_size() < n; ++blk) {
    for (size_t l = 0; l < chunked.store().num_layers(); ++l) {
      for (Session* other : {&whole, &pieces, &small}) {
        ASSERT_EQ(0, std::memcmp(chunked.store().BlockK(l, chunked.block_table()[blk]),
                                 other->store().BlockK(l, other->block_table()[blk]), layer_bytes))
            << "K block " << blk << " layer " << l;
        ASSERT_EQ(0, std::memcmp(chunked.store().BlockV(l, chunked.block_table()[blk]),
                                 other->store().BlockV(l, other->block_table()[blk]), layer_bytes))
            << "V block " << blk << " layer " << l;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, ChunkedPrefill,
                         ::testing::Values(TensorType::kQ8_0, TensorType::kF16, TensorType::kBF16),
                         [](const auto& info) { return std::string(TensorTypeName(info.param)); });

// How attention is cut into work items depends on the thread count and the
// batch (a short piece is split by K/V head, and within one span by rows
// too; a long one is not); the bits do not: a prompt, then pieces of 25, 9
// and 1 tokens on top of it (inside the first span and past it), with 1, 2
// and 3 threads, equal one pass over all of it.
TEST(MakeModel, ThreadCountDoesNotChangeTheBits) {
  const std::string path = test::TempPath("tiny-threads.gguf");
  ASSERT_TRUE(MakeModel(TinyOptions(TensorType::kQ8_0), path).ok());
  for (size_t first : {size_t{400}, size_t{500}, size_t{600}}) {
    const size_t n = first + 25 + 9 + 1;
    std::vector<int32_t> prompt(n);
    for (size_t i = 0; i < n; ++i) prompt[i] = static_cast<int32_t>(1 + (i * 389) % 1000);
    std::vector<float> want;
    for (int threads : {1, 2, 3}) {
      auto model = Model::Load(path, threads);
      ASSERT_TRUE(model.ok()) << model.status().message();
      Session pieces(**model, n, KvDtype::kF16), whole(**model, n, KvDtype::kF16);
      std::vector<float> got;
      for (size_t at = 0; size_t len : {first, size_t{25}, size_t{9}, size_t{1}}) {
        const std::span<const float> l = pieces.Prefill({prompt.data() + at, len});
        got.assign(l.begin(), l.end());
        at += len;
      }
      ASSERT_TRUE(whole.Reserve(n).ok());
      std::vector<BatchToken> batch;
      for (size_t i = 0; i < n; ++i) batch.push_back({prompt[i], static_cast<int32_t>(i), whole.block_table(), i + 1 == n});
      std::vector<float> one_pass;
      (*model)->Forward(batch, whole.store(), &one_pass);
      ASSERT_EQ(got.size(), one_pass.size());
      EXPECT_EQ(0, std::memcmp(got.data(), one_pass.data(), got.size() * sizeof(float))) << first << ", threads " << threads;
      if (want.empty()) want = got;
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << first << ", threads " << threads;
      const size_t last = pieces.store().num_layers() - 1, blk = (n - 30) / pieces.store().block_size();
      const uint8_t* k = pieces.store().BlockK(last, pieces.block_table()[blk]);
      const uint8_t* kw = whole.store().BlockK(last, whole.block_table()[blk]);
      EXPECT_EQ(0, std::memcmp(k, kw, pieces.store().block_layer_bytes())) << first << ", threads " << threads;
    }
  }
}

// A forward pass dropped between two stages of a layer (the engine drops a
// step so a cache hit runs first) asks five times a layer (Forward says
// where; the first layer's attention half excepted), returns false at
// once, and leaves partly written K/V that the same batch run again
// overwrites: its logits and cache then equal an undisturbed run's, bit for
// bit, and the batch that ran in between (another sequence) is unaffected.
// With a news counter that every ask moves (a request arriving each time),
// the attention stages ask between their work items too, and a drop there
// is the same.
void ExpectDroppedRunAgainEqualsUndisturbed(Model& m, bool with_news) {
  const int layers = m.config().n_layer;
  ASSERT_EQ(layers, 4);
  const size_t n = 70;
  std::vector<int32_t> prompt(n);
  for (size_t i = 0; i < n; ++i) prompt[i] = static_cast<int32_t>(1 + (i * 613) % 900);
  Session undisturbed(m, n, KvDtype::kF16), dropped(m, n, KvDtype::kF16), other(m, n, KvDtype::kF16);
  auto batch_of = [&](Session& s, size_t from, size_t len) {
    EXPECT_TRUE(s.Reserve(from + len).ok());
    std::vector<BatchToken> b;
    for (size_t i = from; i < from + len; ++i)
      b.push_back({prompt[i], static_cast<int32_t>(i), s.block_table(), i + 1 == from + len});
    return b;
  };
  std::vector<float> want, got, scratch(3, 7.0f);
  m.Forward(batch_of(undisturbed, 0, 30), undisturbed.store(), &want);
  m.Forward(batch_of(undisturbed, 30, n - 30), undisturbed.store(), &want);
  m.Forward(batch_of(dropped, 0, 30), dropped.store(), &got);
  std::atomic<uint64_t> news{0};
  const std::atomic<uint64_t>* counter = with_news ? &news : nullptr;
  int asks = Model::kAsksPerLayer * layers - 1;  // between a layer's stages but before the first attention
  if (with_news) {
    Session probe(m, n, KvDtype::kF16);
    std::vector<float> logits;
    m.Forward(batch_of(probe, 0, 30), probe.store(), &logits);
    int asked = 0;
    EXPECT_TRUE(m.Forward(batch_of(probe, 30, n - 30), probe.store(), &logits, [&] { return ++news > 0 && ++asked > 0; }, &news));
    EXPECT_GT(asked, asks) << "the attention stages asked between their items";
    asks = asked;
  }
  for (int stop_at = 1; stop_at <= asks; ++stop_at) {
    int asked = 0;
    const bool done = m.Forward(batch_of(dropped, 30, n - 30), dropped.store(), &scratch,
                                [&] { return ++news > 0 && ++asked < stop_at; }, counter);
    EXPECT_FALSE(done);
    EXPECT_EQ(asked, stop_at);  // never asked again after a "no"
    EXPECT_EQ(scratch, std::vector<float>(3, 7.0f)) << "a dropped pass leaves the logits alone";
    std::vector<float> between;  // the step that runs instead
    m.Forward(batch_of(other, 0, 20), other.store(), &between);
  }
  int asked = 0;
  EXPECT_TRUE(m.Forward(batch_of(dropped, 30, n - 30), dropped.store(), &got, [&] { return ++news > 0 && ++asked > 0; },
                        counter));
  EXPECT_EQ(asked, asks);
  ASSERT_EQ(want.size(), got.size());
  EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
  const size_t layer_bytes = dropped.store().block_layer_bytes();
  for (size_t blk = 0; blk * dropped.store().block_size() < n; ++blk) {
    for (size_t l = 0; l < dropped.store().num_layers(); ++l) {
      ASSERT_EQ(0, std::memcmp(undisturbed.store().BlockK(l, undisturbed.block_table()[blk]),
                               dropped.store().BlockK(l, dropped.block_table()[blk]), layer_bytes))
          << "K block " << blk << " layer " << l;
      ASSERT_EQ(0, std::memcmp(undisturbed.store().BlockV(l, undisturbed.block_table()[blk]),
                               dropped.store().BlockV(l, dropped.block_table()[blk]), layer_bytes))
          << "V block " << blk << " layer " << l;
    }
  }
}

// PassProgress, as keep_going sees it: the outermost pass's layers done,
// rising half a layer at a time; a pass run inside keep_going leaves it alone;
// 0 once no pass runs.
TEST(MakeModel, PassProgressCountsTheOutermostPassLayers) {
  std::unique_ptr<Model> model = TinyQ8Model("tiny-progress.gguf", 4);
  ASSERT_TRUE(model);
  Model& m = *model;
  const size_t n = 20;
  Session a(m, n, KvDtype::kF16), b(m, n, KvDtype::kF16);
  auto batch_of = [&](Session& s) {
    EXPECT_TRUE(s.Reserve(n).ok());
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < n; ++i) batch.push_back({static_cast<int32_t>(1 + i), static_cast<int32_t>(i), s.block_table(), i + 1 == n});
    return batch;
  };
  EXPECT_EQ(m.PassProgress(), 0.0);
  std::vector<double> seen;
  std::vector<float> logits, inner_logits;
  EXPECT_TRUE(m.Forward(batch_of(a), a.store(), &logits, [&] {
    seen.push_back(m.PassProgress());
    if (seen.size() == 7) {
      m.Forward(batch_of(b), b.store(), &inner_logits);
      EXPECT_EQ(m.PassProgress(), seen.back()) << "a pass inside keep_going leaves the outer one's progress";
    }
    return true;
  }));
  EXPECT_EQ(m.PassProgress(), 0.0);
  ASSERT_EQ(seen.size(), static_cast<size_t>(Model::kAsksPerLayer * 4 - 1));
  EXPECT_EQ(seen.front(), 0.0);
  EXPECT_EQ(seen.back(), 0.875);  // the last layer's feed-forward half
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_LE(seen[i - 1], seen[i]);
  for (double p : {0.125, 0.25, 0.375, 0.5, 0.625, 0.75}) {
    EXPECT_NE(std::find(seen.begin(), seen.end(), p), seen.end()) << p;
  }
}

TEST(MakeModel, ADroppedForwardRunAgainEqualsAnUndisturbedOne) {
  std::unique_ptr<Model> model = TinyQ8Model("tiny-dropped.gguf", 4);
  ASSERT_TRUE(model);
  ExpectDroppedRunAgainEqualsUndisturbed(*model, false);
  ExpectDroppedRunAgainEqualsUndisturbed(*model, true);
}

// A forward pass paused between two stages of a layer, while
// another batch (another sequence) runs a whole forward pass from inside
// keep_going (the engine pauses a step so for a cache hit), goes on where it
// stood: both give the logits of undisturbed runs, bit for bit, at every
// point the pause can take; with a news counter that every ask moves,
// also between the work items of its attention stages.
void ExpectPausedEqualsUndisturbed(Model& m, bool with_news) {
  const size_t n = 70, n_other = 20;
  std::vector<int32_t> prompt(n), other_prompt(n_other);
  for (size_t i = 0; i < n; ++i) prompt[i] = static_cast<int32_t>(1 + (i * 613) % 900);
  for (size_t i = 0; i < n_other; ++i) other_prompt[i] = static_cast<int32_t>(1 + (i * 271) % 900);
  auto batch_of = [](Session& s, const std::vector<int32_t>& p, size_t len) {
    EXPECT_TRUE(s.Reserve(len).ok());
    std::vector<BatchToken> b;
    for (size_t i = 0; i < len; ++i) b.push_back({p[i], static_cast<int32_t>(i), s.block_table(), true});
    return b;
  };
  std::vector<float> want, want_other;
  {
    Session a(m, n, KvDtype::kF16), b(m, n, KvDtype::kF16);
    m.Forward(batch_of(a, prompt, n), a.store(), &want);
    m.Forward(batch_of(b, other_prompt, n_other), b.store(), &want_other);
  }
  std::atomic<uint64_t> news{0};
  const std::atomic<uint64_t>* counter = with_news ? &news : nullptr;
  int asks = Model::kAsksPerLayer * m.config().n_layer - 1;
  if (with_news) {
    Session probe(m, n, KvDtype::kF16);
    std::vector<float> logits;
    int asked = 0;
    EXPECT_TRUE(m.Forward(batch_of(probe, prompt, n), probe.store(), &logits, [&] { return ++news > 0 && ++asked > 0; }, &news));
    EXPECT_GT(asked, asks) << m.config().arch << ": the attention stages asked between their items";
    asks = asked;
  }
  for (int pause_at = 1; pause_at <= asks; ++pause_at) {
    Session paused(m, n, KvDtype::kF16), other(m, n, KvDtype::kF16);
    std::vector<float> got, got_other;
    int asked = 0;
    const bool done = m.Forward(
        batch_of(paused, prompt, n), paused.store(), &got,
        [&] {
          ++news;
          if (++asked == pause_at) m.Forward(batch_of(other, other_prompt, n_other), other.store(), &got_other);
          return true;
        },
        counter);
    EXPECT_TRUE(done);
    EXPECT_EQ(asked, asks);
    ASSERT_EQ(got.size(), want.size());
    ASSERT_EQ(got_other.size(), want_other.size());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
        << m.config().arch << " paused at ask " << pause_at;
    EXPECT_EQ(0, std::memcmp(got_other.data(), want_other.data(), want_other.size() * sizeof(float)))
        << m.config().arch << " run at ask " << pause_at;
  }
}

// The same on a qwen3moe (routers, experts' buffers) and a gemma3 (windows
// over a 70-token prompt, their own rotations, post norms).
TEST(MakeModel, AForwardPausedForAnotherEqualsTwoUndisturbedOnes) {
  std::unique_ptr<Model> model = TinyQ8Model("tiny-paused.gguf", 4);
  ASSERT_TRUE(model);
  for (bool with_news : {false, true}) {
    ExpectPausedEqualsUndisturbed(*model, with_news);
    for (const char* builtin : {"bench-moe", "bench-gemma3"}) {
      std::unique_ptr<Model> other_arch = ShrunkQ8Model(builtin);
      ASSERT_TRUE(other_arch);
      ExpectPausedEqualsUndisturbed(*other_arch, with_news);
    }
  }
}

// Truncate keeps the positions before its point (bench-model's cached prefix
// for --pp-depth): a suffix prefilled after it gives the bits of one prompt
// of prefix and suffix, whatever was prefilled past the point before.
TEST(MakeModel, TruncatedSessionEqualsAFreshOneWithThePrefix) {
  std::unique_ptr<Model> model = TinyQ8Model("tiny-truncate.gguf", 3);
  ASSERT_TRUE(model);
  Model& m = *model;
  auto tokens = [](size_t n, size_t seed) {
    std::vector<int32_t> t(n);
    for (size_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>(1 + (i * 613 + seed * 97) % 900);
    return t;
  };
  const std::vector<int32_t> prefix = tokens(37, 1), first = tokens(20, 2), second = tokens(9, 3);
  Session reused(m, 64, KvDtype::kF16), fresh(m, 64, KvDtype::kF16);
  reused.Prefill(prefix);
  reused.Prefill(first);
  reused.Truncate(prefix.size() + first.size() + 5);  // past the end: nothing forgotten
  EXPECT_EQ(reused.num_computed(), prefix.size() + first.size());
  reused.Truncate(prefix.size());
  EXPECT_EQ(reused.num_computed(), prefix.size());
  const std::span<const float> after = reused.Prefill(second);
  const std::vector<float> got(after.begin(), after.end());
  std::vector<int32_t> whole = prefix;
  whole.insert(whole.end(), second.begin(), second.end());
  const std::span<const float> want = fresh.Prefill(whole);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
}

// Q8_0 weights are repacked at load; the ggml numerics frees the copies and
// reads the file's layout (a model loaded for it repacks nothing); switching
// back repacks and reproduces the first logits bit for bit.
TEST(MakeModel, NumericsSwitchFreesAndRestoresTheRepackedWeights) {
  const std::string path = test::TempPath("tiny-repack.gguf");
  ASSERT_TRUE(MakeModel(TinyOptions(TensorType::kQ8_0), path).ok());
  auto model = Model::Load(path, 2);
  ASSERT_TRUE(model.ok()) << model.status().message();
  Model& m = **model;
  const std::vector<int32_t> prompt = {5, 17, 99, 3, 250, 8};
  auto logits_of = [&](Model& which) {
    Session s(which, prompt.size(), KvDtype::kF16);
    const std::span<const float> l = s.Prefill(prompt);
    return std::vector<float>(l.begin(), l.end());
  };
  auto logits = [&] { return logits_of(m); };
  // Repacked for SIMD levels only (the scalar level keeps the file's layout).
  const bool simd = BestSupportedIsa() >= Isa::kAvx2 && *ActiveIsa() >= Isa::kAvx2;
  EXPECT_EQ(m.packed().num_matrices > 0, simd);
  EXPECT_EQ(m.packed().bytes > 0, simd);
  // Every copy inside one buffer of the load (huge pages where it holds one).
  if (simd) {
    const PackedWeights& pw = m.packed();
    ASSERT_EQ(pw.arenas.size(), 1u);
    const PageBuffer& arena = pw.arenas[0];
    size_t total = 0;
    for (const PackedWeights::Entry& e : pw.entries) {
      EXPECT_EQ(e.arena, 0u);
      EXPECT_LE(e.offset + e.bytes, arena.size());
      EXPECT_EQ(reinterpret_cast<uintptr_t>(pw.data(e)) % 64, 0u);
      total += e.bytes;
    }
    EXPECT_EQ(total, pw.bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(arena.data()) % (arena.size() >= PageBuffer::kHugeBytes ? PageBuffer::kHugeBytes : 4096), 0u);
  }
  const std::vector<float> first = logits();
  m.set_numerics(Numerics::kGgmlCompat);
  EXPECT_EQ(m.packed().num_matrices, 0u);
  // No copy left in the buffer: it is freed.
  for (const PageBuffer& arena : m.packed().arenas) EXPECT_EQ(arena.data(), nullptr);
  const std::vector<float> ggml = logits();
  ASSERT_EQ(ggml.size(), first.size());
  for (size_t i = 0; i < ggml.size(); ++i) ASSERT_NEAR(ggml[i], first[i], 0.05f * (1 + std::fabs(first[i]))) << i;
  // Loaded for the ggml numerics: nothing repacked, the same logits.
  auto direct = Model::Load(path, 2, Numerics::kGgmlCompat);
  ASSERT_TRUE(direct.ok()) << direct.status().message();
  EXPECT_EQ((*direct)->packed().num_matrices, 0u);
  const std::vector<float> direct_ggml = logits_of(**direct);
  ASSERT_EQ(direct_ggml.size(), ggml.size());
  EXPECT_EQ(0, std::memcmp(direct_ggml.data(), ggml.data(), ggml.size() * sizeof(float)));
  m.set_numerics(Numerics::kPrecise);
  EXPECT_EQ(m.packed().num_matrices > 0, simd);
  const std::vector<float> again = logits();
  ASSERT_EQ(again.size(), first.size());
  EXPECT_EQ(0, std::memcmp(again.data(), first.data(), first.size() * sizeof(float)));
}

TEST(MakeModel, QuantizedWeightsAreTheStandardRoundToNearestBlocks) {
  // Same seed in F32 and Q8_0: each stored Q8_0 block equals our quantizer's
  // output for the corresponding F32 row.
  const std::string f32 = test::TempPath("same-f32.gguf"), q8 = test::TempPath("same-q8.gguf");
  ASSERT_TRUE(MakeModel(TinyOptions(TensorType::kF32), f32).ok());
  ASSERT_TRUE(MakeModel(TinyOptions(TensorType::kQ8_0), q8).ok());
  auto a = GgufFile::Open(f32);
  auto b = GgufFile::Open(q8);
  ASSERT_TRUE(a.ok() && b.ok());
  const GgufTensorInfo* ta = a->FindTensor("blk.1.ffn_down.weight");
  const GgufTensorInfo* tb = b->FindTensor("blk.1.ffn_down.weight");
  ASSERT_TRUE(ta && tb);
  std::vector<uint8_t> want(tb->size_bytes);
  const size_t cols = ta->dims[0];
  for (size_t r = 0; r < ta->Rows(); ++r) {
    QuantizeRow(TensorType::kQ8_0, reinterpret_cast<const float*>(ta->data) + r * cols,
                want.data() + r * RowBytes(TensorType::kQ8_0, cols), cols);
  }
  EXPECT_EQ(0, std::memcmp(want.data(), tb->data, want.size()));
}

TEST(MakeModel, CopiesAVocabularyAndItsTokenizerStillMatches) {
  PC_SHARED_OR_SKIP(vocab, "tokenizer/ggml-vocab-llama-spm.gguf");
  MakeModelOptions opt = TinyOptions(TensorType::kQ8_0);
  opt.vocab_path = vocab;
  const std::string path = test::TempPath("tiny-spm.gguf");
  ASSERT_TRUE(MakeModel(opt, path).ok());
  auto model = Model::Load(path, 1);
  ASSERT_TRUE(model.ok()) << model.status().message();
  EXPECT_EQ((*model)->config().n_vocab, 32000);
  auto tok = Tokenizer::FromGguf((*model)->gguf());
  ASSERT_TRUE(tok.ok());
  // " Hello world" in the llama SPM vocabulary.
  EXPECT_EQ(tok->Encode("Hello world", {.add_special = false}), (std::vector<int32_t>{15043, 3186}));
}

// The benchmark shapes of other architectures, shrunk: a qwen3moe (router,
// 3-D experts, q/k norms, a head wider than n_embd / n_head) and a gemma3
// (windows, post norms, tied output) load as their architectures, every
// tensor used, and run; the built-in shapes keep the proportions they name.
TEST(MakeModel, WritesMixturesOfExpertsAndGemma3) {
  const ModelShape moe = *BuiltinShape("bench-moe"), gemma = *BuiltinShape("bench-gemma3");
  EXPECT_EQ(moe.arch, "qwen3moe");
  EXPECT_EQ(moe.n_expert, 128);
  EXPECT_EQ(moe.n_expert_used, 8);
  EXPECT_EQ(moe.head_size() * moe.n_head, 2 * moe.n_embd);
  EXPECT_EQ(gemma.arch, "gemma3");
  EXPECT_EQ(gemma.n_ff, 6 * gemma.n_embd);
  for (ModelShape shape : {Shrunk(moe), Shrunk(gemma)}) {
    MakeModelOptions opt = TinyOptions(TensorType::kQ8_0);
    opt.shape = shape;
    const std::string path = test::TempPath("made-" + shape.arch + ".gguf");
    ASSERT_TRUE(MakeModel(opt, path).ok()) << shape.arch;
    auto model = Model::Load(path, 1);
    ASSERT_TRUE(model.ok()) << model.status().message();
    const ModelConfig& c = (*model)->config();
    EXPECT_EQ(c.arch, shape.arch);
    EXPECT_EQ(c.n_expert, shape.n_expert);
    EXPECT_EQ(c.sliding_window, shape.sliding_window);
    EXPECT_EQ(c.head_dim, shape.head_size());
    Session s(**model, 40, KvDtype::kF16);
    std::vector<int32_t> prompt(30);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(3 + i * 11 % 900);
    const std::span<const float> logits = s.Prefill(prompt);
    ASSERT_EQ(logits.size(), 1024u);
    for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  }
}

TEST(MakeModel, RejectsBadShapesAndMissingWordLists) {
  MakeModelOptions opt = TinyOptions(TensorType::kF32);
  opt.shape.n_embd = 100;  // not a multiple of 32
  EXPECT_FALSE(MakeModel(opt, test::TempPath("bad.gguf")).ok());
  opt = TinyOptions(TensorType::kF32);
  opt.words_path = "/nonexistent/words";
  auto s = MakeModel(opt, test::TempPath("bad2.gguf"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("word list"), std::string::npos);
  EXPECT_FALSE(BuiltinShape("bench-7t").ok());
}

}  // namespace
}  // namespace pc
