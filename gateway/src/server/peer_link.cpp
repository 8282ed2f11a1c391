#include "server/peer_link.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "host_port.h"

namespace prefixgate::gateway::server {
namespace {

// A socket address's IP and port, to compare a datagram's source with the peers': a peer sends
// from the port it listens on, so another process on its host is not taken for it.
std::string address_bytes(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    return std::string(reinterpret_cast<const char*>(&v4.sin_addr), sizeof v4.sin_addr) +
           std::string(reinterpret_cast<const char*>(&v4.sin_port), sizeof v4.sin_port);
  }
  if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    return std::string(reinterpret_cast<const char*>(&v6.sin6_addr), sizeof v6.sin6_addr) +
           std::string(reinterpret_cast<const char*>(&v6.sin6_port), sizeof v6.sin6_port);
  }
  return {};
}

struct Peer {
  sockaddr_storage address{};
  socklen_t length = 0;
};

}  // namespace

struct PeerLink::Impl {
  ReplicaSet& replicas;
  PeerConfig config;
  int fd = -1;
  int wake_fd = -1;  // an eventfd: the ReplicaSet wrote for the peers, or stop()
  std::vector<Peer> peers;
  std::vector<std::string> allowed;  // address_bytes of each peer
  std::thread thread;
  std::atomic<bool> stopping{false};
  std::atomic<std::uint64_t> sent{0}, send_errors{0}, received{0}, strangers{0}, malformed{0};
  std::string heartbeat;

  Impl(ReplicaSet& r, PeerConfig c) : replicas(r), config(std::move(c)) {}

  Status resolve_peers(int family) {
    for (std::size_t i = 0; i < config.addresses.size(); ++i) {
      const std::string param = "peers.addresses[" + std::to_string(i) + "]";
      const std::string& text = config.addresses[i];
      std::string host;
      std::uint16_t port = 0;
      if (Status st = split_host_port(text, param, 1, host, port); !st) return st;
      addrinfo hints{};
      hints.ai_family = family;
      hints.ai_socktype = SOCK_DGRAM;
      addrinfo* found = nullptr;
      const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
      if (rc != 0 || found == nullptr) {
        return config_error(param,
                            "cannot resolve '" + text + "' for the peer listener's address family" +
                                (rc != 0 ? std::string(": ") + gai_strerror(rc) : std::string()));
      }
      Peer p;
      std::memcpy(&p.address, found->ai_addr, found->ai_addrlen);
      p.length = found->ai_addrlen;
      freeaddrinfo(found);
      allowed.push_back(address_bytes(p.address));
      peers.push_back(p);
    }
    return {};
  }

  void send_all(const std::string& datagram) {
    for (const Peer& p : peers) {
      const ssize_t n = ::sendto(fd, datagram.data(), datagram.size(), MSG_DONTWAIT,
                                 reinterpret_cast<const sockaddr*>(&p.address), p.length);
      if (n < 0) {
        send_errors.fetch_add(1, std::memory_order_relaxed);
      } else {
        sent.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }

  void receive_all(std::string& buffer) {
    while (true) {
      sockaddr_storage from{};
      socklen_t from_length = sizeof from;
      const ssize_t n = ::recvfrom(fd, buffer.data(), buffer.size(), MSG_DONTWAIT,
                                   reinterpret_cast<sockaddr*>(&from), &from_length);
      if (n < 0) return;  // EAGAIN: nothing more now (or an error the next poll shows again)
      const std::string source = address_bytes(from);
      if (std::find(allowed.begin(), allowed.end(), source) == allowed.end()) {
        strangers.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      received.fetch_add(1, std::memory_order_relaxed);
      if (Status s = replicas.apply_peer_datagram(
              std::string_view(buffer.data(), static_cast<std::size_t>(n)));
          !s) {
        malformed.fetch_add(1, std::memory_order_relaxed);
        spdlog::debug("peer datagram refused: {}", s.error().message);
      }
    }
  }

  void wake() const {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd, &one, sizeof one);
  }

  // Sleeps until a datagram comes, the ReplicaSet wakes it or a timer is due. What the
  // ReplicaSet writes is sent flush_us after the first of it (the rest of a burst joins it).
  void run() {
    using Clock = std::chrono::steady_clock;
    const auto flush = std::chrono::microseconds(config.flush_us);
    // Heartbeats often enough that a live peer is never timed out between two of them.
    const auto heartbeat_every = std::min<Clock::duration>(
        std::chrono::seconds(1), std::chrono::milliseconds(config.timeout_ms) / 4);
    std::string buffer(65536, '\0');
    auto last_sent = Clock::time_point{};
    auto next_expiry = Clock::now() + std::chrono::seconds(1);
    constexpr Clock::time_point kNothingToSend = Clock::time_point::max();
    Clock::time_point send_at = kNothingToSend;
    while (!stopping.load(std::memory_order_relaxed)) {
      auto now = Clock::now();
      Clock::time_point until = std::min(last_sent + heartbeat_every, next_expiry);
      until = std::min(until, send_at);
      const auto wait = std::max<Clock::duration>(Clock::duration::zero(), until - now);
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
      const timespec timeout{static_cast<time_t>(ns / 1000000000),
                             static_cast<long>(ns % 1000000000)};
      std::array<pollfd, 2> pfds{pollfd{fd, POLLIN, 0}, pollfd{wake_fd, POLLIN, 0}};
      if (::ppoll(pfds.data(), pfds.size(), &timeout, nullptr) > 0) {
        if (pfds[0].revents & POLLIN) receive_all(buffer);
        if (pfds[1].revents & POLLIN) {
          std::uint64_t count = 0;
          [[maybe_unused]] const ssize_t n = ::read(wake_fd, &count, sizeof count);
          if (send_at == kNothingToSend) send_at = Clock::now() + flush;
        }
      }
      now = Clock::now();
      if (now >= send_at) {
        send_at = kNothingToSend;
        for (const std::string& datagram : replicas.take_peer_datagrams()) {
          send_all(datagram);
          last_sent = now;
        }
      }
      if (now - last_sent >= heartbeat_every) {
        send_all(heartbeat);
        last_sent = now;
      }
      if (now >= next_expiry) {
        replicas.expire_peer_flights();
        next_expiry = now + std::chrono::seconds(1);
      }
    }
  }
};

PeerLink::PeerLink(ReplicaSet& replicas, PeerConfig config)
    : impl_(std::make_unique<Impl>(replicas, std::move(config))) {}

PeerLink::~PeerLink() {
  stop();
}

Result<std::uint16_t> PeerLink::start() {
  Impl& s = *impl_;
  sockaddr_storage listen{};
  socklen_t listen_length = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&listen);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&listen);
  if (inet_pton(AF_INET, s.config.host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(s.config.port);
    listen_length = sizeof *v4;
  } else if (inet_pton(AF_INET6, s.config.host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(s.config.port);
    listen_length = sizeof *v6;
  } else {
    return config_error("peers.listen", "'" + s.config.host + "' is not an IP address");
  }
  if (Status st = s.resolve_peers(listen.ss_family); !st) return st.error();
  s.wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (s.wake_fd < 0)
    return config_error("peers.listen", std::string("eventfd: ") + std::strerror(errno));
  s.fd = ::socket(listen.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s.fd < 0) return config_error("peers.listen", std::string("socket: ") + std::strerror(errno));
  // Room for a burst of peers' datagrams while the thread applies the ones before.
  const int buffer_bytes = 4 << 20;
  ::setsockopt(s.fd, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof buffer_bytes);
  if (::bind(s.fd, reinterpret_cast<const sockaddr*>(&listen), listen_length) != 0) {
    const std::string why = std::strerror(errno);
    ::close(s.fd);
    s.fd = -1;
    return config_error("peers.listen", "cannot bind " + s.config.host + ":" +
                                            std::to_string(s.config.port) + " (UDP): " + why);
  }
  sockaddr_storage bound{};
  socklen_t bound_length = sizeof bound;
  ::getsockname(s.fd, reinterpret_cast<sockaddr*>(&bound), &bound_length);
  const std::uint16_t port =
      ntohs(bound.ss_family == AF_INET ? reinterpret_cast<const sockaddr_in&>(bound).sin_port
                                       : reinterpret_cast<const sockaddr_in6&>(bound).sin6_port);
  std::random_device entropy;
  const std::uint64_t origin = (std::uint64_t{entropy()} << 32) | entropy();
  PeerLedgerConfig ledger;
  ledger.peer_timeout = std::chrono::milliseconds(s.config.timeout_ms);
  s.replicas.enable_peers(origin, ledger);
  s.replicas.set_peer_wake([&s] { s.wake(); });
  s.heartbeat = PeerSendWriter(origin).heartbeat();
  s.thread = std::thread([&s] { s.run(); });
  return port;
}

void PeerLink::stop() {
  Impl& s = *impl_;
  s.stopping.store(true);
  if (s.thread.joinable()) {
    s.wake();
    s.thread.join();
  }
  if (s.fd >= 0) ::close(s.fd);
  s.fd = -1;
}

void PeerLink::register_metrics(serving::Metrics& metrics) {
  using serving::MetricType;
  Impl* s = impl_.get();
  const auto atomic = [&](const char* name, const char* help, std::atomic<std::uint64_t>* v) {
    metrics.callback(name, help, MetricType::kCounter,
                     [v] { return static_cast<double>(v->load(std::memory_order_relaxed)); });
  };
  atomic("prefixgate_peer_datagrams_sent_total",
         "Datagrams sent to peer gateways (sends, first tokens, ends, heartbeats), per peer.",
         &s->sent);
  atomic("prefixgate_peer_send_errors_total", "Datagrams to a peer that the socket refused.",
         &s->send_errors);
  atomic("prefixgate_peer_datagrams_received_total", "Datagrams received from listed peers.",
         &s->received);
  atomic("prefixgate_peer_strangers_total",
         "Datagrams from addresses not listed as peers (dropped).", &s->strangers);
  atomic("prefixgate_peer_malformed_total", "Peers' datagrams that did not parse (dropped).",
         &s->malformed);
  ReplicaSet* replicas = &s->replicas;
  const auto stat = [&](const char* name, const char* help, MetricType type, auto field) {
    metrics.callback(name, help, type, [replicas, field] {
      return static_cast<double>(field(replicas->peer_stats()));
    });
  };
  using Stats = ReplicaSet::PeerStats;
  stat("prefixgate_peer_records_total", "Sends, first tokens and ends applied from peers.",
       MetricType::kCounter, [](const Stats& p) { return p.counters.records; });
  stat("prefixgate_peer_unknown_replica_total",
       "Peers' sends to a replica this gateway does not list (its URL differs).",
       MetricType::kCounter, [](const Stats& p) { return p.counters.unknown_replica; });
  stat("prefixgate_peer_expired_total",
       "Peers' requests ended here because the peer went quiet or their end never came.",
       MetricType::kCounter, [](const Stats& p) { return p.counters.expired; });
  stat("prefixgate_peer_flights", "Peers' requests in flight, as this gateway counts them.",
       MetricType::kGauge, [](const Stats& p) { return p.flights; });
  stat("prefixgate_peers_live", "Peers heard from within peers.timeout_ms.", MetricType::kGauge,
       [](const Stats& p) { return p.live_peers; });
}

}  // namespace prefixgate::gateway::server
