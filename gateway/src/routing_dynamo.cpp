// dynamo_kv: the cost function of NVIDIA Dynamo's KV router (ai-dynamo/dynamo,
// docs/architecture/kv_cache_routing.md and lib/llm/src/kv_router: KvIndexer, the scheduler's
// worker selector, ActiveSequences), rebuilt as a baseline. See gateway/ROUTING.md.
//
//   prefill_blocks(r) = (active_prefill_tokens(r) + prompt_tokens - overlap(r) x block_size)
//                       / block_size
//   decode_blocks(r)  = active_blocks(r) + prompt blocks not already active on r
//   cost(r)           = overlap_score_weight x prefill_blocks(r) + decode_blocks(r)
//
// The lowest cost wins (router_temperature 0; ties at random), or a softmax sample of the costs
// at temperature > 0. overlap(r) is what the engines' events say r holds (the KvIndexer): the
// gateway's predictions are not counted. active_prefill_tokens is the router's own count of the
// uncached prompt tokens of requests it sent that have not produced a first token
// (inflight_prompt_tokens, the same bookkeeping), and active_blocks the distinct blocks of the
// prompts it sent that are still running, added when it routes and freed when they end (Dynamo's
// "predicted blocks" of its active sequences).
#include <algorithm>
#include <boost/unordered/unordered_flat_map.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "routing_common.h"

namespace prefixgate::gateway::routing {
namespace {

// A `now` past every prediction's expiry: longest_match then counts confirmed blocks only.
constexpr Clock::time_point kConfirmedOnly = Clock::time_point::max();

class DynamoKv final : public RoutingPolicy {
 public:
  DynamoKv(const DynamoKvConfig& config, std::uint64_t seed) : config_(config), rng_(seed) {}
  std::string_view name() const override { return "dynamo_kv"; }

  RouteDecision route(const RouteRequest& request, std::span<const ReplicaView> replicas,
                      const PrefixIndex& index, Clock::time_point) override {
    const std::size_t n = replicas.size();
    grow(n);
    const std::span<const std::uint64_t> hashes = request.block_hashes;
    overlap_.assign(index.replica_count(), 0);
    index.longest_match(hashes, kConfirmedOnly, overlap_);
    overlap_.resize(n, 0);
    active_depth_.assign(active_.replica_count(), 0);
    active_.longest_match(hashes, kConfirmedOnly, active_depth_);

    const double block_size = static_cast<double>(std::max<std::size_t>(1, request.block_size));
    cost_.assign(n, 0);
    candidates_.clear();
    for (std::size_t r = 0; r < n; ++r) {
      if (!replicas[r].healthy) continue;
      const double prefill_tokens =
          static_cast<double>(replicas[r].inflight_prompt_tokens) +
          static_cast<double>(request.prompt_tokens - cached_tokens(request, overlap_[r]));
      const double decode_blocks = static_cast<double>(refs_[r].size()) +
                                   static_cast<double>(hashes.size() - active_depth_[r]);
      cost_[r] = config_.overlap_score_weight * (prefill_tokens / block_size) + decode_blocks;
      candidates_.push_back(r);
    }
    if (candidates_.empty()) return {};
    const std::size_t chosen = config_.temperature > 0 ? sample() : lowest();
    RouteDecision d;
    d.replica = static_cast<ReplicaId>(chosen);
    d.reason = overlap_[chosen] > 0 ? RouteReason::kCacheHit : RouteReason::kLeastCost;
    d.predicted_cached_tokens = cached_tokens(request, overlap_[chosen]);
    d.ticket = ++last_ticket_;
    return d;
  }

  void on_routed(const RouteRequest& request, const RouteDecision& decision,
                 Clock::time_point) override {
    grow(decision.replica + std::size_t{1});
    auto [it, inserted] = flights_.try_emplace(decision.ticket);
    if (!inserted) return;
    it->second.replica = decision.replica;
    it->second.blocks.assign(request.block_hashes.begin(), request.block_hashes.end());
    auto& refs = refs_[decision.replica];
    for (std::uint64_t hash : request.block_hashes) {
      if (++refs[hash] == 1) active_.apply_stored(decision.replica, hash);
    }
  }

  void on_finished(const RouteDecision& decision) override {
    auto it = flights_.find(decision.ticket);
    if (it == flights_.end()) return;
    auto& refs = refs_[it->second.replica];
    for (std::uint64_t hash : it->second.blocks) {
      auto ref = refs.find(hash);
      if (ref == refs.end() || --ref->second > 0) continue;
      refs.erase(ref);
      active_.apply_removed(it->second.replica, hash);
    }
    flights_.erase(it);
  }

 private:
  struct Flight {
    ReplicaId replica = 0;
    std::vector<std::uint64_t> blocks;
  };

  void grow(std::size_t replicas) {
    while (active_.replica_count() < replicas) active_.add_replica({});
    if (refs_.size() < replicas) refs_.resize(replicas);
  }

  // The lowest cost; ties uniformly at random, as Dynamo's selector breaks them.
  std::size_t lowest() {
    double best = cost_[candidates_.front()];
    for (std::size_t r : candidates_) best = std::min(best, cost_[r]);
    ties_.clear();
    for (std::size_t r : candidates_) {
      if (cost_[r] == best) ties_.push_back(r);
    }
    if (ties_.size() == 1) return ties_.front();
    std::uniform_int_distribution<std::size_t> pick(0, ties_.size() - 1);
    return ties_[pick(rng_)];
  }

  // Softmax over the costs normalized to [0, 1] by their range: p(r) ~ exp(-norm(r) / T).
  std::size_t sample() {
    double lo = cost_[candidates_.front()];
    double hi = lo;
    for (std::size_t r : candidates_) {
      lo = std::min(lo, cost_[r]);
      hi = std::max(hi, cost_[r]);
    }
    weights_.clear();
    for (std::size_t r : candidates_) {
      const double norm = hi > lo ? (cost_[r] - lo) / (hi - lo) : 0.0;
      weights_.push_back(std::exp(-norm / config_.temperature));
    }
    std::discrete_distribution<std::size_t> pick(weights_.begin(), weights_.end());
    return candidates_[pick(rng_)];
  }

  DynamoKvConfig config_;
  std::mt19937_64 rng_;
  // The prompts in flight, per replica: a block is "stored" on r while a request routed to r
  // that holds it is running, so longest_match gives how much of a new prompt is already active.
  PrefixIndex active_;
  std::vector<boost::unordered_flat_map<std::uint64_t, std::uint32_t>> refs_;  // block -> count
  boost::unordered_flat_map<std::uint64_t, Flight> flights_;                   // by ticket
  std::uint64_t last_ticket_ = 0;
  std::vector<std::size_t> overlap_, active_depth_, candidates_, ties_;  // scratch
  std::vector<double> cost_, weights_;                                   // scratch
};

}  // namespace

std::unique_ptr<RoutingPolicy> make_dynamo_kv(const DynamoKvConfig& config, std::uint64_t seed) {
  return std::make_unique<DynamoKv>(config, seed);
}

}  // namespace prefixgate::gateway::routing
