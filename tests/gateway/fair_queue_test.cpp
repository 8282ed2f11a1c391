// FairQueue: round robin across tenants, FIFO within one, removal from anywhere, and the
// longest queue's newest waiter; a random-operation property test against a plain model.
#include "prefixgate/gateway/fair_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

namespace prefixgate::gateway {
namespace {

std::vector<FairQueue::Id> drain(FairQueue& q) {
  std::vector<FairQueue::Id> out;
  while (auto id = q.pop()) out.push_back(*id);
  return out;
}

TEST(FairQueueTest, ServesTenantsInTurnAndEachInOrder) {
  FairQueue q;
  for (FairQueue::Id id = 1; id <= 10; ++id) q.push("heavy", id);  // ten times more
  q.push("light", 100);
  q.push("light", 101);
  q.push("other", 200);
  EXPECT_EQ(q.size(), 13U);
  EXPECT_EQ(q.size("heavy"), 10U);
  EXPECT_EQ(drain(q), (std::vector<FairQueue::Id>{1, 100, 200, 2, 101, 3, 4, 5, 6, 7, 8, 9, 10}));
  EXPECT_TRUE(q.empty());
  EXPECT_FALSE(q.pop());
}

TEST(FairQueueTest, ANewTenantJoinsAtTheEndOfTheRotation) {
  FairQueue q;
  q.push("a", 1);
  q.push("a", 2);
  q.push("b", 3);
  EXPECT_EQ(q.pop(), 1U);  // a served, to the back: b, a
  q.push("c", 4);          // b, a, c
  EXPECT_EQ(drain(q), (std::vector<FairQueue::Id>{3, 2, 4}));
}

TEST(FairQueueTest, RemoveTakesAWaiterOutAndItsTenantWhenEmpty) {
  FairQueue q;
  q.push("a", 1);
  q.push("b", 2);
  q.push("a", 3);
  EXPECT_TRUE(q.remove(2));
  EXPECT_FALSE(q.remove(2));
  EXPECT_FALSE(q.remove(99));
  EXPECT_EQ(q.size("b"), 0U);
  EXPECT_TRUE(q.remove(1));
  EXPECT_EQ(drain(q), (std::vector<FairQueue::Id>{3}));
}

TEST(FairQueueTest, LongestNamesTheTenantWithTheMostAndItsNewest) {
  FairQueue q;
  EXPECT_FALSE(q.longest());
  q.push("a", 1);
  q.push("b", 2);
  q.push("b", 3);
  q.push("b", 4);
  q.push("a", 5);
  const auto tail = q.longest();
  ASSERT_TRUE(tail);
  EXPECT_EQ(tail->tenant, "b");
  EXPECT_EQ(tail->waiting, 3U);
  EXPECT_EQ(tail->newest, 4U);
}

// Random pushes, pops and removes against a model: every waiter comes out once, in its tenant's
// order, and the counts agree at every step.
TEST(FairQueueTest, RandomOperationsKeepOrderAndLoseNothing) {
  std::mt19937 rng(7);
  FairQueue q;
  std::map<std::string, std::vector<FairQueue::Id>> model;
  FairQueue::Id next = 1;
  std::size_t popped = 0;
  for (int step = 0; step < 20000; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 5) {
      const std::string tenant(1, static_cast<char>('a' + rng() % 5));
      q.push(tenant, next);
      model[tenant].push_back(next++);
    } else if (op < 9) {
      const auto id = q.pop();
      std::size_t waiting = 0;
      for (const auto& [t, ids] : model) waiting += ids.size();
      ASSERT_EQ(id.has_value(), waiting > 0);
      if (!id) continue;
      ++popped;
      bool found = false;
      for (auto& [t, ids] : model) {
        if (!ids.empty() && ids.front() == *id) {
          ids.erase(ids.begin());
          found = true;
        }
      }
      ASSERT_TRUE(found) << "popped " << *id << " out of its tenant's order";
    } else {
      std::vector<FairQueue::Id> all;
      for (const auto& [t, ids] : model) all.insert(all.end(), ids.begin(), ids.end());
      if (all.empty()) continue;
      const FairQueue::Id victim = all[rng() % all.size()];
      ASSERT_TRUE(q.remove(victim));
      for (auto& [t, ids] : model) std::erase(ids, victim);
    }
    std::size_t waiting = 0;
    for (const auto& [t, ids] : model) {
      waiting += ids.size();
      ASSERT_EQ(q.size(t), ids.size());
    }
    ASSERT_EQ(q.size(), waiting);
  }
  EXPECT_GT(popped, 1000U);
}

}  // namespace
}  // namespace prefixgate::gateway
