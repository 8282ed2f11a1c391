// The UDP side of peer gateways (prefixgate/gateway/peer_sends.h): one socket and one thread per
// gateway. Every flush interval the thread sends what the ReplicaSet wrote for the peers since
// the last one (its routes, first tokens and ends), to every peer address; it applies each
// datagram it receives from a listed peer; once a second it sends a heartbeat when it has sent
// nothing else, and ends the flights of peers gone quiet. Datagrams from addresses not listed
// (IP and port: a peer sends from the port it listens on) are counted and dropped, so a stranger
// cannot make a replica look busy; UDP sources can be forged, so the peer port belongs on a
// private network (gateway/README.md).
//
//   PeerLink link(*ctx.replicas, config.peers);
//   auto port = link.start();          // binds, resolves the peers, starts the thread
//   link.register_metrics(ctx.metrics);
//   ...
//   link.stop();
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "config.h"
#include "prefixgate/base/status.h"
#include "prefixgate/serving/metrics.h"
#include "server/replica_set.h"

namespace prefixgate::gateway::server {

class PeerLink {
 public:
  PeerLink(ReplicaSet& replicas, PeerConfig config);
  ~PeerLink();  // stop()
  PeerLink(const PeerLink&) = delete;
  PeerLink& operator=(const PeerLink&) = delete;

  // Binds the listener, resolves every peer address, tells the ReplicaSet to write for its peers
  // and starts the thread. Returns the bound UDP port. Errors: kInvalidValue naming the address
  // that does not resolve ("peers.addresses[i]") or the listener that cannot be bound
  // ("peers.listen").
  Result<std::uint16_t> start();
  // Any thread, idempotent: ends the thread and closes the socket.
  void stop();
  // prefixgate_peer_*: datagrams sent and received, what was refused and why, peers' flights.
  void register_metrics(serving::Metrics& metrics);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prefixgate::gateway::server
