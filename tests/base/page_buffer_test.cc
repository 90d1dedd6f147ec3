#include "base/page_buffer.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace pc {
namespace {

// Every byte reads zero before it is written, like vector<uint8_t>(n, 0):
// the KV store relies on it for rows never written.
bool AllZero(const PageBuffer& b) {
  for (size_t i = 0; i < b.size(); ++i) {
    if (b.data()[i] != 0) return false;
  }
  return true;
}

TEST(PageBuffer, ZeroFilledAlignedAndWritableToTheLastByte) {
  // Sizes around small and huge page boundaries, and an odd size.
  for (size_t bytes : {size_t{1}, size_t{4095}, size_t{4096}, size_t{4097}, size_t{3} << 20,
                       (size_t{2} << 20) + 12345}) {
    PageBuffer b(bytes);
    ASSERT_NE(b.data(), nullptr) << bytes;
    EXPECT_EQ(b.size(), bytes);
    // Huge-page aligned where one fits, else page aligned.
    const size_t align = bytes >= PageBuffer::kHugeBytes ? PageBuffer::kHugeBytes : 4096;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % align, 0u) << bytes;
    EXPECT_TRUE(AllZero(b)) << bytes;
    std::memset(b.data(), 0xA5, bytes);
    EXPECT_EQ(b.data()[0], 0xA5);
    EXPECT_EQ(b.data()[bytes - 1], 0xA5);
  }
}

// Populated at construction: every page resident before the first write, so
// no page fault lands inside a timed step.
TEST(PageBuffer, PagesAreResidentBeforeTheFirstWrite) {
  for (size_t bytes : {size_t{8192}, (size_t{4} << 20) + 4096}) {
    PageBuffer b(bytes);
    const size_t pages = (bytes + 4095) / 4096;
    std::vector<unsigned char> in_core(pages, 0);
    ASSERT_EQ(mincore(b.data(), bytes, in_core.data()), 0);
    size_t resident = 0;
    for (unsigned char c : in_core) resident += c & 1;
    EXPECT_EQ(resident, pages) << bytes;
  }
}

// Discard gives back the whole pages inside a range: they read zero again;
// bytes of pages it only partly covers, and the rest, keep their values.
TEST(PageBuffer, DiscardZeroesTheWholePagesInside) {
  for (size_t bytes : {size_t{5} * 4096 + 100, (size_t{2} << 20) + 4096}) {
    PageBuffer b(bytes);
    std::memset(b.data(), 0x5A, bytes);
    const size_t offset = 4096 + 10, len = 3 * 4096;  // pages 2 and 3 whole; 1 and 4 in part
    b.Discard(offset, len);
    for (size_t i = 0; i < bytes; ++i) {
      const bool inside = i >= 2 * 4096 && i < 4 * 4096;
      ASSERT_EQ(b.data()[i], inside ? 0 : 0x5A) << bytes << " byte " << i;
    }
    b.Discard(bytes - 1, 100);  // past the end: nothing
    EXPECT_EQ(b.data()[bytes - 1], 0x5A);
    EXPECT_EQ(b.size(), bytes);
  }
}

TEST(PageBuffer, EmptyHasNoData) {
  PageBuffer none, zero(0);
  EXPECT_EQ(none.data(), nullptr);
  EXPECT_EQ(none.size(), 0u);
  EXPECT_EQ(zero.data(), nullptr);
  EXPECT_EQ(zero.size(), 0u);
}

TEST(PageBuffer, MovesOwnership) {
  PageBuffer a(10000);
  a.data()[9999] = 7;
  uint8_t* p = a.data();
  PageBuffer b(std::move(a));
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from state is specified
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.data()[9999], 7);
  PageBuffer c(5000);
  c = std::move(b);  // c's own mapping is released, b's taken over
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.size(), 10000u);
  EXPECT_EQ(b.data(), nullptr);  // NOLINT(bugprone-use-after-move)
}

TEST(PageBuffer, ImpossibleSizeThrowsLikeAVector) {
  EXPECT_THROW(PageBuffer(SIZE_MAX - 100), std::bad_alloc);
  EXPECT_THROW(PageBuffer(size_t{1} << 62), std::bad_alloc);
}

}  // namespace
}  // namespace pc
