#include "prefixgate/engine/page_pool.h"

#include <gtest/gtest.h>

#include <vector>

namespace prefixgate::engine {
namespace {

TEST(PagePoolTest, StartsEmptyAndHandsOutLowestIdsFirst) {
  PagePool pool(4);
  EXPECT_EQ(pool.capacity(), 4u);
  EXPECT_EQ(pool.free_count(), 4u);
  EXPECT_EQ(pool.used_count(), 0u);
  std::vector<PageId> pages;
  ASSERT_TRUE(pool.allocate(3, pages));
  EXPECT_EQ(pages, (std::vector<PageId>{0, 1, 2}));
  for (PageId p : pages) EXPECT_EQ(pool.refcount(p), 1u);
  EXPECT_EQ(pool.refcount(3), 0u);
  EXPECT_EQ(pool.used_count(), 3u);
}

TEST(PagePoolTest, AllocateIsAllOrNothing) {
  PagePool pool(3);
  std::vector<PageId> pages{99};  // allocate appends; what was there stays
  ASSERT_TRUE(pool.allocate(2, pages));
  EXPECT_FALSE(pool.allocate(2, pages));
  EXPECT_EQ(pages, (std::vector<PageId>{99, 0, 1}));
  EXPECT_EQ(pool.free_count(), 1u);
  EXPECT_TRUE(pool.allocate(1, pages));
  EXPECT_FALSE(pool.allocate(1, pages));
  EXPECT_TRUE(pool.allocate(0, pages));
  EXPECT_EQ(pages.size(), 4u);
}

TEST(PagePoolTest, SharedPageIsFreeOnlyAfterLastRelease) {
  PagePool pool(2);
  std::vector<PageId> pages;
  ASSERT_TRUE(pool.allocate(1, pages));
  const PageId page = pages[0];
  pool.retain(page);
  pool.retain(page);
  EXPECT_EQ(pool.refcount(page), 3u);
  pool.release(page);
  pool.release(page);
  EXPECT_EQ(pool.refcount(page), 1u);
  EXPECT_EQ(pool.free_count(), 1u);
  pool.release(page);
  EXPECT_EQ(pool.refcount(page), 0u);
  EXPECT_EQ(pool.free_count(), 2u);
}

TEST(PagePoolTest, RecentlyFreedPageIsReusedFirst) {
  PagePool pool(8);
  std::vector<PageId> pages;
  ASSERT_TRUE(pool.allocate(5, pages));
  pool.release(pages[1]);
  pool.release(pages[3]);
  std::vector<PageId> again;
  ASSERT_TRUE(pool.allocate(2, again));
  EXPECT_EQ(again, (std::vector<PageId>{pages[3], pages[1]}));
}

TEST(PagePoolTest, EveryPageCanBeCycledWithoutLoss) {
  PagePool pool(16);
  for (int round = 0; round < 3; ++round) {
    std::vector<PageId> pages;
    ASSERT_TRUE(pool.allocate(16, pages));
    EXPECT_EQ(pool.free_count(), 0u);
    std::vector<bool> seen(16, false);
    for (PageId p : pages) {
      ASSERT_LT(p, 16u);
      EXPECT_FALSE(seen[p]) << "page " << p << " handed out twice";
      seen[p] = true;
    }
    for (PageId p : pages) pool.release(p);
    EXPECT_EQ(pool.free_count(), 16u);
  }
}

TEST(PagePoolTest, ReleasingAFreePageStopsADebugBuild) {
#ifdef NDEBUG
  GTEST_SKIP() << "the refcount check is an assert";
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  PagePool pool(2);
  EXPECT_DEATH(pool.release(1), "refcounts_");
  EXPECT_DEATH(pool.retain(0), "refcounts_");
#endif
}

}  // namespace
}  // namespace prefixgate::engine
