#include "prefixgate/gateway/peer_sends.h"

#include <gtest/gtest.h>

#include "gateway/fleet_sim.h"
#include "prefixgate/gateway/replica_load.h"

namespace prefixgate::gateway {
namespace {

using testing::prompt_hashes;
using testing::request_for;

// Two replicas as a gateway sees them, and the ledger of what its peers sent there.
struct PeeredGateway {
  PrefixIndex index;
  std::unique_ptr<RoutingPolicy> policy = std::move(*make_policy("dynamo_kv"));
  std::vector<ReplicaView> views;
  PeerLedger ledger;
  explicit PeeredGateway(std::uint64_t self, PeerLedgerConfig config = {}) : ledger(self, config) {
    for (ReplicaId r = 0; r < 2; ++r) {
      views.push_back({});
      views.back().id = index.add_replica({});
      ledger.set_replica_key(100 + r, r);  // replica r is known to the peers as 100 + r
    }
  }
  Status apply(std::string_view datagram, Clock::time_point now = {}) {
    return ledger.apply(
        datagram, index, *policy,
        [this](ReplicaId r) { return r < views.size() ? &views[r] : nullptr; }, now);
  }
  void expire(Clock::time_point now) {
    ledger.expire(
        index, *policy, [this](ReplicaId r) { return r < views.size() ? &views[r] : nullptr; },
        now);
  }
  std::size_t match(const std::vector<std::uint64_t>& hashes, ReplicaId r) const {
    std::vector<std::size_t> m(views.size());
    index.longest_match(hashes, {}, m);
    return m[r];
  }
};

std::string one(PeerSendWriter& w) {
  std::vector<std::string> d = w.take();
  EXPECT_EQ(d.size(), 1U);
  return d.empty() ? std::string() : d.front();
}

TEST(PeerSendsTest, RecordsRoundTripThroughADatagram) {
  PeerSendWriter w(77);
  const auto h = prompt_hashes(1, 10);
  const RouteRequest req = request_for(h);
  RouteDecision d;
  d.replica = 1;
  d.predicted_cached_tokens = 48;
  w.routed(5, 101, req, d);
  w.prefilled(5);
  w.finished(5);
  auto parsed = parse_peer_datagram(one(w));
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(parsed->origin, 77U);
  ASSERT_EQ(parsed->records.size(), 3U);
  const PeerRecord& r = parsed->records[0];
  EXPECT_EQ(r.kind, PeerRecordKind::kRouted);
  EXPECT_EQ(r.flight, 5U);
  EXPECT_EQ(r.replica, 101U);
  EXPECT_EQ(r.prompt_tokens, req.prompt_tokens);
  EXPECT_EQ(r.cached_tokens, 48U);
  EXPECT_EQ(r.block_size, req.block_size);
  EXPECT_EQ(r.hashes, h);
  EXPECT_EQ(parsed->records[1].kind, PeerRecordKind::kPrefilled);
  EXPECT_EQ(parsed->records[2].kind, PeerRecordKind::kFinished);
  EXPECT_TRUE(w.empty());
  EXPECT_TRUE(w.take().empty());
}

TEST(PeerSendsTest, ABurstIsSplitIntoDatagramsThatFitAndLongPromptsAreCapped) {
  PeerSendWriter w(1);
  const auto h = prompt_hashes(2, kMaxPeerBlocks + 100);
  const RouteRequest req = request_for(h);
  for (std::uint64_t f = 0; f < 10; ++f) w.routed(f, 100, req, RouteDecision{});
  const std::vector<std::string> datagrams = w.take();
  EXPECT_GE(datagrams.size(), 2U);
  std::uint64_t next = 0;
  for (const std::string& d : datagrams) {
    EXPECT_LE(d.size(), kPeerMaxDatagram);
    auto parsed = parse_peer_datagram(d);
    ASSERT_TRUE(parsed) << parsed.error().message;
    for (const PeerRecord& r : parsed->records) {
      EXPECT_EQ(r.flight, next++) << "in order, none lost";
      EXPECT_EQ(r.hashes.size(), kMaxPeerBlocks) << "the leading blocks, capped";
      EXPECT_EQ(r.hashes.front(), h.front());
    }
  }
  EXPECT_EQ(next, 10U);
}

TEST(PeerSendsTest, MalformedDatagramsAreRefusedWithAReason) {
  PeerSendWriter w(1);
  const auto h = prompt_hashes(3, 4);
  w.routed(1, 100, request_for(h), RouteDecision{});
  const std::string good = one(w);
  ASSERT_TRUE(parse_peer_datagram(good));
  EXPECT_TRUE(parse_peer_datagram(w.heartbeat()));

  EXPECT_FALSE(parse_peer_datagram(""));
  EXPECT_FALSE(parse_peer_datagram("GET / HTTP/1.1\r\n\r\n"));
  std::string version = good;
  version[4] = 2;
  auto v = parse_peer_datagram(version);
  ASSERT_FALSE(v);
  EXPECT_NE(v.error().message.find("version"), std::string::npos);
  for (std::size_t cut = 14; cut < good.size(); ++cut) {
    EXPECT_FALSE(parse_peer_datagram(good.substr(0, cut))) << "cut at " << cut;
  }
  std::string kind = good;
  kind[13] = 9;
  EXPECT_FALSE(parse_peer_datagram(kind));
  // A block count past the cap, with the bytes to back it: refused, not allocated.
  std::string many = good.substr(0, 13 + 9 + 20);
  const std::uint32_t count = kMaxPeerBlocks + 1;
  for (int i = 0; i < 4; ++i) many.push_back(static_cast<char>(count >> (8 * i)));
  many.append(std::string(8 * count, '\0'));
  auto m = parse_peer_datagram(many);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("at most"), std::string::npos);
}

TEST(PeerSendsTest, APeersRequestIsCountedAsItsOwnWouldBeUntilItEnds) {
  PeeredGateway gw(/*self=*/1);
  PeerSendWriter peer(2);
  const auto h = prompt_hashes(4, 10);
  const RouteRequest req = request_for(h);  // 160 tokens
  RouteDecision d;
  d.replica = 1;
  d.predicted_cached_tokens = 48;
  peer.routed(7, 101, req, d);
  ASSERT_TRUE(gw.apply(one(peer)));
  EXPECT_EQ(gw.views[1].inflight_requests, 1U);
  EXPECT_EQ(gw.views[1].inflight_prompt_tokens, 112U) << "the prompt less its cached tokens";
  EXPECT_EQ(gw.views[0].inflight_requests, 0U);
  EXPECT_EQ(gw.match(h, 1), 10U) << "its blocks are predicted where the peer sent it";
  EXPECT_EQ(gw.match(h, 0), 0U);
  EXPECT_EQ(gw.ledger.flights(), 1U);
  EXPECT_EQ(gw.ledger.live_peers(), 1U);

  peer.prefilled(7);
  ASSERT_TRUE(gw.apply(one(peer)));
  EXPECT_EQ(gw.views[1].inflight_prompt_tokens, 0U);
  EXPECT_EQ(gw.views[1].inflight_requests, 1U);
  peer.finished(7);
  ASSERT_TRUE(gw.apply(one(peer)));
  EXPECT_EQ(gw.views[1].inflight_requests, 0U);
  EXPECT_EQ(gw.ledger.flights(), 0U);
  EXPECT_EQ(gw.ledger.counters().records, 3U);
}

TEST(PeerSendsTest, OwnDuplicateUnknownAndMalformedRecordsChangeNothing) {
  PeeredGateway gw(/*self=*/1);
  const auto h = prompt_hashes(5, 4);
  const RouteRequest req = request_for(h);
  RouteDecision d;
  PeerSendWriter self(1);
  self.routed(1, 100, req, d);
  ASSERT_TRUE(gw.apply(one(self)));
  EXPECT_EQ(gw.views[0].inflight_requests, 0U) << "a gateway listing itself hears itself";

  PeerSendWriter peer(2);
  peer.routed(1, 555, req, d);  // a replica this gateway does not list
  peer.finished(9);             // a flight it never heard of
  peer.routed(2, 100, req, d);
  peer.routed(2, 100, req, d);  // the same flight again
  ASSERT_TRUE(gw.apply(one(peer)));
  EXPECT_EQ(gw.views[0].inflight_requests, 1U);
  EXPECT_EQ(gw.ledger.counters().unknown_replica, 1U);
  EXPECT_EQ(gw.ledger.counters().dropped, 2U);

  EXPECT_FALSE(gw.apply("PGPS\x01garbage"));
  EXPECT_EQ(gw.ledger.counters().malformed, 1U);
  EXPECT_EQ(gw.views[0].inflight_requests, 1U);
}

TEST(PeerSendsTest, APeerGoneQuietHasItsRequestsEnded) {
  PeerLedgerConfig config;
  config.peer_timeout = std::chrono::seconds(3);
  config.max_flight_age = std::chrono::seconds(60);
  PeeredGateway gw(/*self=*/1, config);
  const auto h = prompt_hashes(6, 4);
  const Clock::time_point t0{};
  PeerSendWriter quiet(2), alive(3);
  quiet.routed(1, 100, request_for(h), RouteDecision{});
  alive.routed(1, 101, request_for(h), RouteDecision{});
  ASSERT_TRUE(gw.apply(one(quiet), t0));
  ASSERT_TRUE(gw.apply(one(alive), t0));
  ASSERT_TRUE(gw.apply(alive.heartbeat(), t0 + std::chrono::seconds(2)));
  gw.expire(t0 + std::chrono::seconds(4));
  EXPECT_EQ(gw.views[0].inflight_requests, 0U) << "peer 2 said nothing for 4 s";
  EXPECT_EQ(gw.views[0].inflight_prompt_tokens, 0U);
  EXPECT_EQ(gw.views[1].inflight_requests, 1U) << "peer 3's heartbeat kept it";
  EXPECT_EQ(gw.ledger.live_peers(), 1U);
  // A request whose end was lost ends after max_flight_age, its peer alive or not.
  ASSERT_TRUE(gw.apply(alive.heartbeat(), t0 + std::chrono::seconds(61)));
  gw.expire(t0 + std::chrono::seconds(61));
  EXPECT_EQ(gw.views[1].inflight_requests, 0U);
  EXPECT_EQ(gw.ledger.counters().expired, 2U);
  EXPECT_EQ(gw.ledger.flights(), 0U);
}

TEST(PeerSendsTest, TheBlocksKeptToSettleAreBounded) {
  PeerLedgerConfig config;
  config.max_stored_blocks = 15;
  PeeredGateway gw(/*self=*/1, config);
  PeerSendWriter peer(2);
  const auto a = prompt_hashes(8, 10), b = prompt_hashes(9, 10);
  peer.routed(1, 100, request_for(a), RouteDecision{});
  peer.routed(2, 101, request_for(b), RouteDecision{});
  ASSERT_TRUE(gw.apply(one(peer)));
  EXPECT_EQ(gw.ledger.stored_blocks(), 10U) << "the second prompt's would pass 15";
  EXPECT_EQ(gw.match(b, 1), 10U) << "still predicted where it went";
  EXPECT_EQ(gw.views[1].inflight_requests, 1U);
  peer.prefilled(1);
  peer.finished(2);
  ASSERT_TRUE(gw.apply(one(peer)));
  EXPECT_EQ(gw.ledger.stored_blocks(), 0U);
  EXPECT_EQ(gw.views[1].inflight_requests, 0U);
}

TEST(PeerSendsTest, ReplicaKeysAreTheUrlsHash) {
  EXPECT_EQ(replica_key("http://10.0.0.5:8000"), replica_key("http://10.0.0.5:8000"));
  EXPECT_NE(replica_key("http://10.0.0.5:8000"), replica_key("http://10.0.0.6:8000"));
}

}  // namespace
}  // namespace prefixgate::gateway
