// ReplicaSet under several server threads at once, in-process: four threads route (every other
// request a retry's, one replica excluded), settle, store their engine's blocks and finish
// thousands of requests on one set while a fifth reads its status and matches, as /metrics and
// explain do. At the end nothing is left in flight and each thread's
// last prompt is held where it was routed. ThreadSanitizer runs it (label concurrent), so a path
// that touched the shared state outside the routing lock fails here.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "gateway/fleet_sim.h"
#include "prefixgate/gateway/engine_block_keys.h"
#include "prefixgate/gateway/routing.h"
#include "server/replica_set.h"

namespace prefixgate::gateway::server {
namespace {

constexpr std::size_t kReplicas = 4;
constexpr std::size_t kThreads = 4;
constexpr std::size_t kRequestsPerThread = 1500;
constexpr std::size_t kConversations = 8;  // per thread
constexpr std::size_t kSharedBlocks = 20;  // a conversation's earlier turns
constexpr std::size_t kNewBlocks = 2;      // each request's own

using gateway::testing::prompt_hashes;
using gateway::testing::request_for;

// Conversation `c` of thread `t`: its shared blocks, then request `i`'s own.
std::vector<std::uint64_t> prompt(std::size_t t, std::size_t c, std::size_t i) {
  return prompt_hashes(t * kConversations + c, kSharedBlocks, (t << 32) | i, kNewBlocks);
}

TEST(ReplicaSetThreadsTest, ConcurrentRequestsLeaveNothingInFlightAndTheirBlocksHeld) {
  std::vector<UpstreamConfig> upstreams(kReplicas);
  for (std::size_t r = 0; r < kReplicas; ++r) {
    upstreams[r].url = "http://127.0.0.1:" + std::to_string(9100 + r);
  }
  ReplicaSet set(std::move(upstreams), std::move(*make_policy("cache_aware")), IndexConfig{}, 3);
  for (ReplicaId r = 0; r < kReplicas; ++r) {
    set.health_check_result(r, true);
    set.set_events_link(r, true);
  }

  std::atomic<bool> done{false};
  std::thread reader([&] {
    const std::vector<std::uint64_t> probe = prompt(0, 0, 0);
    while (!done.load(std::memory_order_acquire)) {
      // A decision that excludes replicas hides them only while it holds the lock.
      const std::vector<ReplicaStatus> status = set.status();
      EXPECT_EQ(status.size(), kReplicas);
      for (const ReplicaStatus& s : status) EXPECT_TRUE(s.view.healthy) << s.name;
      EXPECT_EQ(set.matches(probe, Clock::now()).size(), kReplicas);
    }
  });

  std::vector<std::vector<std::uint64_t>> last_prompt(kThreads);
  std::vector<ReplicaId> last_replica(kThreads);
  std::vector<std::thread> workers;
  for (std::size_t t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<KeyChange> stored;
      for (std::size_t i = 0; i < kRequestsPerThread; ++i) {
        const std::vector<std::uint64_t> hashes = prompt(t, i % kConversations, i);
        const RouteRequest request = request_for(hashes);
        // Every other request a retry's: the thread's own replica excluded.
        const ReplicaId own[] = {static_cast<ReplicaId>(t % kReplicas)};
        const bool retry = i % 2 == 1;
        const RouteDecision d = set.route(
            request, retry ? std::span<const ReplicaId>(own) : std::span<const ReplicaId>(),
            Clock::now());
        ASSERT_NE(d.reason, RouteReason::kNoHealthyReplica);
        if (retry) {
          ASSERT_NE(d.replica, own[0]);
        }
        set.prefilled(d, hashes, request.prompt_tokens);
        stored.clear();
        for (std::uint64_t h : hashes) stored.push_back({h, KeyState::kPrimary});
        set.apply_key_changes(d.replica, stored);
        set.finish(d, hashes, true, 0);
        last_prompt[t] = hashes;
        last_replica[t] = d.replica;
      }
    });
  }
  for (std::thread& w : workers) w.join();
  done.store(true, std::memory_order_release);
  reader.join();

  for (const ReplicaStatus& s : set.status()) {
    EXPECT_EQ(s.view.inflight_requests, 0u) << s.name;
    EXPECT_EQ(s.view.inflight_prompt_tokens, 0u) << s.name;
  }
  for (std::size_t t = 0; t < kThreads; ++t) {
    const std::vector<ReplicaSet::Match> held = set.matches(last_prompt[t], Clock::now());
    EXPECT_EQ(held[last_replica[t]].blocks, last_prompt[t].size()) << "thread " << t;
  }
}

}  // namespace
}  // namespace prefixgate::gateway::server
