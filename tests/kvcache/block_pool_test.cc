// BlockPool: refcounts, prefix index and the documented eviction order, by
// exact block ids.
#include "kvcache/block_pool.h"
#include "test_support.h"

namespace pc {
namespace {

Hash128 H(uint64_t v) { return Hash128{v, ~v}; }

TEST(BlockPool, AllocatesLowestEmptyFirstAndRunsOut) {
  BlockPool p(3);
  EXPECT_EQ(*p.Allocate(), 0);
  EXPECT_EQ(*p.Allocate(), 1);
  EXPECT_EQ(*p.Allocate(), 2);
  EXPECT_FALSE(p.Allocate().has_value());
  EXPECT_EQ(p.num_free(), 0);
  EXPECT_TRUE(p.CheckInvariants());
}

TEST(BlockPool, EvictionOrderIsEmptyThenLeastRecentlyReleased) {
  BlockPool p(4);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(*p.Allocate(), i);
  ASSERT_TRUE(p.Register(0, H(10)));
  ASSERT_TRUE(p.Register(1, H(11)));
  ASSERT_TRUE(p.Register(2, H(12)));
  // Release order: 2, 0, 3 (unindexed), 1.
  p.Unref(2);
  p.Unref(0);
  p.Unref(3);
  p.Unref(1);
  EXPECT_EQ(p.num_cached(), 3);
  std::optional<Hash128> ev;
  EXPECT_EQ(*p.Allocate(&ev), 3);  // empty block first: no eviction
  EXPECT_FALSE(ev.has_value());
  EXPECT_EQ(*p.Allocate(&ev), 2);  // then the least recently released cached block
  EXPECT_EQ(*ev, H(12));
  EXPECT_FALSE(p.Lookup(H(12)).has_value());
  // A hit on block 0 takes it out of the eviction order.
  ASSERT_EQ(*p.Lookup(H(10)), 0);
  p.Ref(0);
  EXPECT_EQ(*p.Allocate(&ev), 1);
  EXPECT_EQ(*ev, H(11));
  EXPECT_FALSE(p.Allocate().has_value());
  p.Unref(0);  // cached again, most recent
  EXPECT_EQ(*p.Allocate(&ev), 0);
  EXPECT_EQ(*ev, H(10));
  EXPECT_TRUE(p.CheckInvariants());
}

TEST(BlockPool, SharedBlocksCountEveryReference) {
  BlockPool p(2);
  const int32_t b = *p.Allocate();
  ASSERT_TRUE(p.Register(b, H(1)));
  p.Ref(b);
  EXPECT_EQ(p.refcount(b), 2);
  p.Unref(b);
  EXPECT_EQ(p.num_free(), 1);
  p.Unref(b);
  EXPECT_EQ(p.num_free(), 2);
  EXPECT_EQ(p.num_cached(), 1);
  EXPECT_TRUE(p.CheckInvariants());
}

TEST(BlockPool, RegisterRefusesDuplicates) {
  BlockPool p(2);
  const int32_t a = *p.Allocate(), b = *p.Allocate();
  EXPECT_TRUE(p.Register(a, H(5)));
  EXPECT_FALSE(p.Register(b, H(5)));  // same content computed twice: keep the first
  EXPECT_FALSE(p.Register(a, H(6)));  // a block is indexed once
  EXPECT_EQ(*p.Lookup(H(5)), a);
  EXPECT_TRUE(p.CheckInvariants());
}

TEST(BlockHash, ChainsDependOnSaltParentAndTokens) {
  const Hash128 fp{1, 2};
  const std::vector<int32_t> t1 = {1, 2, 3, 4}, t2 = {1, 2, 3, 5};
  EXPECT_EQ(ChainRoot(fp, ""), ChainRoot(fp, ""));
  EXPECT_NE(ChainRoot(fp, ""), ChainRoot(fp, "tenant-a"));
  EXPECT_NE(ChainRoot(fp, ""), ChainRoot(Hash128{1, 3}, ""));
  const Hash128 r = ChainRoot(fp, "");
  EXPECT_EQ(ChainBlock(r, t1), ChainBlock(r, t1));
  EXPECT_NE(ChainBlock(r, t1), ChainBlock(r, t2));
  EXPECT_NE(ChainBlock(ChainBlock(r, t1), t1), ChainBlock(r, t1));
}

}  // namespace
}  // namespace pc
