// Prefix reuse is exact: with the cache on, every scenario yields the same
// greedy tokens and logprobs as a cold run. Plus a 10,000-operation stress
// test of the pool with invariants and content checks.
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "kvcache/prefix_cache.h"
#include "reference_generate.h"
#include "test_support.h"

namespace pc {
namespace {

struct Outcome {
  std::vector<int32_t> ids;
  std::vector<std::vector<std::pair<int32_t, float>>> tops;
  size_t cached = 0;
};

class PrefixCacheTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    path_ = test::SharedPath("models/" + GetParam() + ".gguf");
    if (path_.empty()) {
      if (test::RequireShared()) FAIL() << "shared model missing";
      GTEST_SKIP() << "../shared absent";
    }
    auto m = Model::Load(path_, 2);
    ASSERT_TRUE(m.ok()) << m.status().message();
    model_ = std::move(*m);
    auto t = Tokenizer::FromGguf(model_->gguf());
    ASSERT_TRUE(t.ok());
    tok_ = std::make_unique<Tokenizer>(std::move(*t));
  }

  GenerateOptions Opts() const {
    GenerateOptions o;
    o.max_tokens = 12;
    o.sampling.temperature = 0;
    o.ignore_eos = true;
    o.logprobs = 5;
    return o;
  }

  Outcome Cold(const std::vector<int32_t>& prompt) {
    Outcome r;
    auto st = Generate(*model_, *tok_, prompt, Opts(), [&](const TokenEvent& e) {
      r.ids.push_back(e.id);
      r.tops.push_back(e.top);
      return true;
    });
    EXPECT_TRUE(st.ok());
    return r;
  }

  Outcome Cached(PrefixCache& cache, const std::vector<int32_t>& prompt, std::string_view salt = "") {
    auto seq = cache.Start(prompt, salt);
    EXPECT_TRUE(seq.ok()) << seq.status().message();
    Outcome r;
    auto st = Generate(*model_, *tok_, **seq, prompt, Opts(), [&](const TokenEvent& e) {
      r.ids.push_back(e.id);
      r.tops.push_back(e.top);
      return true;
    });
    EXPECT_TRUE(st.ok()) << st.status().message();
    r.cached = st->num_cached_tokens;
    EXPECT_TRUE(cache.pool().CheckInvariants());
    return r;
  }

  static void ExpectSame(const Outcome& a, const Outcome& b) {
    ASSERT_EQ(a.ids, b.ids);
    for (size_t i = 0; i < a.tops.size(); ++i) {
      for (size_t j = 0; j < a.tops[i].size(); ++j) {
        EXPECT_EQ(a.tops[i][j].first, b.tops[i][j].first);
        EXPECT_NEAR(a.tops[i][j].second, b.tops[i][j].second, 1e-4);
      }
    }
  }

  std::vector<int32_t> Prompt(size_t n, int32_t seed) const {
    std::vector<int32_t> p = {1};
    for (size_t i = 1; i < n; ++i) p.push_back(3 + static_cast<int32_t>((i * 7 + seed * 13) % 400));
    return p;
  }

  PrefixCache MakeCache(size_t blocks) {
    CacheOptions o;
    o.block_size = 16;
    o.mem_bytes = blocks * 2 * model_->config().n_layer * 16 * model_->config().kv_dim() * 2;
    return PrefixCache(model_->config().kv_shape(), model_->fingerprint(), o);
  }

  std::string path_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_P(PrefixCacheTest, FullPartialAndMissAreExact) {
  PrefixCache cache = MakeCache(64);
  const auto base = Prompt(64, 1);  // four full blocks
  const Outcome cold = Cold(base);
  const Outcome miss = Cached(cache, base);
  EXPECT_EQ(miss.cached, 0u);
  ExpectSame(cold, miss);
  const Outcome full = Cached(cache, base);  // full hit: last token recomputed
  EXPECT_EQ(full.cached, 63u);
  ExpectSame(cold, full);
  auto mid = base;  // diverges inside block 2 (position 40)
  mid[40] = 7;
  mid.resize(50);
  const Outcome mid_hit = Cached(cache, mid);
  EXPECT_EQ(mid_hit.cached, 40u);  // two whole blocks and block 2's first 8 tokens
  ExpectSame(Cold(mid), mid_hit);
  auto edge = base;  // diverges exactly at the block boundary (position 48)
  edge[48] = 9;
  const Outcome edge_hit = Cached(cache, edge);
  EXPECT_EQ(edge_hit.cached, 48u);
  ExpectSame(Cold(edge), edge_hit);
  // Generated tokens were cached too (their partial block indexed as the
  // sequence ended): the prompt plus its output hits all but its last token.
  auto extended = base;
  extended.insert(extended.end(), cold.ids.begin(), cold.ids.end() - 1);
  const Outcome ext = Cached(cache, extended);
  EXPECT_EQ(ext.cached, 74u);
  ExpectSame(Cold(extended), ext);
}

// Reuse is token-exact: a prompt repeated whole shares the leading tokens of
// the block its first run filled with prompt and generated tokens (copied
// into a private block), all but the last token; one that parts from it
// inside that block shares up to the parting; outputs stay exact.
TEST_P(PrefixCacheTest, APartialLastBlockIsReusedUpToTheFirstDifferentToken) {
  PrefixCache cache = MakeCache(64);
  const auto prompt = Prompt(74, 5);  // four full blocks and 10 tokens
  const Outcome cold = Cold(prompt);
  const Outcome first = Cached(cache, prompt);  // fills block 5 with 10 prompt + 6 generated tokens
  EXPECT_EQ(first.cached, 0u);
  ExpectSame(cold, first);
  const Outcome again = Cached(cache, prompt);
  EXPECT_EQ(again.cached, 73u);
  ExpectSame(cold, again);
  auto parted = prompt;  // the same up to position 69, then other tokens
  parted[69] = 11;
  parted[70] = 12;
  const Outcome part = Cached(cache, parted);
  EXPECT_EQ(part.cached, 69u);
  ExpectSame(Cold(parted), part);
  // Past the tail's block the next whole block is the prompt's own again.
  auto longer = prompt;
  longer.insert(longer.end(), first.ids.begin(), first.ids.begin() + 6);  // block 5 exactly as the first run filled it
  longer.push_back(7);
  longer.push_back(8);
  const Outcome l = Cached(cache, longer);
  EXPECT_EQ(l.cached, 80u);
  ExpectSame(Cold(longer), l);
  // A tail its sequence left partial (66 prompt + 11 generated tokens: 13 in
  // block 5) is indexed when the sequence ends: the repeat shares 65.
  const auto short_tail = Prompt(66, 6);
  EXPECT_EQ(Cached(cache, short_tail).cached, 1u);  // BOS, which every prompt here starts with
  const Outcome repeat = Cached(cache, short_tail);
  EXPECT_EQ(repeat.cached, 65u);
  ExpectSame(Cold(short_tail), repeat);
  EXPECT_TRUE(cache.pool().CheckInvariants());
}

// A prompt is hashed once on its way in: given its keys (as the engine
// computes them at Submit), Start and the prefill hash nothing of the
// prompt again; only blocks the generated tokens fill are hashed. The
// outcome is the same as without keys.
TEST_P(PrefixCacheTest, StartWithTheKeysHashesThePromptOnce) {
  PrefixCache cache = MakeCache(64);
  const auto prompt = Prompt(64, 3);  // four full blocks
  const std::vector<Hash128> keys = cache.BlockHashes(prompt, "");
  ASSERT_EQ(keys.size(), 4u);
  EXPECT_EQ(cache.num_block_hashes(), 4u);
  auto seq = cache.Start(prompt, "", true, keys);
  ASSERT_TRUE(seq.ok());
  Outcome r;
  auto st = Generate(*model_, *tok_, **seq, prompt, Opts(), [&](const TokenEvent& e) {
    r.ids.push_back(e.id);
    r.tops.push_back(e.top);
    return true;
  });
  ASSERT_TRUE(st.ok());
  // 64 prompt + 11 generated tokens with K/V: no new full block past the prompt.
  EXPECT_EQ(cache.num_block_hashes(), 4u);
  ExpectSame(Cold(prompt), r);
  seq->reset();
  // The blocks were registered under those keys: a second start hits them.
  const Outcome again = Cached(cache, prompt);
  EXPECT_EQ(again.cached, 63u);
  EXPECT_EQ(cache.num_block_hashes(), 8u);  // that Start was given no keys: hashed the prompt itself
}

// Every adoption checks the tokens a block holds. A block indexed under a
// key that another prompt's block hashes to (a collision, simulated by
// installing it under that key) is never adopted by that prompt; a payload
// that does not hold the tokens it is installed for is refused.
TEST_P(PrefixCacheTest, AdoptionChecksTheTokensABlockHolds) {
  PrefixCache cache = MakeCache(64);
  const auto a = Prompt(40, 1), b = Prompt(40, 2);
  ASSERT_TRUE(Cached(cache, b).ids.size() > 0);
  auto seq = cache.Start(b, "");
  ASSERT_TRUE(seq.ok());
  const std::vector<uint8_t> b0 = cache.BlockBytes((*seq)->block_table()[0]);
  seq->reset();
  const Hash128 key_a0 = cache.BlockHashes(a, "")[0];
  const std::span<const int32_t> a_tokens(a.data(), 16), b_tokens(b.data(), 16);
  using R = PrefixCache::Install::Result;
  EXPECT_EQ(cache.InstallBlock(key_a0, b0, a_tokens).result, R::kWrongTokens);  // b's payload claimed for a's tokens
  EXPECT_EQ(cache.num_token_mismatches(), 1u);
  EXPECT_EQ(cache.InstallBlock(key_a0, std::span<const uint8_t>(b0).first(b0.size() - 1), b_tokens).result, R::kMalformed);
  const PrefixCache::Install planted = cache.InstallBlock(key_a0, b0, b_tokens);  // under a's key, honest tokens
  ASSERT_TRUE(planted.installed());
  EXPECT_EQ(cache.InstallBlock(key_a0, b0, b_tokens).result, R::kAlreadyCached);
  cache.ReleaseBlock(planted.block);
  const Outcome got = Cached(cache, a);
  // The lookup hits, the token check refuses; only the first token (BOS,
  // the same in both prompts) is shared, from b's first block.
  EXPECT_EQ(got.cached, 1u);
  EXPECT_EQ(cache.num_token_mismatches(), 2u);
  ExpectSame(Cold(a), got);
}

// A request whose first blocks are still in the pool and the rest come
// from a tier: the pool's leading blocks are held while the rest is
// installed, so the installs (which take blocks, evicting the least recently
// used) never evict the prefix they continue. Without the hold, a full pool
// gives up the first block and the whole prefix misses.
TEST_P(PrefixCacheTest, HeldLeadingBlocksSurviveTheInstallsThatFollowThem) {
  PrefixCache cache = MakeCache(6);
  const auto a = Prompt(49, 1);  // 3 whole blocks
  ASSERT_FALSE(Cached(cache, a).ids.empty());
  const std::vector<Hash128> keys = cache.BlockHashes(a, "");
  std::vector<std::vector<uint8_t>> payload;
  for (size_t i = 0; i < 3; ++i) payload.push_back(cache.BlockBytes(*cache.pool().Lookup(keys[i])));
  // a's first block used again (a 17-token prompt), then another prompt
  // takes the pool: the least recently used go, a's blocks 1 and 2 first.
  ASSERT_FALSE(Cached(cache, std::vector<int32_t>(a.begin(), a.begin() + 17)).ids.empty());
  ASSERT_FALSE(Cached(cache, Prompt(49, 2)).ids.empty());
  ASSERT_EQ(cache.NumPoolLeading(keys), 1u) << "the scenario needs block 0 alone in the pool";
  const std::vector<int32_t> held = cache.HoldPoolLeading(keys);
  ASSERT_EQ(held.size(), 1u);
  std::vector<int32_t> installed;
  for (size_t i = 1; i < 3; ++i) {
    const PrefixCache::Install b = cache.InstallBlock(keys[i], payload[i], std::span<const int32_t>(a).subspan(16 * i, 16));
    ASSERT_TRUE(b.installed()) << "block " << i;
    installed.push_back(b.block);
  }
  EXPECT_EQ(cache.NumPoolLeading(keys), 3u) << "an install evicted the prefix it continues";
  for (int32_t b : held) cache.ReleaseBlock(b);
  for (int32_t b : installed) cache.ReleaseBlock(b);
  const Outcome got = Cached(cache, a);
  EXPECT_EQ(got.cached, 48u);
  ExpectSame(Cold(a), got);
  EXPECT_TRUE(cache.pool().CheckInvariants());
}

TEST_P(PrefixCacheTest, DifferentSaltMissesAndOptOutNeitherReadsNorWrites) {
  PrefixCache cache = MakeCache(64);
  const auto p = Prompt(40, 2);
  const Outcome cold = Cold(p);
  ExpectSame(cold, Cached(cache, p, "tenant-a"));
  const Outcome other = Cached(cache, p, "tenant-b");
  EXPECT_EQ(other.cached, 0u);
  ExpectSame(cold, other);
  EXPECT_EQ(Cached(cache, p, "tenant-a").cached, 39u);  // all but the last prompt token
  const int32_t cached_before = cache.pool().num_cached();
  auto seq = cache.Start(p, "tenant-a", /*use_cache=*/false);
  ASSERT_TRUE(seq.ok());
  EXPECT_EQ((*seq)->num_computed(), 0u);
  Outcome r;
  ASSERT_TRUE(Generate(*model_, *tok_, **seq, p, Opts(), [&](const TokenEvent& e) {
                r.ids.push_back(e.id);
                return true;
              }).ok());
  EXPECT_EQ(r.ids, cold.ids);
  seq->reset();
  EXPECT_EQ(cache.pool().num_cached(), cached_before);
}

TEST_P(PrefixCacheTest, EvictionUnderPressureThenReuseIsExact) {
  PrefixCache cache = MakeCache(8);  // 128 tokens of KV in all
  const auto a = Prompt(64, 3), b = Prompt(64, 4);
  const Outcome cold_a = Cold(a);
  ExpectSame(cold_a, Cached(cache, a));
  ExpectSame(Cold(b), Cached(cache, b));  // evicts a's blocks
  const Outcome again = Cached(cache, a);
  EXPECT_LT(again.cached, 63u);
  ExpectSame(cold_a, again);
  ExpectSame(cold_a, Cached(cache, a));  // and now it hits again
}

TEST_P(PrefixCacheTest, ConcurrentSequencesShareAPrefixReadOnly) {
  PrefixCache cache = MakeCache(64);
  const auto shared = Prompt(48, 5);
  ExpectSame(Cold(shared), Cached(cache, shared));  // warm the prefix
  auto p1 = shared, p2 = shared;
  p1.push_back(11);
  p1.push_back(12);
  p2.push_back(21);
  auto s1 = cache.Start(p1, "");
  auto s2 = cache.Start(p2, "");
  ASSERT_TRUE(s1.ok() && s2.ok());
  EXPECT_EQ((*s1)->num_computed(), 48u);
  EXPECT_EQ((*s2)->num_computed(), 48u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(cache.pool().refcount((*s1)->block_table()[i]), 2);
  // Interleave the two sequences step by step.
  std::vector<float> l1, l2;
  std::vector<int32_t> out1, out2;
  auto r1 = RunBatch(*model_, **s1, std::span<const int32_t>(p1).subspan(48), &l1);
  auto r2 = RunBatch(*model_, **s2, std::span<const int32_t>(p2).subspan(48), &l2);
  ASSERT_TRUE(r1.ok() && r2.ok());
  for (int i = 0; i < 8; ++i) {
    out1.push_back(Argmax(l1));
    out2.push_back(Argmax(l2));
    ASSERT_TRUE(RunBatch(*model_, **s1, {&out1.back(), 1}, &l1).ok());
    ASSERT_TRUE(RunBatch(*model_, **s2, {&out2.back(), 1}, &l2).ok());
  }
  const Outcome c1 = Cold(p1), c2 = Cold(p2);
  EXPECT_EQ(out1, std::vector<int32_t>(c1.ids.begin(), c1.ids.begin() + 8));
  EXPECT_EQ(out2, std::vector<int32_t>(c2.ids.begin(), c2.ids.begin() + 8));
  EXPECT_TRUE(cache.pool().CheckInvariants());
}

TEST_P(PrefixCacheTest, PoolTooSmallIsAClearErrorAndLeavesTheCacheConsistent) {
  PrefixCache cache = MakeCache(2);
  const auto p = Prompt(40, 6);
  auto seq = cache.Start(p, "");
  ASSERT_TRUE(seq.ok());
  auto st = Generate(*model_, *tok_, **seq, p, Opts(), [](const TokenEvent&) { return true; });
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("KV pool exhausted"), std::string::npos);
  seq->reset();
  EXPECT_TRUE(cache.pool().CheckInvariants());
  EXPECT_EQ(cache.pool().num_free(), 2);
}

TEST_P(PrefixCacheTest, PromptLongerThanTheContextIsAClearErrorAndLeavesTheCacheConsistent) {
  PrefixCache cache = MakeCache(64);
  const auto warm = Prompt(40, 7);
  ExpectSame(Cold(warm), Cached(cache, warm));
  const int32_t cached = cache.pool().num_cached();
  auto too_long = warm;
  too_long.resize(static_cast<size_t>(model_->config().n_ctx) + 5, 42);
  auto seq = cache.Start(too_long, "");
  ASSERT_TRUE(seq.ok());  // adopts the warm prefix...
  auto st = Generate(*model_, *tok_, **seq, too_long, Opts(), [](const TokenEvent&) { return true; });
  ASSERT_FALSE(st.ok());  // ...but the request is refused before any compute
  EXPECT_NE(st.status().message().find("exceeds the context length"), std::string::npos) << st.status().message();
  seq->reset();
  EXPECT_TRUE(cache.pool().CheckInvariants());
  EXPECT_EQ(cache.pool().num_cached(), cached);
  EXPECT_EQ(cache.pool().num_free(), cache.pool().num_blocks());
  ExpectSame(Cold(warm), Cached(cache, warm));  // and the cache still serves
}

INSTANTIATE_TEST_SUITE_P(Models, PrefixCacheTest,
                         ::testing::Values("stories260K", "tiny-gqa-f32", "tiny-gqa-f16", "tiny-gqa-q8_0",
                                           "tiny-gqa-q4_0"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) if (c == '-') c = '_';
                           return n;
                         });

// 10,000 random operations against a small pool: admit, extend, finish,
// lookup; eviction happens under pressure. After each: pool invariants,
// exact refcounts, shared blocks only when indexed; every 250 operations,
// every indexed block's K/V bytes equal a fresh computation of its prefix.
// A sequence started from a request's record reads that record: Start
// writes what it adopted there, the blocks are indexed as the record's
// count passes them (IndexComputed: the engine's scheduler counted the
// step), and Computed (a caller driving the sequence alone) appends the
// tokens past the record's own. The cache alone: no model runs.
TEST(PrefixCacheProgress, TheSequenceReadsTheRequestsRecord) {
  const KvShape shape{2, 8, 256};
  CacheOptions o;
  o.block_size = 4;
  o.mem_bytes = 16 * 2 * shape.n_layer * o.block_size * shape.kv_dim * 2;  // 16 F16 blocks
  PrefixCache cache(shape, Hash128{1, 2}, o);
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  auto rec = std::make_shared<RequestProgress>();
  rec->tokens = prompt;
  rec->num_computed = 7;  // stale: Start says what it found
  auto seq = cache.Start(rec, "");
  ASSERT_TRUE(seq.ok());
  EXPECT_EQ(rec->num_computed, 0u);
  ASSERT_TRUE((*seq)->Reserve(prompt.size()).ok());
  rec->num_computed = prompt.size();  // the scheduler counted a step of 10 tokens
  EXPECT_EQ((*seq)->num_computed(), 10u);
  EXPECT_EQ(cache.NumPoolLeading(cache.BlockHashes(prompt, "")), 0u);  // not indexed until asked
  (*seq)->IndexComputed();
  EXPECT_EQ(cache.NumPoolLeading(cache.BlockHashes(prompt, "")), 2u);
  // A second request with the same prompt adopts both blocks, in its record.
  auto rec2 = std::make_shared<RequestProgress>();
  rec2->tokens = prompt;
  auto seq2 = cache.Start(rec2, "");
  ASSERT_TRUE(seq2.ok());
  EXPECT_EQ(rec2->num_computed, 8u);
  EXPECT_EQ((*seq2)->num_cached_tokens(), 8u);
  // Driven alone: Computed counts the prompt's last tokens and appends a
  // generated one to the record.
  ASSERT_TRUE((*seq2)->Reserve(12).ok());
  (*seq2)->Computed(std::vector<int32_t>{9, 10, 77, 78});
  EXPECT_EQ(rec2->num_computed, 12u);
  EXPECT_EQ(rec2->tokens, (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 77, 78}));
  std::vector<int32_t> longer = rec2->tokens;
  EXPECT_EQ(cache.NumPoolLeading(cache.BlockHashes(longer, "")), 3u);
}

TEST(PrefixCacheStress, TenThousandRandomOperations) {
  PC_SHARED_OR_SKIP(path, "models/stories260K.gguf");
  auto model = Model::Load(path, 1);
  ASSERT_TRUE(model.ok());
  Model& m = **model;
  CacheOptions o;
  o.block_size = 4;
  o.mem_bytes = 24 * 2 * m.config().n_layer * 4 * m.config().kv_dim() * 2;  // 24 blocks
  PrefixCache cache(m.config().kv_shape(), m.fingerprint(), o);
  std::mt19937 rng(2024);
  std::vector<std::unique_ptr<CachedSequence>> live;
  std::vector<std::vector<int32_t>> live_tokens;
  std::map<std::pair<uint64_t, uint64_t>, std::vector<int32_t>> prefix_of;  // block hash -> tokens
  std::vector<float> logits;
  int ops[5] = {};
  for (int op = 0; op < 10000; ++op) {
    const int kind = static_cast<int>(rng() % 10);
    if (kind < 3 || live.empty()) {  // admit: prompts share prefixes within three families
      std::vector<int32_t> p = {1};
      const size_t len = 2 + rng() % 14;
      const int32_t family = static_cast<int32_t>(rng() % 3);
      for (size_t i = 1; i < len; ++i) p.push_back(i < 6 ? 10 + family : 20 + static_cast<int32_t>(rng() % 5));
      auto s = cache.Start(p, "");
      if (!s.ok()) {  // full hit but no block left for the private copy
        ASSERT_NE(s.status().message().find("KV pool exhausted"), std::string::npos);
        ++ops[4];
      } else if (RunBatch(m, **s, std::span<const int32_t>(p).subspan((*s)->num_computed()), &logits).ok()) {
        live.push_back(std::move(*s));
        live_tokens.push_back(p);
      } else {
        ++ops[4];  // pool exhausted: the sequence is dropped, nothing leaks
      }
      ++ops[0];
    } else if (kind < 6) {  // extend by one token
      const size_t i = rng() % live.size();
      const int32_t t = 20 + static_cast<int32_t>(rng() % 5);
      if (RunBatch(m, *live[i], {&t, 1}, &logits).ok()) live_tokens[i].push_back(t);
      ++ops[1];
    } else if (kind < 9) {  // finish: a partial tail is indexed as the sequence ends
      const size_t i = rng() % live.size();
      const std::vector<int32_t> table(live[i]->block_table().begin(), live[i]->block_table().end());
      const std::vector<int32_t> toks = live_tokens[i];
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      live_tokens.erase(live_tokens.begin() + static_cast<std::ptrdiff_t>(i));
      if (toks.size() % 4 != 0 && toks.size() / 4 < table.size()) {
        if (auto h = cache.pool().hash_of(table[toks.size() / 4])) prefix_of[{h->lo, h->hi}] = toks;
      }
      ++ops[2];
    } else {  // lookup only
      const std::vector<int32_t> p = {1, 10 + static_cast<int32_t>(rng() % 3), 11, 12};
      (void)cache.pool().Lookup(ChainBlock(Hash128{}, p));
      ++ops[3];
    }
    ASSERT_TRUE(cache.pool().CheckInvariants()) << "after op " << op;
    std::vector<int32_t> refs(static_cast<size_t>(cache.pool().num_blocks()), 0);
    for (size_t i = 0; i < live.size(); ++i) {
      const auto table = live[i]->block_table();
      for (int32_t b : table) ++refs[b];
      // Remember which token prefix each indexed block of this sequence holds.
      for (size_t k = 1; k * 4 <= live_tokens[i].size(); ++k) {
        if (auto h = cache.pool().hash_of(table[k - 1])) {
          prefix_of[{h->lo, h->hi}] = {live_tokens[i].begin(), live_tokens[i].begin() + static_cast<std::ptrdiff_t>(k * 4)};
        }
      }
    }
    for (int32_t b = 0; b < cache.pool().num_blocks(); ++b) {
      ASSERT_EQ(refs[b], cache.pool().refcount(b)) << "block " << b << " after op " << op;
      if (refs[b] > 1) {
        ASSERT_TRUE(cache.pool().hash_of(b).has_value()) << "shared block not read-only";
      }
    }
    if (op % 250 != 249) continue;
    for (int32_t b = 0; b < cache.pool().num_blocks(); ++b) {
      const auto h = cache.pool().hash_of(b);
      if (!h) continue;
      auto it = prefix_of.find({h->lo, h->hi});
      ASSERT_NE(it, prefix_of.end()) << "indexed block " << b << " with unknown prefix";
      const std::vector<int32_t>& prefix = it->second;
      Session fresh(m, prefix.size(), KvDtype::kF16, 4);
      fresh.Prefill(prefix);
      const int32_t fb = fresh.block_table()[(prefix.size() - 1) / 4];
      // A partial tail holds only its own rows.
      const size_t bytes = cache.store().block_layer_bytes() / 4 * ((prefix.size() - 1) % 4 + 1);
      for (size_t l = 0; l < fresh.store().num_layers(); ++l) {
        ASSERT_EQ(0, std::memcmp(fresh.store().BlockK(l, fb), cache.store().BlockK(l, b), bytes))
            << "K of block " << b << " layer " << l;
        ASSERT_EQ(0, std::memcmp(fresh.store().BlockV(l, fb), cache.store().BlockV(l, b), bytes));
      }
    }
  }
  live.clear();
  EXPECT_TRUE(cache.pool().CheckInvariants());
  EXPECT_EQ(cache.pool().num_free(), cache.pool().num_blocks()) << "no block leaked";
  EXPECT_GT(cache.pool().num_cached(), 0);
  std::printf("ops: %d admit, %d extend, %d finish, %d lookup; %d admissions refused (pool full)\n", ops[0],
              ops[1], ops[2], ops[3], ops[4]);
}

}  // namespace
}  // namespace pc
