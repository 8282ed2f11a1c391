// cache_aware's choice among the replicas holding a prompt's longest match when every batch is
// full (gateway/ROUTING.md, "A full fleet: the holder whose place comes soonest"), the copy of a
// hot prefix made before its holders run out of places ("A copy before the holders fill") and as
// soon as its share of the traffic is known ("Holders in proportion to a prefix's traffic"), and
// a new prefix's first siblings, which wait for its first prefill on its holder ("A new prefix's
// first siblings (tried, not kept)").
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string_view>
#include <vector>

#include "gateway/fleet_sim.h"
#include "gateway/routing_fixtures.h"
#include "prefixgate/gateway/replica_load.h"
#include "prefixgate/gateway/routing.h"

namespace prefixgate::gateway {
namespace {

// Whether `seq` goes round `members` in turn: its first members.size() entries are each of them
// once, and every later entry repeats the one members.size() before it.
bool goes_in_turn(const std::vector<ReplicaId>& seq, std::vector<ReplicaId> members) {
  if (seq.size() < members.size()) return false;
  std::vector<ReplicaId> first(seq.begin(),
                               seq.begin() + static_cast<std::ptrdiff_t>(members.size()));
  std::sort(first.begin(), first.end());
  std::sort(members.begin(), members.end());
  if (first != members) return false;
  for (std::size_t i = members.size(); i < seq.size(); ++i) {
    if (seq[i] != seq[i - members.size()]) return false;
  }
  return true;
}

using testing::policy;
using testing::prompt_hashes;
using testing::request_for;

// Three (or `replicas`) replicas that announce their speed and their batch, each batch full (64
// running, none sent since the report): no replica would admit at once, so the wait for a place
// is left out of the cost between replicas.
std::vector<ReplicaView> full_fleet(std::size_t replicas = 3) {
  std::vector<ReplicaView> views(replicas);
  for (std::size_t r = 0; r < views.size(); ++r) {
    ReplicaView& v = views[r];
    v.id = static_cast<ReplicaId>(r);
    v.prefill_seconds_per_token = 3e-5;
    v.decode_seconds_per_sequence = 1e-4;
    v.kv_pages_total = 1000;
    v.batch_slots = 64;
    v.running = 64;
    v.inflight_requests = 64;
    v.admission_interval_seconds = 0.06;
  }
  return views;
}

// A hot prefix held by replicas 0 and 1. Replica 0's batch was filled in a burst by the prefix's
// siblings and ends in one, 2 s away; replica 1 has 200 tokens of prefill queued (6 ms) and its
// next sequence ends in 10 ms. Without the wait replica 0 is the cheaper holder, and the request
// would wait 2 s there for a place. Replica 2, whose place is nearer still, holds nothing: a
// copy there is not what the rule is for, so the hit stays on a holder.
TEST(CacheAwareTest, AFullFleetSendsAHitToTheHolderWhosePlaceComesSoonest) {
  PrefixIndex index;
  for (int r = 0; r < 3; ++r) index.add_replica({});
  const auto h = prompt_hashes(7, 128);  // 2,048 tokens
  for (std::uint64_t b : h) {
    index.apply_stored(0, b);
    index.apply_stored(1, b);
  }
  auto views = full_fleet();
  views[0].next_end_seconds = 2.0;
  views[1].next_end_seconds = 0.01;
  views[1].tokens_queued_for_prefill = 200;
  views[2].next_end_seconds = 0.001;

  RouteDecision d = policy("cache_aware")->route(request_for(h), views, index, {});
  EXPECT_EQ(d.replica, 1U);
  EXPECT_EQ(d.reason, RouteReason::kCacheHit);
  EXPECT_EQ(d.predicted_cached_tokens, 2048U);
  // The rule before: the least cost with the wait left out, the holder with the shorter queue.
  d = policy("cache_aware:soonest_holder=false")->route(request_for(h), views, index, {});
  EXPECT_EQ(d.replica, 0U);
  EXPECT_EQ(d.reason, RouteReason::kCacheHit);

  // Requests sent to replica 1 since its report queue past its batch, an admission interval
  // each: after 40 of them (2.4 s) replica 0's end, 2 s away, is the sooner place.
  views[1].inflight_requests = 104;
  EXPECT_EQ(policy("cache_aware")->route(request_for(h), views, index, {}).replica, 0U);

  // With a place free somewhere the wait is in every replica's cost already, and the rule does
  // not apply: replica 2 has room, replica 1 keeps the hit as the cheapest holder.
  views[1].inflight_requests = 64;
  views[2].running = 10;
  views[2].inflight_requests = 10;
  EXPECT_EQ(policy("cache_aware")->route(request_for(h), views, index, {}).replica, 1U);
  EXPECT_FALSE(make_policy("cache_aware:soonest_holder=maybe").ok());
}

// A hot prefix on replica 0, whose batch its siblings filled in a burst: 4 places left, its first
// sequence ending 2 s away. Replica 1 is idle; replica 2 holds nothing and has 24 places (less
// than half its batch: not idle).
struct HotHolder {
  HotHolder() {
    for (int r = 0; r < 3; ++r) index.add_replica({});
    for (std::size_t b = 0; b < 128; ++b) index.apply_stored(0, first[b]);
    views = full_fleet();
    views[0].running = views[0].inflight_requests = 60;
    views[0].next_end_seconds = 2.0;
    views[1].running = views[1].inflight_requests = 0;
    views[2].running = views[2].inflight_requests = 40;
    views[2].next_end_seconds = 0.5;
  }
  // Two siblings of the prefix (2,048 tokens shared, 128 their own), `gap` apart, routed by a
  // new `name` policy: where the second goes.
  RouteDecision second_sibling(std::string_view name, std::chrono::milliseconds gap) const {
    auto p = policy(name);
    p->route(request_for(first), views, index, {});
    return p->route(request_for(second), views, index, Clock::time_point{} + gap);
  }
  const std::vector<std::uint64_t> first = prompt_hashes(7, 128, 1, 8);
  const std::vector<std::uint64_t> second = prompt_hashes(7, 128, 2, 8);
  PrefixIndex index;
  std::vector<ReplicaView> views;
};

// Siblings 20 ms apart: over five prefills of the prompt (0.33 s) about 16 of them come, and the
// holder has 4 places and no end in that time. The copy goes to the idle replica now, while the
// siblings arriving during its prefill still find a place on the holder; without the rule the
// request stays, and the copy waits until the batch is full.
TEST(CacheAwareTest, AHotPrefixIsCopiedToAnIdleReplicaBeforeItsHolderFills) {
  HotHolder fleet;
  using std::chrono::milliseconds;
  RouteDecision d = fleet.second_sibling("cache_aware", milliseconds(20));
  EXPECT_EQ(d.replica, 1U);
  EXPECT_EQ(d.reason, RouteReason::kLoadSpill);
  EXPECT_EQ(d.predicted_cached_tokens, 0U);
  d = fleet.second_sibling("cache_aware:copy_headroom=0", milliseconds(20));
  EXPECT_EQ(d.replica, 0U);
  EXPECT_EQ(d.reason, RouteReason::kCacheHit);

  // A prefix whose siblings come a second apart: the holder's 4 places outlast the window.
  EXPECT_EQ(fleet.second_sibling("cache_aware", milliseconds(1000)).replica, 0U);
  // More places than copy_headroom (8 left), or sequences ending within the window (the first in
  // 10 ms, then one each 60 ms: 6 more places), and the holder keeps the request.
  fleet.views[0].running = fleet.views[0].inflight_requests = 56;
  EXPECT_EQ(fleet.second_sibling("cache_aware", milliseconds(20)).replica, 0U);
  fleet.views[0].running = fleet.views[0].inflight_requests = 60;
  fleet.views[0].next_end_seconds = 0.01;
  EXPECT_EQ(fleet.second_sibling("cache_aware", milliseconds(20)).replica, 0U);
  // No idle replica: the request stays.
  fleet.views[0].next_end_seconds = 2.0;
  fleet.views[1].running = fleet.views[1].inflight_requests = 40;
  EXPECT_EQ(fleet.second_sibling("cache_aware", milliseconds(20)).replica, 0U);
  // Nor is an empty batch with a prompt's prefill still queued (4,096 tokens, 123 ms, of which
  // 20 ms have drained since its report): the copy would wait behind it.
  fleet.views[1].running = fleet.views[1].inflight_requests = 0;
  fleet.views[1].tokens_queued_for_prefill = fleet.views[1].report_beyond_own_tokens = 4096;
  EXPECT_EQ(fleet.second_sibling("cache_aware", milliseconds(20)).replica, 0U);
  fleet.views[1].tokens_queued_for_prefill = fleet.views[1].report_beyond_own_tokens = 0;
  EXPECT_EQ(fleet.second_sibling("cache_aware", milliseconds(20)).replica, 1U);
  EXPECT_FALSE(make_policy("cache_aware:copy_headroom=-1").ok());
}

// A new prefix and four of its siblings, 10 ms apart, on an idle fleet: each sibling arrives
// while the prefix's first prefill (2,048 tokens, about 60 ms) is still queued on its holder and
// waits for it there, about as long as a copy would take on an idle replica. Copying on that
// evidence was measured and not kept: a few close arrivals are what a cold prefix's siblings
// show by chance, and each such copy is a miss that shared prefix never needed (up to 1.3 points
// of hit rate at 64 replicas); the copies of a hot prefix wait until its holders run short of
// places (copy_headroom).
TEST(CacheAwareTest, ANewPrefixsSiblingsWaitForItsFirstPrefillOnItsHolder) {
  PrefixIndex index;
  for (int r = 0; r < 3; ++r) index.add_replica({});
  std::vector<ReplicaView> views = full_fleet();
  for (ReplicaView& v : views) v.running = v.inflight_requests = 0;
  auto p = policy("cache_aware");
  std::vector<std::vector<std::uint64_t>> prompts;
  for (std::uint64_t question = 0; question < 5; ++question) {
    prompts.push_back(prompt_hashes(7, 128, question, 8));
  }
  const Clock::time_point start{};
  auto route = [&](std::size_t i) {
    const Clock::time_point now = start + std::chrono::milliseconds(10 * i);
    const RouteRequest request = request_for(prompts[i]);
    const RouteDecision d = p->route(request, views, index, now);
    record_routed(index, *p, views[d.replica], request, d, now);
    return d;
  };
  const RouteDecision cold = route(0);
  ASSERT_EQ(cold.reason, RouteReason::kColdAffinity);
  for (std::size_t i = 1; i < prompts.size(); ++i) {
    const RouteDecision d = route(i);
    EXPECT_EQ(d.replica, cold.replica) << "sibling " << i;
    EXPECT_EQ(d.reason, RouteReason::kCacheHit) << "sibling " << i;
    EXPECT_EQ(d.predicted_cached_tokens, 2048U) << "sibling " << i;
  }
  // The holder's queue is the prefix and four questions; the other replicas stayed idle.
  EXPECT_EQ(views[cold.replica].inflight_requests, 5U);
  EXPECT_EQ(views[cold.replica].inflight_prompt_tokens, 2176U + 4 * 128U);
  for (const ReplicaView& v : views) {
    if (v.id != cold.replica) {
      EXPECT_EQ(v.inflight_requests, 0U);
    }
  }
}

// Two replicas hold a prompt's prefix, with room in their batches. The gateway sent replica 0
// 3,000 tokens of prefill 80 ms ago (10 ms of it left at 3e-5 s a token: 333 tokens) and
// replica 1 1,000 tokens just now (all of them left). prefill_drain (one gateway) sends the hit
// to replica 0, whose queue is nearly done; the counts alone, or several gateways, to replica 1.
RouteDecision hit_between_draining_queues(std::string_view name, bool from_report = false) {
  PrefixIndex index;
  for (int r = 0; r < 2; ++r) index.add_replica({});
  std::vector<ReplicaView> views = full_fleet();
  views.resize(2);
  const Clock::time_point now = Clock::time_point{} + std::chrono::seconds(10);
  const auto ms = [](int n) { return std::chrono::milliseconds(n); };
  for (ReplicaView& v : views) {
    v.running = v.inflight_requests = 0;
    v.report_at = now - ms(80);
  }
  if (from_report) {
    // The same 3,000 tokens, shown by a report that arrived 80 ms ago (another client's).
    views[0].tokens_queued_for_prefill = views[0].report_beyond_own_tokens = 3000;
  } else {
    views[0].inflight_prompt_tokens = 3000;
    views[0].own_prefill_until = now + ms(10);
  }
  views[1].inflight_prompt_tokens = 1000;
  views[1].own_prefill_until = now + ms(30);
  const auto held = prompt_hashes(7, 128, 0, 8);
  index.predict(0, held, now);
  index.predict(1, held, now);
  auto p = policy(name);
  return p->route(request_for(prompt_hashes(7, 128, 1, 8)), views, index, now);
}

TEST(CacheAwareTest, AHitGoesToTheHolderWhoseQueuedPrefillIsNearlyDone) {
  EXPECT_EQ(hit_between_draining_queues("cache_aware").replica, 0U);
  EXPECT_EQ(hit_between_draining_queues("cache_aware", /*from_report=*/true).replica, 0U);
  EXPECT_EQ(hit_between_draining_queues("cache_aware:prefill_drain=false").replica, 1U);
  EXPECT_EQ(hit_between_draining_queues("cache_aware:prefill_drain=false", true).replica, 1U);
  EXPECT_EQ(hit_between_draining_queues("cache_aware:gateways=2").replica, 1U);
  const RouteDecision d = hit_between_draining_queues("cache_aware");
  EXPECT_EQ(d.reason, RouteReason::kCacheHit);
  EXPECT_FALSE(make_policy("cache_aware:prefill_drain=maybe").ok());
}

// A prefix held by the first `holders` replicas (10 sequences running each: places to spare, so
// copy_headroom waits) on a fleet of four whose other replicas are idle. Its siblings come
// between requests for other, unrelated prompts (`others` of them per sibling): with one in two,
// the prefix draws half the traffic, two replicas' worth, and from one holder its 32nd sibling
// (share_copy_siblings) goes to an idle replica as a copy; the 31 before it stay on the holder.
// With three in four it draws one replica's worth, which its holder gives it.
RouteDecision sibling_after(std::string_view name, std::size_t siblings, std::size_t others,
                            std::size_t holders = 1) {
  PrefixIndex index;
  for (int r = 0; r < 4; ++r) index.add_replica({});
  const auto prefix = prompt_hashes(7, 128);
  for (std::size_t r = 0; r < holders; ++r) {
    for (std::uint64_t b : prefix) index.apply_stored(static_cast<ReplicaId>(r), b);
  }
  std::vector<ReplicaView> views = full_fleet();
  views.push_back(views.back());
  for (std::size_t r = 0; r < views.size(); ++r) {
    views[r].id = static_cast<ReplicaId>(r);
    views[r].running = views[r].inflight_requests = r < holders ? 10 : 0;
  }
  auto p = policy(name);
  Clock::time_point now{};
  RouteDecision d;
  std::uint64_t other = 1000;
  for (std::size_t i = 1; i <= siblings; ++i) {
    for (std::size_t k = 0; k < others; ++k) {
      now += std::chrono::milliseconds(10);
      const auto cold = prompt_hashes(other++, 136);
      p->route(request_for(cold), views, index, now);
    }
    now += std::chrono::milliseconds(10);
    const auto sibling = prompt_hashes(7, 128, i, 8);
    d = p->route(request_for(sibling), views, index, now);
    if (i < siblings) {
      EXPECT_LT(d.replica, holders) << "sibling " << i;
    }
  }
  return d;
}

TEST(CacheAwareTest, AHotPrefixGetsHoldersInProportionToItsShareOfTheTraffic) {
  RouteDecision d = sibling_after("cache_aware", 32, 1);
  EXPECT_EQ(d.replica, 1U);  // idle, all places free: the first of the equals
  EXPECT_EQ(d.reason, RouteReason::kLoadSpill);
  EXPECT_EQ(d.predicted_cached_tokens, 0U);
  // Before its 32nd sibling the share is not taken as known.
  EXPECT_EQ(sibling_after("cache_aware", 31, 1).replica, 0U);
  // One replica's worth of the traffic: the holder it has.
  EXPECT_EQ(sibling_after("cache_aware", 32, 3).replica, 0U);
  // Two holders: half the traffic is theirs already; all of it wants a third.
  d = sibling_after("cache_aware", 32, 1, 2);
  EXPECT_LT(d.replica, 2U);
  EXPECT_EQ(d.reason, RouteReason::kCacheHit);
  d = sibling_after("cache_aware", 32, 0, 2);
  EXPECT_EQ(d.replica, 2U);
  EXPECT_EQ(d.reason, RouteReason::kLoadSpill);
  // Three holders of a prefix that is all the traffic: four replicas' worth, the last one too.
  EXPECT_EQ(sibling_after("cache_aware", 32, 0, 3).replica, 3U);
  // The rule off: the holder keeps it.
  d = sibling_after("cache_aware:share_copy_siblings=0", 32, 1);
  EXPECT_EQ(d.replica, 0U);
  EXPECT_EQ(d.reason, RouteReason::kCacheHit);
  EXPECT_FALSE(make_policy("cache_aware:share_copy_siblings=-1").ok());
}

// Four replicas that announce their speed and have places, a running sequence apart (0.1 ms of
// a step each, well within half a 1,024-token prefill, 15 ms), all holding a 2-block template.
// Prompts that share only the template (the cache saves 3 % of each) go to the replicas in turn,
// least recently sent first; by the cost alone all go to the least loaded one. The views stay as
// they are (on_routed only): what spreads them is the rule, not their growing queues.
struct NearTies {
  NearTies() {
    for (int r = 0; r < 4; ++r) index.add_replica({});
    for (ReplicaId r = 0; r < 4; ++r) {
      for (std::uint64_t b : prompt_hashes(9, 2)) index.apply_stored(r, b);
    }
    views = full_fleet(4);
    for (std::size_t r = 0; r < views.size(); ++r) {
      views[r].running = views[r].inflight_requests = 10 + r;  // places to spare
    }
  }
  // Where each of `prompts` goes, one after another, 5 ms apart.
  std::vector<ReplicaId> route_each(RoutingPolicy& p,
                                    const std::vector<std::vector<std::uint64_t>>& prompts) {
    std::vector<ReplicaId> where;
    Clock::time_point now{};
    for (const auto& hashes : prompts) {
      now += std::chrono::milliseconds(5);
      const RouteRequest request = request_for(hashes);
      const RouteDecision d = p.route(request, views, index, now);
      p.on_routed(request, d, now);
      where.push_back(d.replica);
    }
    return where;
  }
  PrefixIndex index;
  std::vector<ReplicaView> views;
};

TEST(CacheAwareTest, PromptsTheCacheCannotPlaceGoInTurnAmongNearlyEqualReplicas) {
  NearTies fleet;
  std::vector<std::vector<std::uint64_t>> fresh;
  for (std::uint64_t i = 1; i <= 5; ++i) fresh.push_back(prompt_hashes(9, 2, i, 62));
  auto in_turn = policy("cache_aware");
  const std::vector<ReplicaId> turn = fleet.route_each(*in_turn, fresh);
  EXPECT_EQ(turn[0], 0U) << "the least cost first";
  EXPECT_TRUE(goes_in_turn(turn, {0, 1, 2, 3})) << ::testing::PrintToString(turn);
  auto by_cost = policy("cache_aware:near_tie_prefills=0");
  EXPECT_EQ(fleet.route_each(*by_cost, fresh), (std::vector<ReplicaId>{0, 0, 0, 0, 0}));

  // A replica whose full cache charges a prompt's prefill again for what it evicts is not an
  // equal: the turn skips it.
  fleet.views[1].kv_pages_used = 1000;
  auto skip = policy("cache_aware");
  const std::vector<ReplicaId> skipped = fleet.route_each(*skip, fresh);
  EXPECT_TRUE(goes_in_turn(skipped, {0, 2, 3})) << ::testing::PrintToString(skipped);
  fleet.views[1].kv_pages_used = 0;

  // Where the cache saves more (replicas 0 and 1 hold half the prompt), the cost decides: the
  // same prompt twice goes to the same holder, whichever was sent to last.
  for (ReplicaId r = 0; r < 2; ++r) {
    for (std::uint64_t b : prompt_hashes(9, 32)) fleet.index.apply_stored(r, b);
  }
  const auto half_cached = prompt_hashes(9, 32, 7, 32);
  auto hit = policy("cache_aware");
  const auto twice = fleet.route_each(*hit, {half_cached, half_cached});
  EXPECT_EQ(twice[0], twice[1]);
  EXPECT_LT(twice[0], 2U);

  EXPECT_FALSE(make_policy("cache_aware:near_tie_prefills=-1").ok());
  EXPECT_FALSE(make_policy("cache_aware:near_tie_max_saved=2").ok());
}

// gateway_spread_prefills: eight replicas hold a one-block template start and nothing else of
// the prompts that follow it (2,048 tokens each, 16 of them cached: the cost is the load). Replica
// 0 is idle and the others run a few sequences each, so every gateway, seeing the same reports,
// would send each of these requests to replica 0; replica 7's queue is past the slack. Behind
// three gateways, such requests arriving every 10 ms go in this gateway's turn over the replicas
// near the least cost (the slack: one prefill of 2,032 tokens at 3e-5 s, 61 ms). One gateway, the
// option at 0, a rare request (one a second, more than the other gateways' two prefills apart)
// and a prompt the cache saves much of all go to the least cost. The views stay as they are:
// what spreads the requests is the rule, not their growing queues.
struct TemplateFleet {
  TemplateFleet() {
    for (ReplicaId r = 0; r < 8; ++r) {
      index.add_replica({});
      index.apply_stored(r, prompt_hashes(7, 1)[0]);
      ReplicaView& v = views[r];
      v.id = r;
      v.prefill_seconds_per_token = 3e-5;
      v.decode_seconds_per_sequence = 1e-4;
      v.kv_pages_total = 1000;
      v.batch_slots = 64;
      v.running = r;  // 0.1 ms of decode step each
    }
    views[7].tokens_queued_for_prefill = 10000;  // 300 ms
  }
  // Where `name` sends `count` prompts that share only the template, one every `gap`, in order.
  std::vector<ReplicaId> route(std::string_view name, int count,
                               Clock::duration gap = std::chrono::milliseconds(10),
                               std::uint64_t seed = 0) {
    if (gap == Clock::duration{}) gap = std::chrono::milliseconds(10);
    PolicyConfig config;
    config.seed = seed;
    auto p = policy(name, config);
    std::vector<ReplicaId> chosen;
    Clock::time_point now{};
    for (int i = 0; i < count; ++i, now += gap) {
      const auto h = prompt_hashes(7, 1, static_cast<std::uint64_t>(i), 127);
      const RouteRequest request = request_for(h);
      const RouteDecision d = p->route(request, views, index, now);
      p->on_routed(request, d, now);
      chosen.push_back(d.replica);
    }
    return chosen;
  }
  PrefixIndex index;
  std::vector<ReplicaView> views = std::vector<ReplicaView>(8);
};

TEST(CacheAwareTest, SeveralGatewaysSpreadRequestsTheCacheBarelyHelpsInTurn) {
  TemplateFleet fleet;
  const std::vector<ReplicaId> all_to_0(21, 0);
  EXPECT_EQ(fleet.route("cache_aware:near_tie_prefills=0", 21), all_to_0)
      << "one gateway: the least cost (near ties aside)";
  EXPECT_EQ(fleet.route("cache_aware:gateways=3:gateway_spread_prefills=0", 21), all_to_0);
  EXPECT_EQ(fleet.route("cache_aware:gateways=3", 21, std::chrono::seconds(1)), all_to_0)
      << "too rare to herd";
  // The first goes by the least cost (no interval between such requests yet), then the turn
  // visits every replica within the slack, least recently sent first, and never replica 7.
  const std::vector<ReplicaId> within{0, 1, 2, 3, 4, 5, 6};
  const std::vector<ReplicaId> three = fleet.route("cache_aware:gateways=3", 21);
  EXPECT_EQ(three[0], 0U);
  EXPECT_TRUE(goes_in_turn(three, within)) << ::testing::PrintToString(three);
  // The window does not grow with the gateways: behind ten, replica 7 stays out. One wide
  // enough for its 300 ms queue (6 prefills of 2,032 tokens at 3e-5 s, 366 ms) gives it its
  // turn too.
  const std::vector<ReplicaId> ten = fleet.route("cache_aware:gateways=10", 21);
  EXPECT_TRUE(goes_in_turn(ten, within)) << ::testing::PrintToString(ten);
  const std::vector<ReplicaId> wide =
      fleet.route("cache_aware:gateways=3:gateway_spread_prefills=6", 16);
  EXPECT_EQ(std::count(wide.begin(), wide.end(), ReplicaId{7}), 2);
  // Gateways go round in orders of their own (their seeds): in the same one, at the same pace,
  // they would send to the same replica at about the same time.
  std::set<std::vector<ReplicaId>> orders;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    const std::vector<ReplicaId> seeded = fleet.route("cache_aware:gateways=3", 8, {}, seed);
    EXPECT_TRUE(goes_in_turn(seeded, within)) << ::testing::PrintToString(seeded);
    orders.insert(seeded);
  }
  EXPECT_GE(orders.size(), 3U);
  for (const char* bad :
       {"cache_aware:gateway_spread_prefills=-1", "cache_aware:gateway_spread_prefills=inf",
        "cache_aware:gateway_spread_prefills=x"}) {
    EXPECT_FALSE(make_policy(bad).ok()) << bad;
  }
}

// The same fleet with a prompt whose first 1,024 tokens replica 3 holds: the cache saves half
// of it, so the hit decides as before, behind any number of gateways.
TEST(CacheAwareTest, SeveralGatewaysKeepAHitThatSavesMuch) {
  TemplateFleet fleet;
  const auto h = prompt_hashes(9, 64, 1, 64);
  for (std::size_t i = 0; i < 64; ++i) fleet.index.apply_stored(3, h[i]);
  for (const char* name : {"cache_aware", "cache_aware:gateways=3", "cache_aware:gateways=10"}) {
    auto p = policy(name);
    Clock::time_point now{};
    for (int i = 0; i < 16; ++i, now += std::chrono::milliseconds(10)) {
      EXPECT_EQ(p->route(request_for(h), fleet.views, fleet.index, now).replica, 3U) << name;
    }
  }
}

}  // namespace
}  // namespace prefixgate::gateway

namespace prefixgate::gateway {
namespace {

// Peered gateways (CacheAwareConfig::peered) hear every send, so they share one view of whom was
// sent to last: gateways deciding within the moment their sends take to reach each other would
// all pick the same least recently sent replica. With peer_turns each goes first to the replicas
// no gateway has sent to for a round, in an order of its own.
ReplicaId peered_choice(std::uint64_t seed, bool peer_turns,
                        Clock::duration gap = std::chrono::milliseconds(1)) {
  TemplateFleet fleet;
  // One gateway's view drains a report's queue from the report's arrival (prefill_drain).
  fleet.views[7].report_beyond_own_tokens = fleet.views[7].tokens_queued_for_prefill;
  PolicyConfig config;
  config.seed = seed;
  config.cache_aware.peered = true;
  config.cache_aware.peer_turns = peer_turns;
  auto p = policy("cache_aware", config);
  // Every gateway's sends, as the peers told them: replicas 0..7 in order, `gap` apart.
  Clock::time_point now{};
  for (ReplicaId r = 0; r < 8; ++r, now += gap) {
    const auto h = prompt_hashes(7, 1, 1000 + r, 127);
    RouteDecision d;
    d.replica = r;
    p->on_routed(request_for(h), d, now);
  }
  const auto h = prompt_hashes(7, 1, 2000, 127);
  return p->route(request_for(h), fleet.views, fleet.index, now + std::chrono::milliseconds(100))
      .replica;
}

TEST(CacheAwareTest, PeeredGatewaysTakeNearTiesInTurnsOfTheirOwn) {
  std::set<ReplicaId> alike, own;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    alike.insert(peered_choice(seed, /*peer_turns=*/false));
    own.insert(peered_choice(seed, /*peer_turns=*/true));
  }
  EXPECT_EQ(alike, (std::set<ReplicaId>{0})) << "the same least recently sent replica for all";
  EXPECT_GE(own.size(), 3U) << "every near tie is due: each gateway's own order decides";
  EXPECT_FALSE(own.contains(7)) << "its queue is past the near ties";
  // Sends 30 ms apart, more than 100 peer delays (0.2 ms): two seldom meet within one, and the
  // least recently sent keeps the rotation even.
  std::set<ReplicaId> rare;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    rare.insert(peered_choice(seed, /*peer_turns=*/true, std::chrono::milliseconds(30)));
  }
  EXPECT_EQ(rare, (std::set<ReplicaId>{0}));
  EXPECT_FALSE(make_policy("cache_aware:peer_turns=maybe").ok());
}

}  // namespace
}  // namespace prefixgate::gateway
