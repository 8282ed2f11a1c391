// sglang_cache_aware: the cache_aware policy of SGLang's router (sgl-router, now sgl-model-gateway:
// src/policies/cache_aware.rs; parameters as its `--cache-threshold`, `--balance-abs-threshold`,
// `--balance-rel-threshold`, `--max-tree-size`), rebuilt as a baseline. See gateway/ROUTING.md.
//
//   imbalanced = max_load - min_load > balance_abs_threshold && max_load > min_load x balance_rel
//   imbalanced:                          the replica with the fewest requests in flight
//   match_rate(best) > cache_threshold:  the replica whose tree matches the prompt longest
//   else:                                the replica with the smallest tree
//   and the prompt is then inserted into the chosen replica's tree, whichever rule chose it.
//
// SGLang's load is the router's own count of requests in flight per worker (inflight_requests
// here), and its tree is an approximation of each worker's cache built from what the router sent
// there: it learns nothing from the engines. Ours holds the routed prompts' chained block hashes
// (a path of blocks is what a radix tree of text holds, at block rather than character
// granularity) in a PrefixIndex of prediction-only replicas whose LRU is the tree's size bound;
// SGLang evicts its least recently used leaves every eviction_interval_secs instead of at once.
#include <algorithm>
#include <limits>
#include <vector>

#include "routing_common.h"

namespace prefixgate::gateway::routing {
namespace {

class SglangCacheAware final : public RoutingPolicy {
 public:
  explicit SglangCacheAware(const SglangCacheAwareConfig& config) : config_(config) {}
  std::string_view name() const override { return "sglang_cache_aware"; }

  RouteDecision route(const RouteRequest& request, std::span<const ReplicaView> replicas,
                      const PrefixIndex& index, Clock::time_point now) override {
    const std::size_t n = replicas.size();
    grow(n);
    std::size_t min_load = std::numeric_limits<std::size_t>::max();
    std::size_t max_load = 0;
    std::size_t least_loaded = n;
    for (std::size_t r = 0; r < n; ++r) {
      if (!replicas[r].healthy) continue;
      const std::size_t load = replicas[r].inflight_requests;
      if (least_loaded == n || load < min_load) least_loaded = r;
      min_load = std::min(min_load, load);
      max_load = std::max(max_load, load);
    }
    if (least_loaded == n) return {};
    const bool imbalanced = max_load - min_load > config_.balance_abs_threshold &&
                            static_cast<double>(max_load) >
                                static_cast<double>(min_load) * config_.balance_rel_threshold;
    if (imbalanced) {
      return decide(request, replicas, index, now, least_loaded, RouteReason::kLeastLoad);
    }

    tree_match_.assign(tree_.replica_count(), 0);
    tree_.longest_match(request.block_hashes, now, tree_match_);
    std::size_t best = n;
    for (std::size_t r = 0; r < n; ++r) {
      if (!replicas[r].healthy) continue;
      // Ties (a prefix routed to several replicas) go to the one with fewer in flight.
      if (best == n || tree_match_[r] > tree_match_[best] ||
          (tree_match_[r] == tree_match_[best] &&
           replicas[r].inflight_requests < replicas[best].inflight_requests)) {
        best = r;
      }
    }
    const double match_rate = request.prompt_tokens == 0
                                  ? 0.0
                                  : static_cast<double>(cached_tokens(request, tree_match_[best])) /
                                        static_cast<double>(request.prompt_tokens);
    if (match_rate > config_.cache_threshold) {
      return decide(request, replicas, index, now, best, RouteReason::kCacheHit);
    }
    std::size_t smallest = n;
    for (std::size_t r = 0; r < n; ++r) {
      if (!replicas[r].healthy) continue;
      if (smallest == n || tree_.blocks(static_cast<ReplicaId>(r)) <
                               tree_.blocks(static_cast<ReplicaId>(smallest))) {
        smallest = r;
      }
    }
    return decide(request, replicas, index, now, smallest, RouteReason::kLeastCost);
  }

  void on_routed(const RouteRequest& request, const RouteDecision& decision,
                 Clock::time_point now) override {
    grow(decision.replica + std::size_t{1});
    tree_.predict(decision.replica, request.block_hashes, now);
  }

 private:
  void grow(std::size_t replicas) {
    while (tree_.replica_count() < replicas) {
      tree_.add_replica({ReplicaKind::kOpenai, config_.max_tree_blocks});
    }
  }

  // predicted_cached_tokens comes from the gateway's index, as for every policy, so that the
  // prediction can be compared with what the engine reports.
  RouteDecision decide(const RouteRequest& request, std::span<const ReplicaView> replicas,
                       const PrefixIndex& index, Clock::time_point now, std::size_t chosen,
                       RouteReason reason) {
    match_blocks(request, replicas, index, now, blocks_);
    return {static_cast<ReplicaId>(chosen), reason, cached_tokens(request, blocks_[chosen])};
  }

  SglangCacheAwareConfig config_;
  PrefixIndex tree_;                     // per replica: the routed prompts' blocks, LRU-bounded
  std::vector<std::size_t> tree_match_;  // scratch
  std::vector<std::size_t> blocks_;      // scratch
};

}  // namespace

std::unique_ptr<RoutingPolicy> make_sglang_cache_aware(const SglangCacheAwareConfig& config) {
  return std::make_unique<SglangCacheAware>(config);
}

}  // namespace prefixgate::gateway::routing
