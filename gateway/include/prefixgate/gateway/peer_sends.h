// Gateways that share their sends. Behind a plain load balancer each gateway sees only its own
// requests: until a replica's next load report, the others' sends to it are invisible, so every
// gateway finds the same replica least loaded and sends it their requests at once, and a new
// prefix placed by one gateway is unknown to the others until the engine's events show it.
// Peered gateways tell each other, a millisecond or so after the fact, what each routed where
// (its blocks, its uncached prompt), when its first token came and when it ended, and each
// applies the others' sends with the same bookkeeping as its own (replica_load.h): in-flight
// counts, queued prefill and predictions then cover every gateway's requests, as one gateway's
// would.
//
// The wire format (UDP datagrams, little-endian; gateway/README.md documents it for other
// implementations):
//
//   datagram  = "PGPS" version:u8(1) origin:u64 record*      (no records: a heartbeat)
//   record    = kind:u8 flight:u64 [routed]
//     kind 1  routed:     replica:u64 prompt_tokens:u32 cached_tokens:u32 block_size:u32
//                         blocks:u32 hash:u64 x blocks
//     kind 2  prefilled   (the flight's first token came)
//     kind 3  finished    (the flight ended, with or without a first token)
//
// `origin` names the sending gateway process (random at start), `flight` one of its requests,
// `replica` the upstream it went to by the XXH3 of its configured URL (replica_key()), so that
// gateways listing their upstreams in different orders agree.
//
//   PeerSendWriter out(origin);
//   out.routed(flight, replica_key(url), request, decision);   // under the routing lock
//   for (std::string& d : out.take()) sendto(peer, d);          // from the peer thread
//
//   PeerLedger ledger(origin);
//   ledger.set_replica_key(replica_key(url), id);
//   ledger.apply(datagram, index, policy, view_of, now);        // a peer's datagram
//   ledger.expire(index, policy, view_of, now);                 // peers gone quiet
#pragma once

#include <boost/unordered/unordered_flat_map.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/base/status.h"
#include "prefixgate/gateway/prefix_index.h"
#include "prefixgate/gateway/routing.h"

namespace prefixgate::gateway {

inline constexpr std::string_view kPeerMagic = "PGPS";
inline constexpr std::uint8_t kPeerVersion = 1;
// The largest datagram a writer makes: under UDP's 65,507-byte payload, so one routed record of
// kMaxPeerBlocks blocks always fits.
inline constexpr std::size_t kPeerMaxDatagram = 60000;
// A routed record carries at most this many of the prompt's leading blocks (64k tokens at 16 a
// block): a longer prompt's later blocks are not predicted at the peers, and its first ones are
// what siblings share.
inline constexpr std::size_t kMaxPeerBlocks = 4096;

// The key a replica is known by between gateways: XXH3-64 of its configured URL.
std::uint64_t replica_key(std::string_view url);

enum class PeerRecordKind : std::uint8_t { kRouted = 1, kPrefilled = 2, kFinished = 3 };

struct PeerRecord {
  PeerRecordKind kind = PeerRecordKind::kRouted;
  std::uint64_t flight = 0;
  // kRouted only.
  std::uint64_t replica = 0;
  std::uint32_t prompt_tokens = 0;
  std::uint32_t cached_tokens = 0;  // the sender's predicted cached tokens there
  std::uint32_t block_size = 0;
  std::vector<std::uint64_t> hashes;
};

struct PeerDatagram {
  std::uint64_t origin = 0;
  std::vector<PeerRecord> records;
};

// kInvalidValue naming what is wrong: a bad magic or version, a record cut short, an unknown
// kind, a block count past kMaxPeerBlocks.
Result<PeerDatagram> parse_peer_datagram(std::string_view bytes);

// Encodes a gateway's sends into datagrams of at most kPeerMaxDatagram bytes. Not thread-safe:
// the gateway writes to it under its routing lock.
class PeerSendWriter {
 public:
  explicit PeerSendWriter(std::uint64_t origin) : origin_(origin) {}
  void routed(std::uint64_t flight, std::uint64_t replica, const RouteRequest& request,
              const RouteDecision& decision);
  void prefilled(std::uint64_t flight) { simple(PeerRecordKind::kPrefilled, flight); }
  void finished(std::uint64_t flight) { simple(PeerRecordKind::kFinished, flight); }
  bool empty() const { return done_.empty() && records_ == 0; }
  // The datagrams written since the last take, each ready to send.
  std::vector<std::string> take();
  // A datagram without records: tells the peers this gateway is alive.
  std::string heartbeat() const;

 private:
  void simple(PeerRecordKind kind, std::uint64_t flight);
  // Starts a new datagram when `bytes` more would not fit the current one.
  void reserve(std::size_t bytes);
  std::uint64_t origin_;
  std::string current_;
  std::size_t records_ = 0;
  std::vector<std::string> done_;
};

struct PeerLedgerConfig {
  // A peer not heard from for this long (a datagram, a heartbeat) is gone: its flights end here.
  std::chrono::milliseconds peer_timeout{3000};
  // A flight whose end never came (a lost datagram) ends here after this long.
  std::chrono::milliseconds max_flight_age{std::chrono::minutes(10)};
  // Flights kept at most; past it a new routed record is dropped (counted).
  std::size_t max_flights = 1 << 18;
  // Block hashes kept, over all flights, to settle their predictions at the first token (8 bytes
  // each: 64 MiB). Past it a flight keeps none: its predictions expire after the index's
  // max_prefill_wait instead of prediction_ttl after its first token.
  std::size_t max_stored_blocks = std::size_t{1} << 23;
};

// The other gateways' requests in flight, applied to this gateway's views, index and policy with
// replica_load.h's bookkeeping, as if this gateway had routed them. Not thread-safe: the gateway
// calls it under its routing lock.
class PeerLedger {
 public:
  using ViewOf = std::function<ReplicaView*(ReplicaId)>;
  struct Counters {
    std::uint64_t datagrams = 0;
    std::uint64_t records = 0;
    std::uint64_t malformed = 0;        // datagrams that did not parse (none of it applied)
    std::uint64_t unknown_replica = 0;  // routed to a replica this gateway does not list
    std::uint64_t dropped = 0;          // duplicates, unknown flights, past max_flights
    std::uint64_t expired = 0;          // flights ended by peer_timeout or max_flight_age
  };

  explicit PeerLedger(std::uint64_t self, PeerLedgerConfig config = {});
  void set_replica_key(std::uint64_t key, ReplicaId id);
  // A peer's datagram, received at `now`. Its own origin's (a gateway listing itself) is
  // ignored. Errors: it did not parse (nothing applied).
  Status apply(std::string_view datagram, PrefixIndex& index, RoutingPolicy& policy,
               const ViewOf& view_of, Clock::time_point now);
  // The same for a datagram parsed already (the gateway parses outside its routing lock); a
  // parse error is counted with note_malformed().
  void apply(PeerDatagram datagram, PrefixIndex& index, RoutingPolicy& policy,
             const ViewOf& view_of, Clock::time_point now);
  void note_malformed() { ++counters_.malformed; }
  // Ends the flights of peers silent for peer_timeout and those older than max_flight_age.
  void expire(PrefixIndex& index, RoutingPolicy& policy, const ViewOf& view_of,
              Clock::time_point now);

  std::size_t flights() const { return flights_.size(); }
  std::size_t stored_blocks() const { return stored_blocks_; }
  std::size_t live_peers() const { return peers_.size(); }
  const Counters& counters() const { return counters_; }

 private:
  struct Flight {
    ReplicaId replica = 0;
    RouteDecision decision;  // with this gateway's own ticket for the policy
    std::size_t uncached = 0;
    bool prefilled = false;
    Clock::time_point routed_at{};
    std::vector<std::uint64_t> hashes;  // until prefilled: their predictions settle then
  };
  struct FlightKey {
    std::uint64_t origin = 0;
    std::uint64_t flight = 0;
    bool operator==(const FlightKey&) const = default;
  };
  struct FlightKeyHash {
    std::size_t operator()(const FlightKey& k) const noexcept;
  };
  void end(Flight& f, PrefixIndex& index, RoutingPolicy& policy, ReplicaView& view,
           Clock::time_point now);

  std::uint64_t self_;
  PeerLedgerConfig config_;
  boost::unordered_flat_map<std::uint64_t, ReplicaId> replicas_;
  boost::unordered_flat_map<FlightKey, Flight, FlightKeyHash> flights_;
  boost::unordered_flat_map<std::uint64_t, Clock::time_point> peers_;  // origin: last heard
  std::uint64_t next_ticket_ = 0;
  std::size_t stored_blocks_ = 0;  // over all flights' `hashes`
  Counters counters_;
};

}  // namespace prefixgate::gateway
