// Whose turn it is, for cache_aware's rules that send in turn (near_tie_prefills,
// gateway_spread_prefills): when this gateway last sent to each replica, and its own order of
// the replicas (the rendezvous score of its seed). Gateways that all went round from the lowest
// index would go in the same order, at the same pace, and send to the same replica at about the
// same time (gateway/ROUTING.md, "A request the cache barely helps").
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "prefixgate/gateway/routing.h"
#include "routing_common.h"

namespace prefixgate::gateway::routing {

class SendTurns {
 public:
  explicit SendTurns(std::uint64_t seed) : key_(seed ^ 0x9e3779b97f4a7c15ULL) {}

  void sent(std::size_t replica, Clock::time_point now) {
    if (last_.size() <= replica) last_.resize(replica + 1, Clock::time_point::min());
    last_[replica] = now;
  }

  // When this gateway last sent to `replica`; time_point::min() for never.
  Clock::time_point last(std::size_t replica) const {
    return replica < last_.size() ? last_[replica] : Clock::time_point::min();
  }

  // Of `pick` and the `within` replicas among n, the one sent to least recently. `pick` (the
  // least cost) keeps a tie, so an idle fleet still fills by the cost; among the others,
  // replicas never sent to come first, in this gateway's own order. That order is the
  // rotation's from then on: the least recently sent is the one first sent in the pass before.
  template <class Within>
  std::size_t least_recently_sent(std::size_t n, std::size_t pick, Within within) const {
    std::size_t best = pick;
    std::uint64_t best_score = 0;
    for (std::size_t r = 0; r < n; ++r) {
      if (r == pick || !(last(r) <= last(best))) continue;
      if (last(r) == last(best)) {
        if (best == pick || score(r) <= best_score || !within(r)) continue;
      } else if (!within(r)) {
        continue;
      }
      best = r;
      best_score = score(r);
    }
    return best;
  }

  // next_due with a round of `gap_seconds` per `within` replica: the first of them, in this
  // gateway's order, not sent to for as many intervals between sends as there are of them.
  template <class Within>
  std::optional<std::size_t> due_this_round(std::size_t n, Clock::time_point now,
                                            double gap_seconds, Within within) {
    std::size_t members = 0;
    for (std::size_t r = 0; r < n; ++r) members += within(r) ? 1 : 0;
    const double round = static_cast<double>(members) * gap_seconds;
    return next_due(
        n, now - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(round)),
        within);
  }

  // The first `within` replica among n, in this gateway's order from where the last one it
  // returned left off, that it has not sent to since `due`; none when there is none.
  template <class Within>
  std::optional<std::size_t> next_due(std::size_t n, Clock::time_point due, Within within) {
    if (order_.size() != n) {
      order_.resize(n);
      for (std::size_t i = 0; i < n; ++i) order_[i] = i;
      std::sort(order_.begin(), order_.end(),
                [&](std::size_t a, std::size_t b) { return score(a) > score(b); });
      next_ = 0;
    }
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t i = (next_ + k) % n;
      const std::size_t r = order_[i];
      if (!(last(r) < due) || !within(r)) continue;
      next_ = (i + 1) % n;
      return r;
    }
    return std::nullopt;
  }

 private:
  std::uint64_t score(std::size_t r) const {
    return rendezvous_score(key_, static_cast<ReplicaId>(r));
  }

  std::uint64_t key_;
  std::vector<Clock::time_point> last_;  // by replica
  std::vector<std::size_t> order_;       // this gateway's order of the replicas
  std::size_t next_ = 0;                 // where in it next_due looks first
};

}  // namespace prefixgate::gateway::routing
