// Test support for gateway/'s routing tests: synthetic chained block hashes, and a small fleet
// simulator (per replica a prefill queue drained at a fixed rate and an LRU block cache that
// emits kv_events into a PrefixIndex, as prefixgate-engine does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

#include "prefixgate/gateway/prefix_index.h"
#include "prefixgate/gateway/routing.h"

namespace prefixgate::gateway::testing {

inline std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ULL;
  x ^= x >> 27;
  x *= 0x81dadef4bc2dd44dULL;
  x ^= x >> 33;
  return x;
}

// Chained like canonicalize's block hashes: block i's hash depends on every block before it.
// A prompt is `prefix_blocks` blocks of prefix `prefix_id` followed by `tail_blocks` blocks
// unique to `tail_id`.
inline std::vector<std::uint64_t> prompt_hashes(std::uint64_t prefix_id, std::size_t prefix_blocks,
                                                std::uint64_t tail_id = 0,
                                                std::size_t tail_blocks = 0) {
  std::vector<std::uint64_t> hashes;
  std::uint64_t h = mix(prefix_id + 1);
  for (std::size_t i = 0; i < prefix_blocks; ++i) hashes.push_back(h = mix(h ^ (i + 1)));
  for (std::size_t i = 0; i < tail_blocks; ++i) {
    hashes.push_back(h = mix(h ^ mix(tail_id + 0x1234567) ^ i));
  }
  return hashes;
}

inline RouteRequest request_for(const std::vector<std::uint64_t>& hashes,
                                std::size_t block_size = 16) {
  RouteRequest r;
  r.block_hashes = hashes;
  r.block_size = block_size;
  r.prompt_tokens = hashes.size() * block_size;
  return r;
}

struct FleetOptions {
  std::size_t replicas = 4;
  std::size_t cache_blocks = 1 << 20;  // per replica
  std::size_t prefill_tokens_per_step = 4096;
  std::chrono::milliseconds step{100};
  std::size_t block_size = 16;
};

// Engine side of one replica: an LRU of blocks; reports stored/removed to the index.
class SimEngine {
 public:
  SimEngine(ReplicaId id, std::size_t capacity) : id_(id), capacity_(capacity) {}

  // Cached leading blocks (the engine's truth, not the index's belief).
  std::size_t match(const std::vector<std::uint64_t>& hashes) const {
    std::size_t i = 0;
    while (i < hashes.size() && pos_.contains(hashes[i])) ++i;
    return i;
  }

  // Caches the prompt's blocks; the prefix ends up most recent so tails are evicted first.
  void store(const std::vector<std::uint64_t>& hashes, PrefixIndex& index) {
    for (auto it = hashes.rbegin(); it != hashes.rend(); ++it) {
      auto p = pos_.find(*it);
      if (p != pos_.end()) {
        lru_.splice(lru_.begin(), lru_, p->second);
        continue;
      }
      lru_.push_front(*it);
      pos_[*it] = lru_.begin();
      index.apply_stored(id_, *it);
    }
    while (lru_.size() > capacity_) {
      index.apply_removed(id_, lru_.back());
      pos_.erase(lru_.back());
      lru_.pop_back();
    }
  }
  std::size_t size() const { return lru_.size(); }
  std::size_t capacity() const { return capacity_; }

 private:
  ReplicaId id_;
  std::size_t capacity_;
  std::list<std::uint64_t> lru_;
  std::unordered_map<std::uint64_t, std::list<std::uint64_t>::iterator> pos_;
};

class Fleet {
 public:
  Fleet(FleetOptions options, std::unique_ptr<RoutingPolicy> policy)
      : options_(options), policy_(std::move(policy)), views_(options.replicas) {
    for (std::size_t r = 0; r < options.replicas; ++r) {
      const ReplicaId id = index_.add_replica({});
      views_[r].id = id;
      views_[r].kv_pages_total = options.cache_blocks;  // one page per block, as load reports say
      engines_.emplace_back(id, options.cache_blocks);
    }
  }

  // Routes one request, as the gateway does (route, then predict), and enqueues its uncached
  // prefill on the chosen replica as the engine would (then caches its blocks).
  RouteDecision submit(const std::vector<std::uint64_t>& hashes) {
    const RouteRequest request = request_for(hashes, options_.block_size);
    const RouteDecision d = policy_->route(request, views_, index_, now_);
    if (d.reason == RouteReason::kNoHealthyReplica) return d;
    index_.predict(d.replica, hashes, now_);
    const std::size_t cached = engines_[d.replica].match(hashes) * options_.block_size;
    queue_tokens(d.replica, request.prompt_tokens - cached);
    engines_[d.replica].store(hashes, index_);
    views_[d.replica].kv_pages_used = engines_[d.replica].size();
    prompt_tokens_ += request.prompt_tokens;
    cached_tokens_ += cached;
    return d;
  }

  // Every replica prefills up to prefill_tokens_per_step of its queue; time advances.
  void step() {
    for (auto& v : views_) {
      v.tokens_queued_for_prefill -=
          std::min(v.tokens_queued_for_prefill, options_.prefill_tokens_per_step);
    }
    now_ += options_.step;
  }

  void queue_tokens(ReplicaId r, std::size_t tokens) {
    views_[r].tokens_queued_for_prefill += tokens;
  }
  std::size_t queued(ReplicaId r) const { return views_[r].tokens_queued_for_prefill; }
  std::vector<ReplicaView>& views() { return views_; }
  PrefixIndex& index() { return index_; }
  double hit_rate() const {
    return prompt_tokens_ == 0
               ? 0.0
               : static_cast<double>(cached_tokens_) / static_cast<double>(prompt_tokens_);
  }

 private:
  FleetOptions options_;
  std::unique_ptr<RoutingPolicy> policy_;
  PrefixIndex index_;
  std::vector<ReplicaView> views_;
  std::vector<SimEngine> engines_;
  Clock::time_point now_{};
  std::size_t prompt_tokens_ = 0;
  std::size_t cached_tokens_ = 0;
};

}  // namespace prefixgate::gateway::testing
