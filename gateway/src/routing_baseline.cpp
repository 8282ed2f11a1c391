// The load-only baselines and session affinity: round_robin, random, least_load, power_of_two,
// consistent_hash. Each still reports the cached tokens the index predicts on the replica it
// picks, so the proxy can compare prediction and engine report under any policy.
#include <xxhash.h>

#include <random>
#include <vector>

#include "routing_common.h"

namespace prefixgate::gateway::routing {
namespace {

// Shared by the baselines: the match is computed only to report predicted_cached_tokens.
class AuditedPolicy : public RoutingPolicy {
 protected:
  RouteDecision decide(const RouteRequest& request, std::span<const ReplicaView> replicas,
                       const PrefixIndex& index, Clock::time_point now, ReplicaId chosen,
                       RouteReason reason) {
    match_blocks(request, replicas, index, now, blocks_);
    return {chosen, reason, cached_tokens(request, blocks_[chosen])};
  }
  std::vector<std::size_t> blocks_;
};

std::vector<ReplicaId> healthy_ids(std::span<const ReplicaView> replicas) {
  std::vector<ReplicaId> ids;
  for (std::size_t r = 0; r < replicas.size(); ++r) {
    if (replicas[r].healthy) ids.push_back(static_cast<ReplicaId>(r));
  }
  return ids;
}

class RoundRobin final : public AuditedPolicy {
 public:
  std::string_view name() const override { return "round_robin"; }
  RouteDecision route(const RouteRequest& request, std::span<const ReplicaView> replicas,
                      const PrefixIndex& index, Clock::time_point now) override {
    const std::size_t n = replicas.size();
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t r = (next_ + i) % n;
      if (!replicas[r].healthy) continue;
      next_ = r + 1;  // the cycle continues after the chosen one, skipping unhealthy replicas
      return decide(request, replicas, index, now, static_cast<ReplicaId>(r),
                    RouteReason::kRoundRobin);
    }
    return {};
  }

 private:
  std::size_t next_ = 0;
};

class Random final : public AuditedPolicy {
 public:
  explicit Random(std::uint64_t seed) : rng_(seed) {}
  std::string_view name() const override { return "random"; }
  RouteDecision route(const RouteRequest& request, std::span<const ReplicaView> replicas,
                      const PrefixIndex& index, Clock::time_point now) override {
    const std::vector<ReplicaId> ids = healthy_ids(replicas);
    if (ids.empty()) return {};
    std::uniform_int_distribution<std::size_t> pick(0, ids.size() - 1);
    return decide(request, replicas, index, now, ids[pick(rng_)], RouteReason::kRandom);
  }

 private:
  std::mt19937_64 rng_;
};

class LeastLoad final : public AuditedPolicy {
 public:
  explicit LeastLoad(double decode_weight) : decode_weight_(decode_weight) {}
  std::string_view name() const override { return "least_load"; }
  RouteDecision route(const RouteRequest& request, std::span<const ReplicaView> replicas,
                      const PrefixIndex& index, Clock::time_point now) override {
    const std::size_t n = replicas.size();
    // Ties start from a rotating offset, so an idle fleet is not served by replica 0 alone.
    const std::size_t start = n == 0 ? 0 : tie_start_++ % n;
    std::size_t best = n;
    double best_load = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t r = (start + i) % n;
      if (!replicas[r].healthy) continue;
      const double load = load_tokens(replicas[r], decode_weight_);
      if (best == n || load < best_load) {
        best = r;
        best_load = load;
      }
    }
    if (best == n) return {};
    return decide(request, replicas, index, now, static_cast<ReplicaId>(best),
                  RouteReason::kLeastLoad);
  }

 private:
  double decode_weight_;
  std::size_t tie_start_ = 0;
};

// Two distinct random healthy replicas, the less loaded wins (Mitzenmacher, "The Power of Two
// Choices in Randomized Load Balancing"): near least_load's balance without herding every router
// instance onto the same momentarily idle replica.
class PowerOfTwo final : public AuditedPolicy {
 public:
  PowerOfTwo(std::uint64_t seed, double decode_weight)
      : rng_(seed), decode_weight_(decode_weight) {}
  std::string_view name() const override { return "power_of_two"; }
  RouteDecision route(const RouteRequest& request, std::span<const ReplicaView> replicas,
                      const PrefixIndex& index, Clock::time_point now) override {
    const std::vector<ReplicaId> ids = healthy_ids(replicas);
    if (ids.empty()) return {};
    ReplicaId chosen = ids[0];
    if (ids.size() > 1) {
      std::uniform_int_distribution<std::size_t> first(0, ids.size() - 1);
      std::uniform_int_distribution<std::size_t> second(0, ids.size() - 2);
      const std::size_t a = first(rng_);
      std::size_t b = second(rng_);
      if (b >= a) ++b;  // distinct from a, uniform over the rest
      const double load_a = load_tokens(replicas[ids[a]], decode_weight_);
      const double load_b = load_tokens(replicas[ids[b]], decode_weight_);
      chosen = load_b < load_a ? ids[b] : ids[a];
    }
    return decide(request, replicas, index, now, chosen, RouteReason::kPowerOfTwo);
  }

 private:
  std::mt19937_64 rng_;
  double decode_weight_;
};

// Session affinity by rendezvous hashing over the healthy replicas. Requests without a session
// key have nothing to be affine to and go to the least loaded replica.
class ConsistentHash final : public AuditedPolicy {
 public:
  explicit ConsistentHash(double decode_weight) : least_load_(decode_weight) {}
  std::string_view name() const override { return "consistent_hash"; }
  RouteDecision route(const RouteRequest& request, std::span<const ReplicaView> replicas,
                      const PrefixIndex& index, Clock::time_point now) override {
    if (request.session_key.empty()) return least_load_.route(request, replicas, index, now);
    const std::uint64_t key = XXH3_64bits(request.session_key.data(), request.session_key.size());
    std::size_t best = replicas.size();
    std::uint64_t best_score = 0;
    for (std::size_t r = 0; r < replicas.size(); ++r) {
      if (!replicas[r].healthy) continue;
      const std::uint64_t score = rendezvous_score(key, static_cast<ReplicaId>(r));
      if (best == replicas.size() || score > best_score) {
        best = r;
        best_score = score;
      }
    }
    if (best == replicas.size()) return {};
    return decide(request, replicas, index, now, static_cast<ReplicaId>(best),
                  RouteReason::kSessionAffinity);
  }

 private:
  LeastLoad least_load_;
};

}  // namespace

std::unique_ptr<RoutingPolicy> make_round_robin() {
  return std::make_unique<RoundRobin>();
}
std::unique_ptr<RoutingPolicy> make_random(std::uint64_t seed) {
  return std::make_unique<Random>(seed);
}
std::unique_ptr<RoutingPolicy> make_least_load(double decode_weight) {
  return std::make_unique<LeastLoad>(decode_weight);
}
std::unique_ptr<RoutingPolicy> make_power_of_two(std::uint64_t seed, double decode_weight) {
  return std::make_unique<PowerOfTwo>(seed, decode_weight);
}
std::unique_ptr<RoutingPolicy> make_consistent_hash(double decode_weight) {
  return std::make_unique<ConsistentHash>(decode_weight);
}

}  // namespace prefixgate::gateway::routing
