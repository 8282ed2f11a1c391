// Test support for gateway/'s routing tests: a policy by name, a fleet of plain replicas and an
// index that knows them, shared so each test file does not define its own.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include "prefixgate/gateway/prefix_index.h"
#include "prefixgate/gateway/routing.h"

namespace prefixgate::gateway::testing {

// make_policy(name, config), failing the test for a name it refuses.
inline std::unique_ptr<RoutingPolicy> policy(std::string_view name,
                                             const PolicyConfig& config = {}) {
  auto p = make_policy(name, config);
  EXPECT_TRUE(p.ok()) << name;
  return p.ok() ? std::move(*p) : nullptr;
}

// `n` replicas that announce nothing, ids 0..n-1.
inline std::vector<ReplicaView> fleet(std::size_t n) {
  std::vector<ReplicaView> views(n);
  for (std::size_t r = 0; r < n; ++r) views[r].id = static_cast<ReplicaId>(r);
  return views;
}

// An index with `replicas` replicas of the default configuration.
inline PrefixIndex index_with(std::size_t replicas) {
  PrefixIndex index;
  for (std::size_t r = 0; r < replicas; ++r) index.add_replica({});
  return index;
}

}  // namespace prefixgate::gateway::testing
