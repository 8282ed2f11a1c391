// The ReplicaSet the gateway benchmarks route through: `replicas` loopback upstreams, every one
// healthy and following its cache events, under cache_aware. Never freed: hold it in a static, so
// that a benchmark's threads share it as server threads do.
//
//   static ReplicaSet& set = healthy_replica_set(8);
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config.h"
#include "prefixgate/gateway/routing.h"
#include "server/replica_set.h"

namespace prefixgate::gateway::server {

inline ReplicaSet& healthy_replica_set(std::size_t replicas) {
  std::vector<UpstreamConfig> upstreams(replicas);
  for (std::size_t r = 0; r < replicas; ++r) {
    upstreams[r].url = "http://127.0.0.1:" + std::to_string(9000 + r);
  }
  auto* set = new ReplicaSet(std::move(upstreams), std::move(*make_policy("cache_aware")),
                             IndexConfig{}, 3);
  for (ReplicaId r = 0; r < replicas; ++r) {
    set->health_check_result(r, true);
    set->set_events_link(r, true);
  }
  return *set;
}

}  // namespace prefixgate::gateway::server
