// Pieces the routing policies share: the load model, rendezvous hashing and the cache match.
// Private to gateway/src: the policies are reached through make_policy().
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "prefixgate/gateway/routing.h"

namespace prefixgate::gateway::routing {

// Prefill tokens waiting on a replica. The engine's report lags by up to one report interval; the
// gateway's own count of prompt tokens it sent and that have not finished prefill covers that
// gap. The larger of the two is used, not the sum: each is a lower bound of the real queue, and
// a sum would count twice every request the report already includes.
inline double queued_prefill_tokens(const ReplicaView& v) {
  return static_cast<double>(std::max(v.tokens_queued_for_prefill, v.inflight_prompt_tokens));
}

// Sequences that will take decode steps: running now plus waiting ones (they decode once
// admitted). Again the larger of the report and the gateway's own in-flight count.
inline double decode_sequences(const ReplicaView& v) {
  return static_cast<double>(std::max(v.running + v.waiting, v.inflight_requests));
}

// A replica's load in prefill-token equivalents: the cost formula without the new request.
inline double load_tokens(const ReplicaView& v, double decode_weight) {
  return queued_prefill_tokens(v) + decode_weight * decode_sequences(v);
}

// Rendezvous (highest random weight) hashing: a key goes to the replica with the highest
// score(key, replica). Removing a replica moves only its keys; adding one moves only the keys it
// now wins (about 1/n). Thaler & Ravishankar, "Using name-based mappings to increase hit rates".
inline std::uint64_t mix64(std::uint64_t x) {
  // MurmurHash3's fmix64 finalizer: full avalanche, so nearby replica ids give unrelated scores.
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}
inline std::uint64_t rendezvous_score(std::uint64_t key, ReplicaId replica) {
  return mix64(key ^ mix64(0x9e3779b97f4a7c15ULL * (std::uint64_t{replica} + 1)));
}

// The smoothed time between successive events (a prefix's siblings, a kind of request): each new
// gap moves it a quarter of the way there; 0 until the second event.
struct SmoothedInterval {
  Clock::time_point last{};
  double seconds = 0;
  bool seen = false;
  double weight = 0.25;  // of each new interval: 0.25 follows the last few
  double add(Clock::time_point now) {
    if (seen) {
      const double dt = std::max(0.0, std::chrono::duration<double>(now - last).count());
      seconds = seconds > 0 ? seconds + weight * (dt - seconds) : dt;
    }
    seen = true;
    last = now;
    return seconds;
  }
};

// How many leading blocks of the request each replica holds; scratch is reused between calls.
// `replicas` is indexed by ReplicaId; a replica the index does not know yet matches nothing.
// With `offloaded`, also how many of those each holds only on a lower tier.
void match_blocks(const RouteRequest& request, std::span<const ReplicaView> replicas,
                  const PrefixIndex& index, Clock::time_point now, std::vector<std::size_t>& blocks,
                  std::vector<std::size_t>* offloaded = nullptr);

inline std::size_t cached_tokens(const RouteRequest& request, std::size_t blocks) {
  return std::min(blocks * request.block_size, request.prompt_tokens);
}

// The prefill a replica's cache saves, in tokens: its cached tokens, those it holds on a lower
// tier (CPU memory, disk) counted at `offload_weight` (they must be loaded before use).
inline double saved_prefill_tokens(const RouteRequest& request, std::size_t blocks,
                                   std::size_t offloaded, double offload_weight) {
  const std::size_t cached = cached_tokens(request, blocks);
  const std::size_t lower = std::min(offloaded * request.block_size, cached);
  return static_cast<double>(cached) - (1.0 - offload_weight) * static_cast<double>(lower);
}

std::unique_ptr<RoutingPolicy> make_round_robin();
std::unique_ptr<RoutingPolicy> make_random(std::uint64_t seed);
std::unique_ptr<RoutingPolicy> make_least_load(double decode_weight);
std::unique_ptr<RoutingPolicy> make_power_of_two(std::uint64_t seed, double decode_weight);
std::unique_ptr<RoutingPolicy> make_consistent_hash(double decode_weight);
std::unique_ptr<RoutingPolicy> make_cache_aware(const CacheAwareConfig& config, std::uint64_t seed);
std::unique_ptr<RoutingPolicy> make_sglang_cache_aware(const SglangCacheAwareConfig& config);
std::unique_ptr<RoutingPolicy> make_dynamo_kv(const DynamoKvConfig& config, std::uint64_t seed);

}  // namespace prefixgate::gateway::routing
