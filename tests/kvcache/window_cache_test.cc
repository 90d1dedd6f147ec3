// Sliding-window models in the prefix cache (docs/KV_CACHE.md): the local
// layers' rows live in a pool of their own, a running sequence holds only
// its window's blocks there, a hit adopts a prefix only up to a boundary
// whose window tail is still indexed, and a tier's payload carries the tail.
// The cache alone: rows are written through the tables as the forward pass
// writes them, with values that name their layer and position.
#include <cstring>

#include "base/check.h"
#include "base/fp16.h"
#include "kvcache/prefix_cache.h"
#include "test_support.h"

namespace pc {
namespace {

constexpr size_t kDim = 8, kBs = 4, kWindow = 8;

// Three layers, the first and last windowed (8 positions), as gemma's mix.
KvShape Shape() { return KvShape{3, kDim, 4096, {1, 0, 1}, kWindow}; }

CacheOptions Options(size_t mem_bytes) {
  CacheOptions o;
  o.block_size = kBs;
  o.mem_bytes = mem_bytes;
  return o;
}

// Row values exact in F16: layer, position and element apart.
float KeyAt(size_t layer, size_t pos, size_t d) { return static_cast<float>(layer * 256 + pos * 2 + d); }

void WriteRows(KvSequence& seq, size_t from, size_t to) {
  const KvTables tables{seq.block_table(), seq.local_block_table()};
  for (size_t pos = from; pos < to; ++pos) {
    for (size_t l = 0; l < 3; ++l) {
      float k[kDim], v[kDim];
      for (size_t d = 0; d < kDim; ++d) k[d] = KeyAt(l, pos, d), v[d] = -KeyAt(l, pos, d);
      seq.store().Write(l, tables, pos, k, v);
    }
  }
}

// Whether the rows of [from, to) on every layer (or on layer `only`) read
// what WriteRows wrote.
bool RowsRead(KvSequence& seq, size_t from, size_t to, int only = -1) {
  const KvTables tables{seq.block_table(), seq.local_block_table()};
  for (size_t l = 0; l < 3; ++l) {
    if (only >= 0 && l != static_cast<size_t>(only)) continue;
    const KvLayerView view = seq.store().View(l, tables);
    for (size_t pos = from; pos < to; ++pos) {
      const size_t row = static_cast<size_t>(view.block_table[pos / kBs]) * kBs + pos % kBs;
      const auto* k = static_cast<const uint16_t*>(view.k) + row * kDim;
      const auto* v = static_cast<const uint16_t*>(view.v) + row * kDim;
      for (size_t d = 0; d < kDim; ++d) {
        if (Fp16ToFp32(k[d]) != KeyAt(l, pos, d) || Fp16ToFp32(v[d]) != -KeyAt(l, pos, d)) return false;
      }
    }
  }
  return true;
}

// Runs prompt through seq `step` tokens at a time; checks the window bound
// after every step.
void RunSteps(PrefixCache& cache, CachedSequence& seq, const std::vector<int32_t>& prompt, size_t step) {
  for (size_t n = seq.num_computed(); n < prompt.size();) {
    const size_t next = std::min(prompt.size(), n + step);
    ASSERT_TRUE(seq.Reserve(next).ok());
    WriteRows(seq, n, next);
    seq.Computed(std::span<const int32_t>(prompt).subspan(n, next - n));
    n = next;
    EXPECT_EQ(seq.num_global_blocks(), (n + kBs - 1) / kBs);
    EXPECT_LE(seq.num_local_blocks_held(), cache.local_blocks_per_sequence()) << "at " << n;
    EXPECT_TRUE(RowsRead(seq, n > kWindow ? n - kWindow + 1 : 0, n)) << "the window's rows at " << n;
  }
  EXPECT_TRUE(cache.pool().CheckInvariants());
  EXPECT_TRUE(cache.local_pool().CheckInvariants());
}

std::vector<int32_t> Tokens(size_t n, int32_t base) {
  std::vector<int32_t> t;
  for (size_t i = 0; i < n; ++i) t.push_back(base + static_cast<int32_t>(i));
  return t;
}

std::vector<int32_t> Join(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A sequence for prompt run to its end in steps of `step` tokens, then ended.
void RunPrompt(PrefixCache& cache, const std::vector<int32_t>& prompt, size_t step) {
  auto seq = cache.Start(prompt, "");
  ASSERT_TRUE(seq.ok());
  RunSteps(cache, **seq, prompt, step);
}

// A sequence holding every empty local block and `evict` cached ones (the
// least recently released: their tails leave the index).
std::unique_ptr<CachedSequence> HoldLocalBlocks(PrefixCache& cache, int evict) {
  const BlockPool& lp = cache.local_pool();
  const size_t take = static_cast<size_t>(lp.num_free() - lp.num_cached() + evict);
  auto hog = cache.Start(Tokens(take * kBs, 100000), "", /*use_cache=*/false);
  PC_CHECK(hog.ok() && (*hog)->Reserve(take * kBs).ok());
  return std::move(*hog);
}

TEST(WindowCache, SplitsOnlyWhenTheWindowBoundsSomething) {
  const size_t mem = size_t{1} << 20, full_block = 2 * 3 * kBs * kDim * 2;
  const PoolSizes split = PoolSizesFor(Shape(), Options(mem));
  EXPECT_GT(split.local, 0u);
  // The same bytes hold more positions than one pool of all layers would.
  EXPECT_GT(split.global, mem / full_block);
  EXPECT_LE(split.global * (full_block / 3) + split.local * (2 * full_block / 3), mem);
  KvShape no_window = Shape();
  no_window.window = 0;
  KvShape long_window = Shape();
  long_window.window = 4096;
  KvShape all_local = Shape();
  all_local.local_layers = {1, 1, 1};
  CacheOptions unbounded = Options(mem);
  unbounded.bound_windows = false;
  for (const PoolSizes& s : {PoolSizesFor(no_window, Options(mem)), PoolSizesFor(long_window, Options(mem)),
                             PoolSizesFor(all_local, Options(mem)), PoolSizesFor(Shape(), unbounded)}) {
    EXPECT_EQ(s.local, 0u);
    EXPECT_EQ(s.global, mem / full_block);
  }
  // Too little memory for the local pool's floor: one pool.
  const PoolSizes tiny = PoolSizesFor(Shape(), Options(4 * full_block));
  EXPECT_EQ(tiny.local, 0u);
  EXPECT_EQ(tiny.global, 4u);
  PrefixCache cache(no_window, Hash128{1, 2}, Options(mem));
  EXPECT_FALSE(cache.split());
  EXPECT_FALSE(cache.store().split());
}

// A sequence's local blocks stay within ceil(8/4)+1 whatever its steps,
// while its global blocks cover every position; the window's rows read
// back exactly.
TEST(WindowCache, ARunningSequenceHoldsOnlyItsWindow) {
  PrefixCache cache(Shape(), Hash128{1, 2}, Options(size_t{1} << 20));
  ASSERT_TRUE(cache.split());
  EXPECT_EQ(cache.local_blocks_per_sequence(), 3u);
  for (size_t step : {1, 3, 4, 13}) {
    const std::vector<int32_t> prompt = Tokens(45, static_cast<int32_t>(1000 * step));
    auto seq = cache.Start(prompt, "");
    ASSERT_TRUE(seq.ok());
    RunSteps(cache, **seq, prompt, step);
  }
  EXPECT_EQ(cache.local_pool().num_blocks() - cache.local_pool().num_free(), 1);  // the sentinel alone
}

// A repeated prompt and an extended one adopt every whole block; the window
// tail they adopt reads the rows the first run wrote; a shorter shared
// prefix is reused at its own boundary, whose tail was kept as the first
// run slid past it.
TEST(WindowCache, AHitAdoptsTheWindowTail) {
  PrefixCache cache(Shape(), Hash128{1, 2}, Options(size_t{1} << 20));
  const std::vector<int32_t> prompt = Tokens(40, 1);
  RunPrompt(cache, prompt, 5);
  for (const std::vector<int32_t>& p : {Join(prompt, Tokens(5, 500)), Join(Tokens(24, 1), Tokens(3, 700))}) {
    auto seq = cache.Start(p, "");
    ASSERT_TRUE(seq.ok());
    const size_t cached = (*seq)->num_cached_tokens();
    EXPECT_EQ(cached, p.size() > 40 ? 40u : 24u);
    EXPECT_EQ((*seq)->num_local_blocks_held(), 2u);  // positions cached-7 .. cached-1
    EXPECT_TRUE(RowsRead(**seq, cached - kWindow + 1, cached));
    RunSteps(cache, **seq, p, 2);
  }
}

// Evicting the first run's oldest window tails leaves its global blocks in
// the pool, yet a prefix that needs those tails is not adopted (recomputed
// from the longest boundary whose tail is there: none), while the prefixes
// whose tails remain still are.
TEST(WindowCache, AHitFallsBackToABoundaryWithItsTail) {
  PrefixCache cache(Shape(), Hash128{1, 2}, Options(size_t{1} << 20));
  const std::vector<int32_t> prompt = Tokens(40, 1);
  RunPrompt(cache, prompt, 5);
  // The first run's 10 local blocks are cached, released in block order.
  const BlockPool& lp = cache.local_pool();
  ASSERT_EQ(lp.num_cached(), 10);
  const auto hog = HoldLocalBlocks(cache, 4);  // blocks 0-3's tails go
  EXPECT_EQ(lp.num_cached(), 6);
  const std::vector<int32_t> short_prefix = Join(Tokens(16, 1), Tokens(4, 900));
  const std::vector<Hash128> short_keys = cache.BlockHashes(short_prefix, "");
  for (size_t k = 0; k < 4; ++k) EXPECT_TRUE(cache.pool().Lookup(short_keys[k]));  // the global rows are there
  EXPECT_EQ(cache.NumPoolLeading(short_keys), 0u);  // but no boundary with its tail
  for (const auto& [p, want] : {std::pair{short_prefix, size_t{0}}, std::pair{Join(Tokens(28, 1), Tokens(3, 900)), size_t{28}},
                                std::pair{Join(prompt, Tokens(2, 900)), size_t{40}}}) {
    auto seq = cache.Start(p, "");
    ASSERT_TRUE(seq.ok());
    EXPECT_EQ((*seq)->num_cached_tokens(), want);
    if (want > 0) {
      EXPECT_TRUE(RowsRead(**seq, want - kWindow + 1, want));
    }
  }
  EXPECT_TRUE(cache.pool().CheckInvariants());
  EXPECT_TRUE(lp.CheckInvariants());
}

// The pool's leading count stops where a hit would (a boundary with its
// tail), and a tier's copy of a block whose global rows are still in the
// pool brings its evicted tail back: the hit is whole again.
TEST(WindowCache, ATierBringsBackAnEvictedTail) {
  PrefixCache cache(Shape(), Hash128{1, 2}, Options(size_t{1} << 20));
  const std::vector<int32_t> prompt = Tokens(40, 1);
  RunPrompt(cache, prompt, 5);
  const std::vector<Hash128> keys = cache.BlockHashes(prompt, "");
  std::vector<std::vector<uint8_t>> copies;  // what a tier wrote behind
  for (const Hash128& k : keys) copies.push_back(cache.BlockBytes(*cache.pool().Lookup(k)));
  const BlockPool& lp = cache.local_pool();
  HoldLocalBlocks(cache, 4);  // blocks 0-3's tails go; the holder ends at once
  const std::vector<int32_t> short_prefix = Join(Tokens(16, 1), Tokens(4, 900));
  const std::vector<Hash128> short_keys = cache.BlockHashes(short_prefix, "");
  EXPECT_EQ(cache.NumPoolLeading(short_keys), 0u);
  EXPECT_EQ(cache.NumPoolLeading(keys), 10u);  // the end's tail is there
  for (size_t k = 0; k < 4; ++k) {
    const auto in = cache.InstallBlock(keys[k], copies[k], std::span<const int32_t>(prompt).subspan(k * kBs, kBs));
    EXPECT_EQ(in.result, PrefixCache::Install::Result::kAlreadyCached);
  }
  EXPECT_EQ(cache.NumPoolLeading(short_keys), 4u);
  auto seq = cache.Start(short_prefix, "");
  ASSERT_TRUE(seq.ok());
  EXPECT_EQ((*seq)->num_cached_tokens(), 16u);
  EXPECT_TRUE(RowsRead(**seq, 16 - kWindow + 1, 16));
  EXPECT_TRUE(cache.pool().CheckInvariants());
  EXPECT_TRUE(lp.CheckInvariants());
}

// A tier's copy of a block carries its local rows (flag 1) while they are
// indexed; another cache installs both, and a hit there reads the first
// run's rows. A payload without them (flag 0) installs the global rows
// only; a flag other than 0 or 1 is malformed.
TEST(WindowCache, TierPayloadsCarryTheWindowTail) {
  PrefixCache from(Shape(), Hash128{1, 2}, Options(size_t{1} << 20));
  const std::vector<int32_t> prompt = Tokens(40, 1);
  RunPrompt(from, prompt, 40);
  const std::vector<Hash128> keys = from.BlockHashes(prompt, "");
  PrefixCache to(Shape(), Hash128{1, 2}, Options(size_t{1} << 20));
  ASSERT_EQ(to.payload_bytes(), kBs * 4 + 3 * 2 * kBs * kDim * 2 + 4);
  for (size_t k = 0; k < keys.size(); ++k) {
    std::vector<uint8_t> bytes = from.BlockBytes(*from.pool().Lookup(keys[k]));
    int32_t flag = 0;
    std::memcpy(&flag, bytes.data() + bytes.size() - 4, 4);
    EXPECT_EQ(flag, 1);
    if (k == 9) {  // the last block's local rows lost: the hit stops at 36
      flag = 0;
      std::memcpy(bytes.data() + bytes.size() - 4, &flag, 4);
    }
    const std::span<const int32_t> tokens = std::span<const int32_t>(prompt).subspan(k * kBs, kBs);
    if (k == 0) {
      std::vector<uint8_t> odd = bytes;
      const int32_t seven = 7;
      std::memcpy(odd.data() + odd.size() - 4, &seven, 4);
      EXPECT_EQ(to.InstallBlock(keys[k], odd, tokens).result, PrefixCache::Install::Result::kMalformed);
    }
    const PrefixCache::Install in = to.InstallBlock(keys[k], bytes, tokens);
    ASSERT_TRUE(in.installed());
    to.ReleaseBlock(in.block);
  }
  EXPECT_EQ(to.local_pool().num_cached(), 9);
  auto seq = to.Start(Join(prompt, Tokens(3, 900)), "");
  ASSERT_TRUE(seq.ok());
  EXPECT_EQ((*seq)->num_cached_tokens(), 36u);
  EXPECT_TRUE(RowsRead(**seq, 0, 36, /*only=*/1));  // the global layer: every position
  EXPECT_TRUE(RowsRead(**seq, 36 - kWindow + 1, 36));
}

}  // namespace
}  // namespace pc
