// Peer gateways (peers:, --peer-listen / --peer): two prefixgate processes in front of one sim
// engine, sharing their sends over loopback UDP; and the test itself as a listed peer, sending
// the datagrams a peer would, and as a stranger.
#include <gtest/gtest.h>

#include <thread>

#include "gateway_server/processes.h"
#include "prefixgate/gateway/peer_sends.h"

namespace prefixgate::gateway::testing {
namespace {

// A bound loopback UDP socket, closed at the end.
struct UdpSocket {
  int fd = -1;
  std::uint16_t port = 0;
  UdpSocket() {
    fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof a;
    EXPECT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length), 0);
    port = ntohs(a.sin_port);
  }
  ~UdpSocket() { ::close(fd); }
  void send_to(std::uint16_t to, const std::string& datagram) const {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(to);
    EXPECT_EQ(::sendto(fd, datagram.data(), datagram.size(), 0,
                       reinterpret_cast<const sockaddr*>(&a), sizeof a),
              static_cast<ssize_t>(datagram.size()));
  }
};

// Polls the gateway's /metrics until `series` has `value` (or 10 s pass); returns the last.
double wait_metric(std::uint16_t port, const std::string& series, double value) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  double last = -1;
  while (std::chrono::steady_clock::now() < deadline) {
    last = metric_value(get(port, "/metrics").body, series);
    if (last == value) return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling, not synchronizing
  }
  return last;
}

struct PeeredPair {
  std::uint16_t engine_port = 0, a_port = 0, b_port = 0;
  std::unique_ptr<Process> engine, a, b;
  // Picked before the gateways start (each must know the other's); the sockets are closed for
  // the gateways to bind, and `self` stays the test's own, listed as a peer of b.
  std::uint16_t a_peer = 0, b_peer = 0;
  UdpSocket self;
  PeeredPair() {
    {
      UdpSocket pa, pb;
      a_peer = pa.port;
      b_peer = pb.port;
    }
    engine = start_engine(engine_port, "1");
    const std::string up = upstream(engine_port);
    a = start_gateway(
        a_port, {"--upstream", up, "--peer-listen", "127.0.0.1:" + std::to_string(a_peer), "--peer",
                 "127.0.0.1:" + std::to_string(b_peer)});
    b = start_gateway(
        b_port, {"--upstream", up, "--peer-listen", "127.0.0.1:" + std::to_string(b_peer), "--peer",
                 "127.0.0.1:" + std::to_string(a_peer), "--peer",
                 "127.0.0.1:" + std::to_string(self.port)});
    EXPECT_TRUE(wait_healthy(a_port));
    EXPECT_TRUE(wait_healthy(b_port));
  }
  std::string inflight() const {
    return "prefixgate_upstream_inflight_requests{replica=\"" + upstream(engine_port) + "\"}";
  }
};

TEST(GatewayPeersTest, AGatewaySeesItsPeersRequestInFlightUntilItEnds) {
  PeeredPair f;
  std::smatch m;
  ASSERT_TRUE(f.a->read_until(std::regex("peers listening on udp://127\\.0\\.0\\.1:([0-9]+)"), m,
                              std::chrono::seconds(5)))
      << f.a->output();
  EXPECT_EQ(m[1].str(), std::to_string(f.a_peer));
  // A long answer through a: b counts it on the replica as if it had sent it.
  Reply reply;
  std::thread client([&] {
    reply = post(f.a_port, "/v1/chat/completions",
                 R"({"model":"builtin:tiny","messages":[{"role":"user","content":"Count."}],)"
                 R"("max_tokens":1500,"ignore_eos":true})");
  });
  EXPECT_EQ(wait_metric(f.b_port, "prefixgate_peer_flights", 1), 1);
  EXPECT_EQ(wait_metric(f.b_port, f.inflight(), 1), 1);
  client.join();
  EXPECT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(wait_metric(f.b_port, "prefixgate_peer_flights", 0), 0);
  EXPECT_EQ(wait_metric(f.b_port, f.inflight(), 0), 0);
  // Routed and finished (an answer not streamed has no first token of its own to tell).
  EXPECT_EQ(metric_value(get(f.b_port, "/metrics").body, "prefixgate_peer_records_total"), 2);
  EXPECT_EQ(metric_value(get(f.b_port, "/metrics").body, "prefixgate_peers_live"), 1)
      << "a's heartbeats (the test's own socket has sent nothing yet)";
}

TEST(GatewayPeersTest, DatagramsFromAListedPeerApplyAndOthersAreCountedAndDropped) {
  PeeredPair f;
  // What a peer sends: a request routed to the engine (known by its URL's key), then its end.
  PeerSendWriter peer(0x1234);
  const std::vector<std::uint64_t> blocks{11, 12, 13};
  RouteRequest request;
  request.block_hashes = blocks;
  request.prompt_tokens = 48;
  RouteDecision decision;
  peer.routed(1, replica_key(upstream(f.engine_port)), request, decision);
  f.self.send_to(f.b_peer, peer.take().front());
  EXPECT_EQ(wait_metric(f.b_port, f.inflight(), 1), 1);
  EXPECT_EQ(wait_metric(f.b_port, "prefixgate_peer_flights", 1), 1);

  // The same datagram from a socket b does not list: dropped.
  UdpSocket stranger;
  peer.routed(2, replica_key(upstream(f.engine_port)), request, decision);
  stranger.send_to(f.b_peer, peer.take().front());
  EXPECT_EQ(wait_metric(f.b_port, "prefixgate_peer_strangers_total", 1), 1);
  // Garbage and a replica b does not list, from the listed socket: counted, nothing applied.
  f.self.send_to(f.b_peer, "PGPS\x01not a datagram");
  EXPECT_EQ(wait_metric(f.b_port, "prefixgate_peer_malformed_total", 1), 1);
  peer.routed(3, replica_key("http://10.9.9.9:1"), request, decision);
  f.self.send_to(f.b_peer, peer.take().front());
  EXPECT_EQ(wait_metric(f.b_port, "prefixgate_peer_unknown_replica_total", 1), 1);
  EXPECT_EQ(metric_value(get(f.b_port, "/metrics").body, f.inflight()), 1);

  peer.finished(1);
  f.self.send_to(f.b_peer, peer.take().front());
  EXPECT_EQ(wait_metric(f.b_port, f.inflight(), 0), 0);
  EXPECT_EQ(wait_metric(f.b_port, "prefixgate_peer_flights", 0), 0);
  // b still serves: its own requests are unaffected.
  EXPECT_EQ(post(f.b_port, "/v1/chat/completions", system_user_chat("s", "u")).status, 200);
}

}  // namespace
}  // namespace prefixgate::gateway::testing
