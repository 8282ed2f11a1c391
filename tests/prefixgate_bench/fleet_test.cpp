// The fleet's per-replica sim profile: a mixed fleet from --sim-profile A,B,...
#include "fleet.h"

#include <gtest/gtest.h>

namespace prefixgate::bench {
namespace {

TEST(FleetTest, ReplicaIRunsProfileIModTheListsLength) {
  EXPECT_EQ(sim_profile_of("h100:llama3-8b", 0), "h100:llama3-8b");
  EXPECT_EQ(sim_profile_of("h100:llama3-8b", 5), "h100:llama3-8b");
  const std::string mixed = "h100:llama3-8b,l4:llama3-8b";
  EXPECT_EQ(sim_profile_of(mixed, 0), "h100:llama3-8b");
  EXPECT_EQ(sim_profile_of(mixed, 1), "l4:llama3-8b");
  EXPECT_EQ(sim_profile_of(mixed, 6), "h100:llama3-8b");
  EXPECT_EQ(sim_profile_of("a,b,c", 5), "c");
}

}  // namespace
}  // namespace prefixgate::bench
