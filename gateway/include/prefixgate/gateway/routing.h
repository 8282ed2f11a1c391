// Routing policies: which replica serves a request.
//
//   round_robin, random, least_load, power_of_two   load-only baselines
//   consistent_hash   affinity on a session key (header, `user` field or API key)
//   cache_aware       (default) the replica with the lowest expected cost:
//
//     cost(r) = uncached_prefill_tokens(r) + queued_prefill_tokens(r)
//               + decode_weight * running_sequences(r)
//
//   where uncached_prefill_tokens(r) = prompt_tokens - saved(r), saved(r) being the cached
//   tokens (from the PrefixIndex) with those held only on a lower tier (CPU offload) counted at
//   offload_hit_weight, so a cache hit is worth the prefill it saves and never more. On top:
//     - a cold prefix (no replica holds its first blocks) goes to the bounded-load consistent
//       hash of its first blocks, so siblings of a new prefix converge on one replica;
//     - a replica whose load exceeds `overload_factor` x the mean (plus a floor) is not chosen
//       for affinity, which sends a hot prefix to a second replica (replication) and keeps one
//       loaded replica from turning affinity off for everyone else;
//     - never an unhealthy replica; an idle replica beats a queueing one when the saved prefill
//       is smaller than the queue.
//   Every parameter is in CacheAwareConfig, documented there.
//
//   auto policy = gateway::make_policy("cache_aware", {});
//   gateway::RouteDecision d = policy->route(request, replicas, index, now);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "prefixgate/base/status.h"
#include "prefixgate/gateway/prefix_index.h"

namespace prefixgate::gateway {

// What the gateway knows of a replica's load right now.
struct ReplicaView {
  ReplicaId id = 0;
  bool healthy = true;
  // From the engine's load reports (zero for openai upstreams).
  std::size_t running = 0;
  std::size_t waiting = 0;
  std::size_t tokens_queued_for_prefill = 0;
  std::size_t kv_pages_used = 0;
  std::size_t kv_pages_total = 0;
  // Tracked by the gateway itself: requests sent and not finished, and the uncached prompt
  // tokens (prompt less predicted cached) of those not yet past prefill (first token not seen).
  // Covers the gap between reports: the load model takes max(tokens_queued_for_prefill,
  // inflight_prompt_tokens) and max(running + waiting, inflight_requests), never the sum, which
  // would count twice what a report already includes (see gateway/ROUTING.md).
  std::size_t inflight_requests = 0;
  std::size_t inflight_prompt_tokens = 0;
};

struct RouteRequest {
  std::span<const std::uint64_t> block_hashes;  // the prompt's chained block hashes
  std::size_t prompt_tokens = 0;
  std::size_t block_size = 16;
  std::string_view session_key;  // consistent_hash: header, `user` or API key; may be empty
};

enum class RouteReason {
  kCacheHit,      // cache_aware: the cheapest replica holds part of the prefix
  kColdAffinity,  // cache_aware: cold prefix, consistent hash of its first blocks
  kLoadSpill,     // cache_aware: the affine replica was overloaded; cheaper elsewhere
  kLeastCost,     // cache_aware: no usable match; least expected cost
  kRoundRobin,
  kRandom,
  kLeastLoad,
  kPowerOfTwo,
  kSessionAffinity,  // consistent_hash
  kNoHealthyReplica,
};
const char* route_reason_name(RouteReason reason);  // "cache_hit", "cold_affinity", ...

struct RouteDecision {
  ReplicaId replica = 0;  // meaningless when reason == kNoHealthyReplica
  RouteReason reason = RouteReason::kNoHealthyReplica;
  std::size_t predicted_cached_tokens = 0;
};

struct CacheAwareConfig {
  // Cost of one running decode sequence, in prefill-token equivalents: a step of a batch with
  // one more sequence costs about this much more. Default from the sim cost model: a decode
  // sequence at 2k context reads ~0.25 MB of KV per step, which at the prefill rate is ~8 tokens.
  double decode_weight = 8.0;
  // A replica is overloaded when its load exceeds overload_factor x the mean load over healthy
  // replicas plus overload_floor_tokens (so an idle fleet is never "overloaded").
  double overload_factor = 1.5;
  double overload_floor_tokens = 4096;
  // Leading blocks hashed for the cold-prefix consistent hash (the "sibling" key).
  std::size_t affinity_blocks = 4;
  // Bounded-load consistent hashing: a replica takes a cold prefix only while its load is below
  // bounded_load_factor x the mean (Mirrokni et al., "Consistent Hashing with Bounded Loads").
  double bounded_load_factor = 1.25;
  // What a cached token held only on a lower tier (vLLM's CPU offloading, SGLang's host cache)
  // saves, as a fraction of a device-cached token's prefill: it is loaded instead of computed,
  // which costs time too. 1 counts it as a device hit, 0 as a miss.
  double offload_hit_weight = 0.8;
};

struct PolicyConfig {
  CacheAwareConfig cache_aware;
  std::uint64_t seed = 0;  // random, power_of_two
};

// Not thread-safe (policies keep counters, RNGs and scratch buffers): the gateway serializes
// calls, as it does for the PrefixIndex.
class RoutingPolicy {
 public:
  virtual ~RoutingPolicy() = default;
  virtual std::string_view name() const = 0;
  // `replicas` is indexed by ReplicaId. Policies that use the index query it for `request`.
  virtual RouteDecision route(const RouteRequest& request, std::span<const ReplicaView> replicas,
                              const PrefixIndex& index, Clock::time_point now) = 0;
};

// "round_robin", "random", "least_load", "power_of_two", "consistent_hash", "cache_aware".
// kInvalidValue for an unknown name or an out-of-range CacheAwareConfig field (param names it).
Result<std::unique_ptr<RoutingPolicy>> make_policy(std::string_view name,
                                                   const PolicyConfig& config = {});

}  // namespace prefixgate::gateway
