// A peer gateway's datagram (peer_sends.h) to parse_peer_datagram() and to a PeerLedger over four
// replicas: what parses re-encodes to the same records; whatever was applied, once the peers are
// timed out every view is back to nothing in flight (a peer's datagrams cannot leave load behind).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "prefixgate/gateway/peer_sends.h"

namespace {

void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_peer_datagram: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace prefixgate::gateway;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto parsed = parse_peer_datagram(bytes);
  if (!parsed) {
    check(!parsed.error().message.empty(), "an error without a message");
  } else {
    PeerSendWriter writer(parsed->origin);
    for (const PeerRecord& r : parsed->records) {
      if (r.kind == PeerRecordKind::kRouted) {
        RouteRequest request;
        request.block_hashes = r.hashes;
        request.prompt_tokens = r.prompt_tokens;
        request.block_size = r.block_size;
        RouteDecision decision;
        decision.predicted_cached_tokens = r.cached_tokens;
        writer.routed(r.flight, r.replica, request, decision);
      } else if (r.kind == PeerRecordKind::kPrefilled) {
        writer.prefilled(r.flight);
      } else {
        writer.finished(r.flight);
      }
    }
    std::size_t records = 0;
    for (const std::string& d : writer.take()) {
      auto again = parse_peer_datagram(d);
      check(again.ok(), "a re-encoded datagram does not parse");
      for (const PeerRecord& r : again->records) {
        const PeerRecord& o = parsed->records[records++];
        check(r.kind == o.kind && r.flight == o.flight && r.replica == o.replica &&
                  r.prompt_tokens == o.prompt_tokens && r.cached_tokens == o.cached_tokens &&
                  r.block_size == o.block_size && r.hashes == o.hashes,
              "a record changed in a round trip");
      }
    }
    check(records == parsed->records.size(), "records lost in a round trip");
  }

  PrefixIndex index;
  std::vector<ReplicaView> views;
  PeerLedger ledger(/*self=*/1);
  for (ReplicaId r = 0; r < 4; ++r) {
    views.push_back({});
    views.back().id = index.add_replica({});
    views.back().prefill_seconds_per_token = 1e-4;
    ledger.set_replica_key(r, r);
  }
  auto policy = make_policy("cache_aware");
  check(policy.ok(), "no policy");
  const auto view_of = [&](ReplicaId r) { return r < views.size() ? &views[r] : nullptr; };
  (void)ledger.apply(bytes, index, **policy, view_of, Clock::time_point{});
  ledger.expire(index, **policy, view_of, Clock::time_point{} + std::chrono::hours(1));
  check(ledger.flights() == 0, "flights left after every peer timed out");
  check(ledger.stored_blocks() == 0, "block hashes kept for no flight");
  for (const ReplicaView& v : views) {
    check(v.inflight_requests == 0 && v.inflight_prompt_tokens == 0, "load left behind");
  }
  return 0;
}
