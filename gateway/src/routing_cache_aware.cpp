// cache_aware: the replica with the lowest expected cost (see routing.h and gateway/ROUTING.md).
//
//   cost(r) = (prompt_tokens - saved_prefill_tokens(r)) + load(r)
//   saved_prefill_tokens(r) = cached_tokens(r), lower-tier ones at offload_hit_weight
//   load(r) = max(tokens_queued_for_prefill, inflight_prompt_tokens)
//             + decode_weight * max(running + waiting, inflight_requests)
//   (prefill_drain, one gateway, a replica with a place: the queued prefill drains at the
//   replica's prefill rate, the gateway's own from each send and the report's from its arrival)
//
// Order of the rules: unhealthy replicas are out; a cold prefix goes to the replica with the
// smallest cached footprint (among several gateways, the rendezvous hash of its first blocks
// among the replicas near the smallest; with cold_rendezvous, the bounded-load rendezvous hash);
// then the cheapest replica holding the longest match while the request's predicted time to first
// token there is at most the prefill of a prompt at tail_quantile of the recent prompts' lengths;
// otherwise the least cost, a duplicate prefill charged at duplicate_weight (times
// queue_duplicate_factor when a replica holding the longest match has a place in its batch);
// among several gateways, a spill only when it saves more than the others may have sent its
// destination unseen (gateway_spill_slack). With every batch full, a request kept on a holder of
// its longest match goes to the holder whose cost counting its wait for a place is least
// (soonest_holder). Among several gateways, a frequent kind of request whose match saves little
// goes in this gateway's turn among the replicas near the least cost, not to the least cost that
// every gateway sees alike (gateway_spread_prefills). A request kept on a holder goes to an
// idle replica instead when its prefix draws more than its holders' share of the traffic
// (share_copy_siblings), or when the holders are about to run out of places for the prefix's
// siblings (copy_headroom). With one gateway, where the cache saves a request little, the
// cheapest replica (or holder) gives way to a replica within half a prefill of its cost that
// this gateway sent to less recently (near_tie_prefills).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <unordered_map>
#include <vector>

#include "cache_aware_load.h"
#include "eviction_churn.h"
#include "prefixgate/gateway/replica_load.h"
#include "routing_common.h"
#include "send_turns.h"

namespace prefixgate::gateway::routing {
namespace {

class CacheAware final : public RoutingPolicy {
 public:
  // `seed` orders this gateway's turn over the replicas (send_turns.h).
  CacheAware(const CacheAwareConfig& config, std::uint64_t seed) : config_(config), turns_(seed) {
    // The fleet's rate of sends, over its last hundred or so: whether peer_turns applies must
    // not flip with each short gap of a Poisson stream.
    send_gaps_.weight = 1.0 / 64;
  }
  std::string_view name() const override { return "cache_aware"; }

  void on_routed(const RouteRequest& request, const RouteDecision& decision,
                 Clock::time_point now) override {
    (void)request;
    turns_.sent(decision.replica, now);
    if (config_.peered) send_gaps_.add(now);  // every gateway's sends, as peers tell them
  }

  RouteDecision route(const RouteRequest& request, std::span<const ReplicaView> replicas,
                      const PrefixIndex& index, Clock::time_point now) override {
    const std::size_t n = replicas.size();
    load_model_.set_now(now);
    now_ = now;
    match_blocks(request, replicas, index, now, blocks_, &offloaded_);
    if (config_.memory_aware) churn_.update(replicas, index, now);
    const bool seconds = config_.cost_in_seconds && CacheAwareLoad::timed(replicas);
    seconds_ = seconds;
    // One pass over the replicas for everything the rules below need of all of them (at 1,000
    // replicas each pass is a measurable part of a decision). An unhealthy replica's load is
    // never read.
    load_.resize(n);
    double total_load = 0;
    double min_load = 0;
    std::size_t healthy = 0;
    std::size_t best_match = 0;  // longest match on any healthy replica, in blocks
    std::size_t holders = 0;     // healthy replicas holding it
    // In a local: a member written each iteration is a store the next one must wait for.
    double best_saved = 0;
    // A full batch's wait counts only while some replica would admit at once: sending there
    // avoids it. With every replica full the wait is everyone's, and the cache decides.
    bool room = false;
    bool holder_has_place = false;
    if (seconds) {
      for (std::size_t r = 0; r < n && !room; ++r) {
        room = replicas[r].healthy && load_model_.admission_seconds(replicas[r]) == 0;
      }
    }
    queued_seconds_.resize(n);
    for (std::size_t r = 0; r < n; ++r) {
      if (!replicas[r].healthy) continue;
      load_[r] = seconds ? load_model_.load_seconds(replicas[r], room, queued_seconds_[r])
                         : load_tokens(replicas[r], config_.decode_weight);
      total_load += load_[r];
      min_load = healthy == 0 ? load_[r] : std::min(min_load, load_[r]);
      ++healthy;
      // Whether some replica holding the longest match has a place in its batch: a copy would
      // then skip only a prefill queue (queue_duplicate_factor), not a wait for a place.
      if (blocks_[r] > best_match) {
        best_match = blocks_[r];
        holders = 1;
        holder_has_place = load_model_.has_place(replicas[r]);
      } else if (blocks_[r] == best_match) {
        ++holders;
        if (!holder_has_place) holder_has_place = load_model_.has_place(replicas[r]);
      }
      // Nothing matched saves nothing (most of a large fleet): no conversions to find it out.
      if (blocks_[r] > 0) {
        best_saved = std::max(best_saved, saved_prefill_tokens(request, blocks_[r], offloaded_[r],
                                                               config_.offload_hit_weight));
      }
    }
    if (healthy == 0) return {};
    record_prompt(request.prompt_tokens);
    ++arrivals_;
    best_saved_ = best_saved;
    best_match_ = best_match;
    duplicate_weight_ = config_.duplicate_weight;
    if (best_match > 0 && holder_has_place) duplicate_weight_ *= config_.queue_duplicate_factor;
    const double mean = total_load / static_cast<double>(healthy);
    const std::span<const std::uint64_t> hashes = request.block_hashes;

    if (best_match == 0 && !hashes.empty()) {
      // Cold prefix: the smallest footprint, ties to the rendezvous hash of the first
      // affinity_blocks blocks (the chained hash of block k-1 names blocks [0, k)), so concurrent
      // siblings agree before any prediction or event exists. With cold_rendezvous, that hash
      // alone, bounded load keeping a busy replica from taking new prefixes.
      const std::uint64_t key = hashes[std::min(config_.affinity_blocks, hashes.size()) - 1];
      if (!config_.cold_rendezvous) {
        if (auto r = smallest_footprint(request, replicas, index, key, seconds, min_load)) {
          return decision(request, *r, RouteReason::kColdAffinity);
        }
      }
      const double bound = config_.bounded_load_factor * mean;
      // Memory-aware: nor one that evicts faster than the others (its LRU tail is young: a new
      // prefix there pushes out blocks still in use), unless every replica under the load bound
      // does.
      if (auto r = highest_score(replicas, key, [&](std::size_t i) {
            return load_[i] <= bound && churn(i) <= config_.bounded_load_factor;
          })) {
        return decision(request, *r, RouteReason::kColdAffinity);
      }
      if (auto r = highest_score(replicas, key, [&](std::size_t i) { return load_[i] <= bound; })) {
        return decision(request, *r, RouteReason::kColdAffinity);
      }
    }

    // Least cost. Without memory_aware, among replicas that are not overloaded. Ties (an idle
    // fleet, a prefix cached everywhere) go to the rendezvous winner for the blocks just past the
    // longest match, so siblings that diverge there still converge.
    const double overload_bound = config_.overload_factor * mean + config_.overload_floor_tokens;
    const std::uint64_t tie_key =
        hashes.empty() ? 0
                       : hashes[std::min(best_match + config_.affinity_blocks, hashes.size()) - 1];
    // The rendezvous score only breaks ties, so it is computed only for them: two hashes per
    // replica otherwise, on every decision.
    auto cheapest = [&](bool skip_overloaded) {
      std::size_t best = n;
      double best_cost = 0;
      std::optional<std::uint64_t> best_score;  // computed at the first tie with `best`
      for (std::size_t r = 0; r < n; ++r) {
        if (!replicas[r].healthy) continue;
        if (skip_overloaded && load_[r] > overload_bound) continue;
        const double cost = load_[r] + miss_cost(request, replicas[r], r, seconds);
        if (best == n || cost < best_cost) {
          best = r;
          best_cost = cost;
          best_score.reset();
        } else if (cost == best_cost) {
          if (!best_score) best_score = rendezvous_score(tie_key, static_cast<ReplicaId>(best));
          const std::uint64_t score = rendezvous_score(tie_key, static_cast<ReplicaId>(r));
          if (score > *best_score) {
            best = r;
            best_score = score;
          }
        }
      }
      if (best == n) return best;
      return in_turn_among_near_ties(request, replicas, best, best_cost, [&](std::size_t r) {
        return !(skip_overloaded && load_[r] > overload_bound);
      });
    };
    std::size_t chosen = n;
    // The earlier rule (memory_aware false) is kept as it was, without the tail budget.
    if (best_match > 0 && config_.memory_aware && config_.tail_quantile > 0) {
      chosen = holder_within_budget(request, replicas, seconds);
    }
    if (chosen == n) chosen = cheapest(/*skip_overloaded=*/!config_.memory_aware);
    // Every healthy replica over the bound cannot happen with overload_factor >= 1 (the least
    // loaded is at most the mean); kept so a future config cannot make route() fail.
    if (chosen == n) chosen = cheapest(/*skip_overloaded=*/false);
    if (best_match > 0 && blocks_[chosen] < best_match) {
      chosen = holder_within_spill_slack(request, replicas, seconds, chosen);
    }
    // With every batch full the wait for a place is left out of the cost (moving a request would
    // buy nothing but a second prefill), but between the replicas holding the longest match it
    // costs no prefill: the one whose place comes soonest keeps the hit and the shorter wait.
    // Not with memory_aware false, the earlier rule kept as it was.
    if (config_.soonest_holder && config_.memory_aware && seconds && !room && best_match > 0 &&
        blocks_[chosen] == best_match) {
      chosen = soonest_holder(request, replicas, chosen);
    }

    // Several gateways: a request whose cost is its replica's load alone is spread over the
    // replicas near the least cost instead of herding onto it with the other gateways'.
    if (config_.gateways > 1 && config_.gateway_spread_prefills > 0 && config_.memory_aware &&
        seconds && best_match > 0 && would_herd(request, replicas, chosen, now)) {
      chosen = spread_in_turn(request, replicas, chosen, now);
    }

    // A hot prefix's copies as soon as its share of the traffic is known (share_copy_siblings),
    // and a copy before the holders fill, while the siblings that arrive during its prefill still
    // find places on them (copy_headroom). The prefix's rate counts every sibling, kept or not.
    if ((config_.copy_headroom > 0 || config_.share_copy_siblings > 0) && config_.memory_aware &&
        seconds && best_match > 0) {
      const PrefixRate rate = sibling_rate(hashes[best_match - 1], now);
      if (blocks_[chosen] == best_match)
        chosen = share_copy(replicas, chosen, rate, healthy, holders);
      if (blocks_[chosen] == best_match && config_.copy_headroom > 0) {
        chosen = early_copy(request, replicas, chosen, rate.gaps.seconds);
      }
    }

    RouteReason reason = RouteReason::kLeastCost;
    if (best_match > 0) {
      reason = blocks_[chosen] == best_match ? RouteReason::kCacheHit : RouteReason::kLoadSpill;
    }
    return decision(request, chosen, reason);
  }

 private:
  // A prefix's siblings as this gateway routes them: requests whose longest match ends at the
  // same block (copy_headroom, share_copy_siblings).
  struct PrefixRate {
    SmoothedInterval gaps;              // between two siblings; 0 for the first
    std::size_t siblings = 0;           // routed so far, this one included
    std::size_t arrivals_at_first = 0;  // the gateway's requests before the first sibling
  };

  template <class Eligible>
  std::optional<std::size_t> highest_score(std::span<const ReplicaView> replicas, std::uint64_t key,
                                           Eligible eligible) const {
    std::optional<std::size_t> best;
    std::uint64_t best_score = 0;
    for (std::size_t r = 0; r < replicas.size(); ++r) {
      if (!replicas[r].healthy || !eligible(r)) continue;
      const std::uint64_t score = rendezvous_score(key, static_cast<ReplicaId>(r));
      if (!best || score > best_score) {
        best = r;
        best_score = score;
      }
    }
    return best;
  }

  // A cold prefix goes where the least distinct content lives: the blocks a replica holds by its
  // events plus the uncached prompt blocks the gateway has sent it that are not yet prefilled
  // (so a burst of new prefixes spreads before their events arrive). This is SGLang's "smallest
  // tree" with the engine's own cache as the tree. Prefixes are what load a replica for as long
  // as their traffic lasts, so placing each where the fewest are keeps the fleet balanced where
  // the instantaneous load (which a burst of hits moves by a whole prefill) would not. Ties (an
  // empty fleet, caches all full) go to the rendezvous winner of the prefix's first blocks, so
  // several gateways with the same view agree; with several gateways (config_.gateways), ties
  // widen to the replicas near the smallest (below). A replica whose load exceeds the least
  // loaded one's by more than this prompt's prefill is passed over. Memory-aware: replicas that
  // evict faster than bounded_load_factor x the mean are passed over unless all are.
  std::optional<std::size_t> smallest_footprint(const RouteRequest& request,
                                                std::span<const ReplicaView> replicas,
                                                const PrefixIndex& index, std::uint64_t key,
                                                bool seconds, double min_load) {
    // Not where the queue would delay this request by more than computing it once more: the
    // prefix's traffic is balanced by footprint, but its first request should not wait behind
    // a replica that is far busier than the rest (min_load: the least healthy replica's load).
    auto prefill = [&](std::size_t r) {
      const double tokens = static_cast<double>(request.prompt_tokens);
      return seconds ? tokens * replicas[r].prefill_seconds_per_token : tokens;
    };
    // Several gateways: the replicas within `slack` blocks of the smallest footprint are equal
    // candidates, the prefix's rendezvous hash choosing among them. Each gateway's footprints
    // differ from the truth by what the others have in flight (up to a prompt's blocks each), and
    // gateways that agree on the events alone would otherwise all pick the same smallest replica
    // for their different new prefixes. 0 with one gateway: exact ties only.
    const double block_size = static_cast<double>(std::max<std::size_t>(1, request.block_size));
    const double slack = static_cast<double>(config_.gateways - 1) *
                         static_cast<double>(request.prompt_tokens) / block_size;
    footprint_.resize(replicas.size());
    for (const bool check_churn : {true, false}) {
      std::optional<double> least;
      for (std::size_t r = 0; r < replicas.size(); ++r) {
        footprint_[r] = -1;  // not eligible
        if (!replicas[r].healthy) continue;
        if (check_churn && churn(r) > config_.bounded_load_factor) continue;
        if (load_[r] > min_load + prefill(r)) continue;
        const auto id = static_cast<ReplicaId>(r);
        footprint_[r] = static_cast<double>(r < index.replica_count() ? index.blocks(id) : 0) +
                        static_cast<double>(replicas[r].inflight_prompt_tokens) / block_size;
        least = least ? std::min(*least, footprint_[r]) : footprint_[r];
      }
      if (!least) continue;
      std::optional<std::size_t> best;
      std::uint64_t best_score = 0;
      for (std::size_t r = 0; r < replicas.size(); ++r) {
        if (footprint_[r] < 0 || footprint_[r] > *least + slack) continue;
        const std::uint64_t score = rendezvous_score(key, static_cast<ReplicaId>(r));
        if (!best || score > best_score) {
          best = r;
          best_score = score;
        }
      }
      if (best) return best;
    }
    return std::nullopt;
  }

  // tail_quantile: the cheapest replica holding the longest match, when the request's predicted
  // time to first token there (its load and its own uncached prefill) is at most the prefill of
  // a prompt at tail_quantile of the recent prompts' lengths, at that replica's rate; n otherwise.
  std::size_t holder_within_budget(const RouteRequest& request,
                                   std::span<const ReplicaView> replicas, bool seconds) {
    if (prompts_.empty()) return replicas.size();
    const std::size_t n = replicas.size();
    double holder_cost = 0;
    const std::size_t holder = cheapest_holder(request, replicas, seconds, holder_cost);
    if (holder == n) return n;
    // Several gateways: each sees only its own requests in flight, about 1/gateways of what the
    // holder has been sent since its report, so the holder's queue is taken as the larger of the
    // report and gateways x this gateway's own; kept only when even that stays in the budget.
    const ReplicaView& v = replicas[holder];
    if (config_.gateways > 1) {
      const double own = static_cast<double>(v.inflight_prompt_tokens);
      const double unseen = std::max(
          0.0, static_cast<double>(config_.gateways) * own - load_model_.queued_prefill(v));
      holder_cost += unseen * (seconds ? v.prefill_seconds_per_token : 1.0);
    }
    const double budget = tail_tokens_ * (seconds ? v.prefill_seconds_per_token : 1.0);
    return holder_cost <= budget ? holder : n;
  }

  // The cheapest healthy replica holding the longest match (n if none), and its cost.
  std::size_t cheapest_holder(const RouteRequest& request, std::span<const ReplicaView> replicas,
                              bool seconds, double& holder_cost) const {
    const std::size_t n = replicas.size();
    std::size_t holder = n;
    for (std::size_t r = 0; r < n; ++r) {
      // The match first: it is contiguous, and rules out most of a large fleet without reading
      // its views.
      if (blocks_[r] != best_match_ || !replicas[r].healthy) continue;
      const double cost = load_[r] + miss_cost(request, replicas[r], r, seconds);
      if (holder == n || cost < holder_cost) {
        holder = r;
        holder_cost = cost;
      }
    }
    if (holder == n) return n;
    const std::size_t h =
        in_turn_among_near_ties(request, replicas, holder, holder_cost,
                                [&](std::size_t r) { return blocks_[r] == best_match_; });
    if (h != holder) holder_cost = load_[h] + miss_cost(request, replicas[h], h, seconds);
    return h;
  }

  // peer_turns applies while two sends come within the peers' delay often enough for the tail
  // to feel it: one request in a hundred (the fleet's interval between sends under 100 delays).
  static constexpr double kPeerTurnGaps = 100;

  // near_tie_prefills: `best` (cost `best_cost`) or, when the cache saves this request little,
  // the healthy `eligible` replica within near_tie_prefills of its own prefill of that cost that
  // this gateway sent to least recently. One gateway only: behind several, each gateway's turn
  // would count only its own share of the traffic, and gateway_spread_prefills spreads instead.
  template <class Eligible>
  std::size_t in_turn_among_near_ties(const RouteRequest& request,
                                      std::span<const ReplicaView> replicas, std::size_t best,
                                      double best_cost, Eligible eligible) const {
    const double prompt = static_cast<double>(request.prompt_tokens);
    if (!seconds_ || !(config_.near_tie_prefills > 0) || config_.gateways > 1 ||
        best_saved_ > config_.near_tie_max_saved * prompt) {
      return best;
    }
    const double bound =
        best_cost + config_.near_tie_prefills * prompt * replicas[best].prefill_seconds_per_token;
    auto within = [&](std::size_t r) {
      return eligible(r) && replicas[r].healthy &&
             load_[r] + miss_cost(request, replicas[r], r, true) <= bound;
    };
    if (config_.peered && config_.peer_turns && send_gaps_.seconds > 0 &&
        send_gaps_.seconds < kPeerTurnGaps * config_.peer_delay_seconds) {
      // Peers: the same least recently sent replica at every gateway; due ones first, in this
      // gateway's own order (CacheAwareConfig::peered).
      if (const auto r = turns_.due_this_round(replicas.size(), now_, send_gaps_.seconds, within)) {
        return *r;
      }
    }
    return turns_.least_recently_sent(replicas.size(), best, within);
  }

  // gateway_spill_slack: `spill` (a replica holding less than the longest match) looks cheapest
  // to this gateway, which sees only its own sends since each replica's last report. The other
  // gateways see the same reports and spill to the same replicas that look idle, so the one that
  // looks cheapest is the likeliest to have been sent more than the view shows (up to a prompt
  // from each other gateway). The holder keeps the request unless the spill saves more than that,
  // capped at gateway_spill_slack prefills of a prompt at tail_quantile: the hit is worth a wait,
  // not a place in the tail. Returns the holder or `spill`. With one gateway, `spill`.
  std::size_t holder_within_spill_slack(const RouteRequest& request,
                                        std::span<const ReplicaView> replicas, bool seconds,
                                        std::size_t spill) const {
    if (config_.gateways < 2 || !config_.memory_aware || !(config_.gateway_spill_slack > 0)) {
      return spill;
    }
    double holder_cost = 0;
    const std::size_t holder = cheapest_holder(request, replicas, seconds, holder_cost);
    if (holder == replicas.size()) return spill;
    const double others = static_cast<double>(config_.gateways - 1);
    const double slack_tokens = std::min(others * static_cast<double>(request.prompt_tokens),
                                         config_.gateway_spill_slack * tail_tokens_);
    const ReplicaView& v = replicas[spill];
    const double spill_cost = load_[spill] + miss_cost(request, v, spill, seconds);
    const double slack = slack_tokens * (seconds ? v.prefill_seconds_per_token : 1.0);
    return holder_cost <= spill_cost + slack ? holder : spill;
  }

  // gateway_spread_prefills: whether this request would herd. Its longest match saves at most
  // kSpreadSavedShare of its prompt (a template start that every replica holds: its cost is the
  // replicas' load and little else), and such requests come often enough that the other gateways
  // are expected to route at least one more while its prefill runs (their rate taken as this
  // gateway's, from its smoothed interval between them). A rare one, as a trace's occasional new
  // prompt, is left to the least cost: the gateways do not pile onto a replica with it.
  static constexpr double kSpreadSavedShare = 0.05;
  bool would_herd(const RouteRequest& request, std::span<const ReplicaView> replicas,
                  std::size_t chosen, Clock::time_point now) {
    const double prompt = static_cast<double>(request.prompt_tokens);
    if (best_saved_ > kSpreadSavedShare * prompt) return false;
    const double interval = load_dominated_gaps_.add(now);  // 0 until the second one
    const double others = static_cast<double>(config_.gateways - 1);
    const double prefill = (prompt - best_saved_) * replicas[chosen].prefill_seconds_per_token;
    return interval > 0 && others * prefill >= interval;
  }

  // gateway_spread_prefills: every gateway sees the same reports and only its own sends, so for
  // a request whose cost is its replica's load all of them pick the same replica that looks least
  // loaded, and what each sends there unseen by the others queues behind the rest. The replicas
  // whose cost (seconds) is within gateway_spread_prefills x this request's uncached prefill of
  // the least are near enough that the view cannot tell them apart (a replica's load is known to
  // about one prefill), and they take such requests in this gateway's turn. Each gateway's
  // rotation spaces its own requests out on every replica, and the gateways' rotations together
  // load the replicas about as evenly as one rotation would; a random draw among the same
  // replicas (the power of two choices) lands two requests close together on one replica as
  // often as chance does, and that is the tail. The turn: a replica not sent to for a whole
  // round (the replicas in the window x this gateway's interval between such requests) is due,
  // and due replicas go first, in this gateway's own order (send_turns.h) from where its last
  // one left off; otherwise the least recently sent. By recency alone, a replica that every
  // gateway passed over while it was busy would come back at every gateway with the same report
  // and get one request from each of them at once. The window does not grow with the gateways:
  // the turn is blind to the cost inside it, and a wider one takes in replicas truly busier
  // (gateway/ROUTING.md, "A request the cache barely helps").
  std::size_t spread_in_turn(const RouteRequest& request, std::span<const ReplicaView> replicas,
                             std::size_t chosen, Clock::time_point now) {
    auto cost = [&](std::size_t r) {
      return load_[r] + miss_cost(request, replicas[r], r, /*seconds=*/true);
    };
    double least = cost(chosen);
    for (std::size_t r = 0; r < replicas.size(); ++r) {
      if (replicas[r].healthy) least = std::min(least, cost(r));
    }
    const double uncached = static_cast<double>(request.prompt_tokens) - best_saved_;
    const double slack_tokens = config_.gateway_spread_prefills * uncached;
    auto within = [&](std::size_t r) {
      return replicas[r].healthy &&
             cost(r) <= least + slack_tokens * replicas[r].prefill_seconds_per_token;
    };
    if (const auto r =
            turns_.due_this_round(replicas.size(), now, load_dominated_gaps_.seconds, within)) {
      return *r;
    }
    return turns_.least_recently_sent(replicas.size(), chosen, within);
  }

  // soonest_holder: among the healthy replicas holding the longest match, the least cost with
  // each one's wait for a place counted (load_ leaves it out when every batch is full); `chosen`
  // keeps ties. A batch its siblings filled in a burst ends in one, a sequence's lifetime away,
  // while another holder's next place may be milliseconds away.
  std::size_t soonest_holder(const RouteRequest& request, std::span<const ReplicaView> replicas,
                             std::size_t chosen) const {
    auto cost = [&](std::size_t r) {
      return load_[r] + miss_cost(request, replicas[r], r, /*seconds=*/true) +
             load_model_.admission_seconds(replicas[r]);
    };
    double best_cost = cost(chosen);
    for (std::size_t r = 0; r < replicas.size(); ++r) {
      if (r == chosen || !replicas[r].healthy || blocks_[r] != best_match_) continue;
      const double c = cost(r);
      if (c < best_cost) {
        chosen = r;
        best_cost = c;
      }
    }
    return chosen;
  }

  // copy_headroom: the idle replica with the most places (half its batch free, no prefill
  // queued: the copy's prefill delays no one there) when the healthy holders of the longest match
  // have, all together, at most copy_headroom places over the next kCopyWindowPrefills prefills
  // of this prompt (their free places and the sequences their reports say end by then), and fewer
  // than the prefix's siblings expected meanwhile (`interval`: the time between two of them);
  // `chosen` otherwise. A copy costs its prefill whenever it is made, but made once the holders
  // are full, the siblings arriving during its prefill can only wait behind it or for a full
  // batch's first end: that is the hot prefix's tail. The window is longer than the copy's own
  // prefill because a holder's ends come in steps of an admission interval: counted over one
  // prefill, a holder about to free a place looked full, and the copy was one too many.
  static constexpr double kCopyWindowPrefills = 5;
  std::size_t early_copy(const RouteRequest& request, std::span<const ReplicaView> replicas,
                         std::size_t chosen, double interval) const {
    if (!(interval > 0)) return chosen;  // the prefix's first sibling: no rate yet
    double holder_places = 0;
    for (std::size_t r = 0; r < replicas.size(); ++r) {
      const ReplicaView& v = replicas[r];
      if (!v.healthy || blocks_[r] != best_match_) continue;
      if (v.batch_slots == 0) return chosen;  // its places are unknown
      const double window = kCopyWindowPrefills * static_cast<double>(request.prompt_tokens) *
                            v.prefill_seconds_per_token;
      holder_places += std::max(0.0, free_places(v)) + ends_within(v, window);
      // Room for every sibling expected over the window (a prefix of a few requests a second
      // never needs a copy), or more than copy_headroom places: no copy yet.
      if (holder_places > std::min(config_.copy_headroom, window / interval)) return chosen;
    }
    return idle_replica(replicas).value_or(chosen);
  }

  // share_copy_siblings: from the prefix's share_copy_siblings-th sibling on, the idle replica
  // with the most places when the prefix draws more than its holders' share of the traffic:
  // healthy replicas x (its siblings / the gateway's requests since its first sibling) >=
  // holders + 1. A balanced fleet gives each prefix replicas in proportion to its traffic; made
  // as soon as the share is measured, a hot prefix's copies spread its load before its holders'
  // batches fill in a burst and then end in one (the wait copy_headroom's later copies leave).
  // Before that many siblings, `chosen`: a few arrivals are not a share (gateway/ROUTING.md, "A
  // new prefix's first siblings"), and a prefix of fewer requests never needs the copy.
  // `healthy`: the healthy replicas; `holders`: those of them holding the longest match.
  std::size_t share_copy(std::span<const ReplicaView> replicas, std::size_t chosen,
                         const PrefixRate& rate, std::size_t healthy, std::size_t holders) const {
    if (!(config_.share_copy_siblings > 0) ||
        static_cast<double>(rate.siblings) < config_.share_copy_siblings) {
      return chosen;
    }
    const double share = static_cast<double>(rate.siblings) /
                         static_cast<double>(arrivals_ - rate.arrivals_at_first);
    if (static_cast<double>(healthy) * share < static_cast<double>(holders + 1)) return chosen;
    return idle_replica(replicas).value_or(chosen);
  }

  // The idle replica with the most places (half its batch free, no prefill queued, no wait for
  // a place: a copy's prefill there delays no one), not holding the longest match; none when
  // some healthy replica does not announce its places.
  std::optional<std::size_t> idle_replica(std::span<const ReplicaView> replicas) const {
    std::optional<std::size_t> best;
    double best_free = 0;
    for (std::size_t r = 0; r < replicas.size(); ++r) {
      const ReplicaView& v = replicas[r];
      if (!v.healthy) continue;
      if (v.batch_slots == 0) return std::nullopt;  // its places are unknown
      if (blocks_[r] == best_match_) continue;
      const double free = free_places(v);
      if (!(free >= 0.5 * static_cast<double>(v.batch_slots)) || !(v.admission_wait_seconds == 0)) {
        continue;
      }
      if (best && !(free > best_free)) continue;
      // Read in seconds, as route() computed it: only a timed fleet makes copies.
      if (queued_seconds_[r] != 0) continue;
      best = r;
      best_free = free;
    }
    return best;
  }

  // This request counted among the siblings of the prefix whose longest match ends at the block
  // `key` names: their smoothed interval (0 for the first one) and count. The map is cleared when
  // it grows past kMaxPrefixRates, as a new prefix's first siblings only lose their rate for a
  // moment.
  static constexpr std::size_t kMaxPrefixRates = 1 << 16;
  PrefixRate sibling_rate(std::uint64_t key, Clock::time_point now) {
    if (prefix_rates_.size() >= kMaxPrefixRates) prefix_rates_.clear();
    auto [it, added] = prefix_rates_.try_emplace(key);
    PrefixRate& p = it->second;
    if (added) p.arrivals_at_first = arrivals_ - 1;
    p.gaps.add(now);
    ++p.siblings;
    return p;
  }

  // How many of a replica's running sequences end within `seconds`, by its report: the first at
  // next_end_seconds, then one each admission interval.
  static double ends_within(const ReplicaView& v, double seconds) {
    if (!(v.next_end_seconds > 0) || v.next_end_seconds > seconds) return 0;
    if (!(v.admission_interval_seconds > 0)) return 1;
    return 1 + std::floor((seconds - v.next_end_seconds) / v.admission_interval_seconds);
  }

  // The places left in a replica's batch: its places less the sequences running and waiting,
  // by the report or by what the gateway has in flight there, whichever is more.
  static double free_places(const ReplicaView& v) {
    return static_cast<double>(v.batch_slots) - decode_sequences(v);
  }

  // The recent prompts' lengths (a ring of the last kTailWindow) and their tail_quantile, sorted
  // again every kTailRefresh prompts.
  static constexpr std::size_t kTailWindow = 1024;
  static constexpr std::size_t kTailRefresh = 64;
  void record_prompt(std::size_t tokens) {
    if (!(config_.tail_quantile > 0)) return;
    if (prompts_.size() < kTailWindow) {
      prompts_.push_back(static_cast<double>(tokens));
    } else {
      prompts_[next_prompt_] = static_cast<double>(tokens);
      next_prompt_ = (next_prompt_ + 1) % kTailWindow;
    }
    if (++since_refresh_ >= kTailRefresh || prompts_.size() < kTailRefresh) {
      since_refresh_ = 0;
      sorted_ = prompts_;
      const auto k = static_cast<std::size_t>(
          std::ceil(config_.tail_quantile * static_cast<double>(sorted_.size())));
      const std::size_t i = std::min(sorted_.size() - 1, k == 0 ? 0 : k - 1);
      std::nth_element(sorted_.begin(), sorted_.begin() + static_cast<std::ptrdiff_t>(i),
                       sorted_.end());
      tail_tokens_ = sorted_[i];
    }
  }

  // What computing the request's uncached tokens on replica r costs. memory_aware: on a full KV
  // cache the new blocks evict as many cached tokens of other prefixes, recomputed later with
  // probability eviction_weight. How full: pressure = (kv usage - 1/2) / (1/2), clamped to
  // [0, 1], usage from the load report. A cache less than half full evicts nothing; the free
  // pages of a nearly full one are the running sequences' headroom, taken as they decode, not
  // room for a copy. A replica that reports no usage is taken as full, as every cache is once it
  // has served a while (a prefix cache keeps what it computed until it needs the room).
  double miss_cost(const RouteRequest& request, const ReplicaView& v, std::size_t r,
                   bool seconds) const {
    const double saved =
        saved_prefill_tokens(request, blocks_[r], offloaded_[r], config_.offload_hit_weight);
    double tokens = static_cast<double>(request.prompt_tokens) - saved +
                    duplicate_weight_ * std::max(0.0, best_saved_ - saved);
    if (config_.memory_aware) {
      const double usage = v.kv_pages_total == 0
                               ? 1.0
                               : std::min(1.0, static_cast<double>(v.kv_pages_used) /
                                                   static_cast<double>(v.kv_pages_total));
      const double pressure = std::clamp(2.0 * usage - 1.0, 0.0, 1.0);
      tokens *= 1.0 + config_.eviction_weight * pressure;
    }
    return seconds ? tokens * v.prefill_seconds_per_token : tokens;
  }

  // churn(r): replica r's eviction rate over the healthy mean; 1 without memory_aware.
  double churn(std::size_t r) const { return config_.memory_aware ? churn_.relative(r) : 1.0; }

  RouteDecision decision(const RouteRequest& request, std::size_t r, RouteReason reason) const {
    return {static_cast<ReplicaId>(r), reason, cached_tokens(request, blocks_[r])};
  }

  CacheAwareConfig config_;
  CacheAwareLoad load_model_{config_};  // its queues, waits and places, at the decision's time
  // gateway_spread_prefills: this gateway's requests whose longest match saves little, the last
  // one's time and the smoothed interval between two of them (0 before the second).
  SmoothedInterval load_dominated_gaps_;
  // peered: the smoothed interval between two sends of any gateway (0 before the second).
  SmoothedInterval send_gaps_;
  Clock::time_point now_{};             // this decision's time
  std::vector<std::size_t> blocks_;     // scratch, reused between calls
  std::vector<std::size_t> offloaded_;  // scratch
  std::vector<double> load_;            // scratch
  std::vector<double> queued_seconds_;  // scratch: each replica's queued prefill, when timed
  std::vector<double> footprint_;       // scratch
  bool seconds_ = false;                // this decision's cost is in seconds
  // near_tie_prefills, gateway_spread_prefills: whose turn it is. Mutable: choosing a near tie
  // in turn (a const query of the costs) moves its cursor.
  mutable SendTurns turns_;
  EvictionChurn churn_;
  double best_saved_ = 0;        // the most prefill any healthy replica saves this request
  double duplicate_weight_ = 0;  // this request's charge for a duplicate prefill
  std::size_t best_match_ = 0;   // this request's longest match on a healthy replica, in blocks
  std::vector<double> prompts_;  // tail_quantile: the recent prompts' lengths, a ring
  std::vector<double> sorted_;   // scratch
  std::size_t next_prompt_ = 0;
  std::size_t since_refresh_ = 0;
  double tail_tokens_ = 0;                                      // tail_quantile of prompts_
  std::unordered_map<std::uint64_t, PrefixRate> prefix_rates_;  // by prefix
  std::size_t arrivals_ = 0;  // requests routed (share_copy_siblings: a prefix's share)
};

}  // namespace

std::unique_ptr<RoutingPolicy> make_cache_aware(const CacheAwareConfig& config,
                                                std::uint64_t seed) {
  return std::make_unique<CacheAware>(config, seed);
}

}  // namespace prefixgate::gateway::routing
