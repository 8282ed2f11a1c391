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
//     - with memory_aware off (the earlier rule), a replica whose load exceeds
//       `overload_factor` x the mean (plus a floor) is not chosen for affinity, which sends a
//       hot prefix to a second replica and keeps one loaded replica from turning affinity off
//       for everyone else;
//     - memory_aware (default): no overload rule; a miss also costs what its copy evicts
//       (eviction_weight x its tokens, once the replica's KV is more than half full), so a
//       prefix moves only when
//       waiting for its replica costs more than recomputing it and evicting someone else's;
//     - never an unhealthy replica; an idle replica beats a queueing one when the saved prefill
//       is smaller than the queue.
//   Every parameter is in CacheAwareConfig, documented there.
//   sglang_cache_aware, dynamo_kv   the routers users would otherwise run, rebuilt from their
//                     documentation and parameters as baselines (gateway/ROUTING.md cites them):
//     sglang_cache_aware: SGLang's router. An approximate prefix tree per replica of what it
//       routed there (no events); the longest match wins when it covers more than
//       cache_threshold of the prompt, else the replica with the smallest tree; shortest queue
//       (in-flight requests) whenever the fleet is imbalanced.
//     dynamo_kv: NVIDIA Dynamo's KV router. cost = overlap_score_weight x prefill blocks +
//       decode blocks, lowest wins; the overlap comes from the engines' events, the prefill and
//       decode blocks from the router's own record of what it routed and what is still running.
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
  // What the queue counts leave out: a replica computes its queued prefill as time passes. When
  // the last load report was applied, the prefill it showed beyond what this gateway then had
  // in flight there (other clients' requests, or prefill done while the report was on its way),
  // and when the prefill this gateway has sent is predicted done at prefill_seconds_per_token.
  // cache_aware's prefill_drain reads them; replica_load.h keeps them.
  Clock::time_point report_at{};
  std::size_t report_beyond_own_tokens = 0;
  Clock::time_point own_prefill_until{};
  // The replica's speed, from its configuration or its engine's profile; 0 when unknown. With
  // both set on every healthy replica, cache_aware's cost is in seconds (predicted time to first
  // token) instead of prefill tokens, so a fleet that mixes devices is compared fairly.
  double prefill_seconds_per_token = 0;    // one uncached prompt token's prefill
  double decode_seconds_per_sequence = 0;  // what one more running sequence adds to a step
  // From the load reports too: how long a request arriving now would wait for the engine to
  // admit it (a full batch waits for running sequences to end); 0 when it would start at once
  // or the engine does not say.
  double admission_wait_seconds = 0;
  // The engine's batch places and the seconds between two of its running sequences ending (0:
  // not announced): each request the gateway sends past a full batch waits one interval more.
  std::size_t batch_slots = 0;
  double admission_interval_seconds = 0;
  // The seconds until the engine's first running sequence ends (0: not announced): the wait of
  // the first request past a full batch, one interval in steady state, a whole sequence's
  // lifetime when the batch filled in a burst.
  double next_end_seconds = 0;
};

struct RouteRequest {
  std::span<const std::uint64_t> block_hashes;  // the prompt's chained block hashes
  std::size_t prompt_tokens = 0;
  std::size_t block_size = 16;
  std::string_view session_key;  // consistent_hash: header, `user` or API key; may be empty
};

enum class RouteReason {
  kCacheHit,      // cache_aware: the cheapest replica holds part of the prefix
  kColdAffinity,  // cache_aware: cold prefix, the smallest footprint (ties: its first blocks' hash)
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
  // Set by route() of a policy that tracks the requests it routed (dynamo_kv), naming the request
  // to its on_routed/on_finished; 0 for the others.
  std::uint64_t ticket = 0;
  // Set by the gateway when it shares its sends with peer gateways (peer_sends.h): the name its
  // peers know the request by; 0 otherwise.
  std::uint64_t flight = 0;
  // What record_routed returned: where the request's predictions on its replica began (the
  // leading blocks held confirmed, PrefixIndex::predict), for record_prefilled to settle from.
  std::size_t predicted_from = PrefixIndex::kPredictedFromUnknown;
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
  // Memory-aware placement (the default). A miss costs its prefill plus, on a replica whose KV
  // cache is full, the prefill of what its new blocks evict, which will be recomputed with the
  // probability eviction_weight (the expected reuse of a cached block); a replica holding the
  // prefix is given up only when its expected wait exceeds that cost elsewhere, never because its
  // load is above a multiple of the fleet mean. false: the earlier rule (overload_factor x mean
  // + overload_floor_tokens), kept to measure one against the other.
  bool memory_aware = true;
  double eviction_weight = 1.0;
  // A miss on a replica that holds less of the prompt than the best holder computes again what
  // the fleet already holds: that duplicate prefill delays every request queued behind it there
  // and takes capacity from the whole fleet, not only this request's first token. It is charged
  // duplicate_weight x the tokens the best holder would not recompute.
  double duplicate_weight = 1.0;
  // The duplicate's charge is queue_duplicate_factor x duplicate_weight when some best holder
  // has a place in its batch (it announces batch_slots and reports no wait for one): what a copy
  // would skip there is a prefill queue, which that replica drains at its prefill rate within
  // milliseconds, so the copy buys its request little and costs the fleet a whole prefill. When
  // every best holder's batch is full (or KV memory keeps its requests waiting) the charge is
  // duplicate_weight alone: a hot prefix then needs copies to be served at all. 1: the same charge
  // either way.
  double queue_duplicate_factor = 4.0;
  // The first request sent past a batch's places since a report that showed a place waits for
  // the first running sequence to end. false: one admission interval (the steady state, where
  // sequences end one by one). true: next_end_seconds when the replica reports it (a batch
  // filled in a burst, a hot prefix's holder filled by its siblings, ends in one, a whole
  // sequence's lifetime away).
  bool cohort_wait = false;
  // The first request sent past a batch's places since a report that showed a place waits
  // next_end_seconds, the time the report gives until its first running sequence ends, where the
  // replica reports it, instead of one admission interval (the steady state's mean: the next end
  // may be nearer, or, in a batch filled in a burst, further). false: one interval. cohort_wait
  // takes the larger of the two.
  bool next_end_wait = true;
  // With every healthy batch full (no replica would admit at once) the wait for a place is left
  // out of the cost, and the cache decides; the request then goes, among the replicas holding its
  // longest match, to the one with the least cost counting each one's wait for a place: a choice
  // between holders costs no prefill, and a batch filled in a burst waits a sequence's lifetime
  // where another holder's next place is milliseconds away. false: the least cost alone. Not
  // applied with memory_aware false (the earlier rule).
  bool soonest_holder = true;
  // With one gateway, the prefill queued on a replica drains at its prefill rate: what this
  // gateway sent there, less what the replica has computed of it since (in order, from each
  // request's send), plus what the last load report showed beyond that, less what the replica
  // has computed since the report arrived. The counts alone say how long the queue was, not how
  // much of it is left: a replica about to finish a long prefill looked as busy as one that had
  // just started it (a report is also as old as its way to the gateway), and new requests queued
  // behind it while another replica was about to be free. false, or several gateways (each sees
  // only its own requests; an estimate that drains makes a replica look free to all of them at
  // once): the larger of the report's count and the gateway's own in-flight count. Needs the
  // cost in seconds.
  bool prefill_drain = true;
  // Near ties go in turn: where the cache saves a request at most near_tie_max_saved of its
  // prompt, the replicas whose cost is within near_tie_prefills x its own prefill (at the
  // cheapest one's rate) of the least are taken as equal, and the one this gateway sent to least
  // recently gets it. A replica's load is known to about one prefill (an engine packs a queued
  // prompt's chunks into the step of the one before it, slowing that one; a step in progress
  // delays the next; a report is late), and the least of estimates that are all that uncertain
  // is the one likeliest to be wrong: prompts the cache cannot place kept landing on a replica
  // that had just received one, where a rotation spaces them out. Requests the cache saves more
  // of are decided by the cost alone. 0: off. Needs the cost in seconds; one gateway only
  // (behind several, each gateway's turn would count only its own share of the traffic:
  // gateway_spread_prefills spreads there).
  double near_tie_prefills = 0.5;
  double near_tie_max_saved = 0.1;
  // A copy made before its holders fill: when the replicas holding the request's longest match
  // have, all together, at most this many places over the next five prefills of its prompt (the
  // places free in their batches, counting what the gateway sent since their reports, plus the
  // sequences their reports say end by then), and fewer than the siblings of that prefix expected
  // meanwhile (from the gateway's own recent ones), the request goes to an idle replica (half its
  // batch free, no prefill queued) instead. A copy costs its prefill whenever it is made; made
  // while the holders still have places, the siblings that arrive during its prefill still find
  // one, where a copy made once they are full leaves them to wait behind it or for a full batch's
  // first end. 0: off (a copy only when the cost says). Needs batch_slots (prefixgate-engine) and
  // the cost in seconds; not applied with memory_aware false (the earlier rule).
  double copy_headroom = 6;
  // A hot prefix's copies made as soon as its share of the traffic is measured: from the
  // share_copy_siblings-th request whose longest match ends at the same block (its siblings, as
  // this gateway routes them), a request that would stay on a holder goes to an idle replica
  // (half its batch free, no prefill queued) when healthy replicas x the prefix's share of the
  // gateway's requests since its first sibling >= holders + 1. Each prefix then holds replicas in
  // proportion to its traffic before its holders' batches fill: a batch filled in a burst ends
  // in one, and the siblings that arrive meanwhile wait. 0: off (copies only by the cost and
  // copy_headroom). Needs batch_slots and the cost in seconds; not applied with memory_aware
  // false (the earlier rule).
  double share_copy_siblings = 32;
  // A request stays on the cheapest replica holding its longest match while its predicted time
  // to first token there is at most the prefill of a prompt at this quantile of the recent
  // prompts' lengths (the last 1,024 routed), at that replica's rate: a wait that keeps a request
  // under the time a long prompt takes on its own leaves it out of the tail, and the hit it keeps
  // is the fleet's. Past that budget the cost decides as before. With several gateways the
  // holder's queue is taken as at least `gateways` x this gateway's own uncached tokens in flight
  // there. 0: off (the cost alone). Not applied with memory_aware false (the earlier rule).
  double tail_quantile = 0.99;
  // Where a cold prefix goes. false (the default): the replica holding the fewest blocks (its
  // events) plus uncached prompt blocks in flight, ties to the rendezvous hash of the first
  // affinity_blocks blocks. true: that rendezvous hash over the replicas whose load is at most
  // bounded_load_factor x the mean (the earlier rule, kept to measure one against the other).
  bool cold_rendezvous = false;
  // When every healthy replica's ReplicaView carries its speed (prefill_seconds_per_token and
  // decode_seconds_per_sequence), the cost is the predicted time to first token in seconds:
  // queued and uncached prefill at the replica's own rate, plus its running sequences at its own
  // step cost. Otherwise (or false) the cost stays in prefill-token equivalents.
  bool cost_in_seconds = true;
  // How many gateways share the fleet, requests sprayed over them at random (a plain load
  // balancer in front), each with its own predictions and in-flight counts. Until the engines'
  // events show a new prefix, only the gateway that placed it knows where it went, and every
  // gateway sees the same footprints from the events: placed by the smallest footprint alone,
  // the new prefixes of all of them pile onto the same replica, and their queued prefill then
  // spills the siblings that follow. With gateways > 1 a cold prefix goes to the rendezvous
  // winner of its first blocks among the replicas within (gateways - 1) prompts' worth of blocks
  // of the smallest footprint: different prefixes spread over them, and every gateway sends a
  // prefix's siblings to the same one. 1 (a single gateway): the smallest footprint, as always.
  std::size_t gateways = 1;
  // With gateways > 1, a spill must save its request more than what the other gateways may have
  // sent its destination since that replica's last report, which this gateway cannot see: the
  // cheapest replica holding the longest match keeps the request while its cost exceeds the
  // destination's by at most (gateways - 1) x this prompt's prefill, capped at this many prefills
  // of a prompt at tail_quantile (so the hit is never bought with a wait past a few long
  // prompts'). The destination of a spill is the replica that looks cheapest, so it is the one
  // whose view is likeliest to miss others' sends. 0: off. Needs tail_quantile > 0 (the cap) and
  // memory_aware; with one gateway it does nothing.
  double gateway_spill_slack = 2.0;
  // With gateways > 1, a request the cache barely helps (its longest match saves at most 5 % of
  // its prompt, as a template start that every replica holds does) is spread instead of sent to
  // the least cost: every gateway sees the same reports and only its own sends, so all of them
  // would pick the same replica that looks least loaded. The replicas whose cost is within this
  // many of the request's uncached prefills of the least are taken as equal, and the one this
  // gateway sent to least recently gets it: each gateway's rotation spaces its own requests out,
  // and the gateways' rotations together spread them about as evenly as one rotation, while a
  // replica that is truly busier stays out of the turn. Only while such requests come often
  // enough to herd: the other gateways are expected to route at least one more during its
  // prefill (this gateway's smoothed interval between them, times gateways - 1, within that
  // prefill). 0: off (the least cost, the earlier rule). With one gateway it does nothing
  // (near_tie_prefills applies there).
  double gateway_spread_prefills = 1.0;
  // Set by the deployment, not a tuning knob: this gateway shares its sends with peer gateways
  // (prefixgate's peers:, peer_sends.h) and applies theirs, a moment after they happen. It then
  // routes as a single gateway would (`gateways` is taken as 1), but for near ties: every peer
  // sees the same sends, so near_tie_prefills' least recently sent replica is the same at every
  // gateway, and requests that reach several gateways within the moment their sends take to
  // arrive all go there. With peer_turns, near ties go first to a replica that no gateway has
  // sent to for a round (the replicas within the window x the smoothed interval between all the
  // gateways' sends), in this gateway's own order, as gateway_spread_prefills does; otherwise to
  // the least recently sent. false: the least recently sent, as one gateway.
  bool peered = false;
  bool peer_turns = true;
  // Set by the deployment with `peered`: how late a peer's send arrives (the gateway's flush
  // interval plus a network hop). peer_turns applies only while the gateways' sends come less
  // than 100 of these apart: rarer, two requests seldom meet within the delay, and the least
  // recently sent keeps the rotation even.
  double peer_delay_seconds = 0.0002;
};

// sglang_cache_aware: SGLang router's cache_aware policy (sgl-router, policies/cache_aware.rs),
// with its defaults. Its tree holds routed text; ours holds the routed prompt's block hashes, so
// sizes are in blocks rather than characters.
struct SglangCacheAwareConfig {
  // The longest match is used when it covers more than this share of the prompt.
  double cache_threshold = 0.3;
  // The fleet is imbalanced when max - min in-flight requests > balance_abs_threshold and
  // max > min x balance_rel_threshold; then the replica with the fewest in flight wins.
  std::size_t balance_abs_threshold = 64;
  double balance_rel_threshold = 1.5;
  // Per-replica tree bound, least recently routed blocks evicted first. SGLang bounds each tree
  // at 2^26 characters (max_tree_size); at about 4 characters per token and 16 tokens per
  // block that is 2^20 blocks.
  std::size_t max_tree_blocks = std::size_t{1} << 20;
};

// dynamo_kv: Dynamo KV router's cost (lib/llm/src/kv_router and
// docs/architecture/kv_cache_routing.md).
struct DynamoKvConfig {
  // cost(r) = overlap_score_weight x prefill_blocks(r) + decode_blocks(r); Dynamo's default.
  double overlap_score_weight = 1.0;
  // 0: the lowest cost wins (ties at random). > 0: softmax sampling of the negated costs,
  // normalized by their range, at this temperature (router_temperature).
  double temperature = 0.0;
};

struct PolicyConfig {
  CacheAwareConfig cache_aware;
  SglangCacheAwareConfig sglang;
  DynamoKvConfig dynamo;
  std::uint64_t seed = 0;  // random, power_of_two, dynamo_kv's tie-breaks and sampling
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
  // The request `decision` chose for was sent (not a dry run): a policy that keeps its own
  // record of what it routed (sglang_cache_aware's trees, dynamo_kv's active blocks) adds it.
  virtual void on_routed(const RouteRequest& request, const RouteDecision& decision,
                         Clock::time_point now) {
    (void)request, (void)decision, (void)now;
  }
  // That request ended (finished, failed or abandoned), whatever its replica did with it.
  virtual void on_finished(const RouteDecision& decision) { (void)decision; }
};

// "round_robin", "random", "least_load", "power_of_two", "consistent_hash", "cache_aware",
// "sglang_cache_aware", "dynamo_kv". "cache_aware:key=value[:key=value]" overrides cache_aware
// parameters of `config` (memory_aware, cost_in_seconds, cold_rendezvous, cohort_wait,
// eviction_weight, duplicate_weight, queue_duplicate_factor, overload_factor, decode_weight,
// copy_headroom, share_copy_siblings, gateways, gateway_spill_slack, near_tie_prefills,
// near_tie_max_saved, peer_turns), so variants run side by
// side (`prefixgate-bench compare --policies cache_aware,cache_aware:memory_aware=false`).
// kInvalidValue for an unknown name or option, or an out-of-range config field (param names it).
Result<std::unique_ptr<RoutingPolicy>> make_policy(std::string_view name,
                                                   const PolicyConfig& config = {});

}  // namespace prefixgate::gateway
