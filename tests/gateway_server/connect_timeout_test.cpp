// The connect timeout, for real: an upstream that passed its health check and then stops taking
// connections (its accept queue full, so the kernel drops new SYNs and connect() hangs, as it
// does for a host that has gone away). The gateway must give up after timeouts.connect and
// answer 504, not wait for the kernel's minutes of SYN retries.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gateway_server/processes.h"

namespace prefixgate::gateway::testing {
namespace {

int listen_on(std::uint16_t port, int backlog) {
  // CLOEXEC: the gateway is started after this and must not inherit the listener.
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, backlog) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

std::uint16_t port_of(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

// Answers health checks (closing each connection, so the gateway pools none) until go_dark():
// then a listener that never accepts takes the port and its accept queue is filled.
class VanishingUpstream {
 public:
  VanishingUpstream() {
    fd_ = listen_on(0, 16);
    if (fd_ < 0) return;
    port_ = port_of(fd_);
    thread_ = std::thread([this] { serve(); });
  }
  ~VanishingUpstream() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (int fd : fillers_) close(fd);
    if (fd_ >= 0) close(fd_);
  }
  std::uint16_t port() const { return port_; }

  // Makes a connect() to the port hang; returns "" or what went wrong.
  std::string go_dark() {
    stop_ = true;
    thread_.join();
    close(fd_);
    fd_ = listen_on(port_, 0);
    if (fd_ < 0) return std::string("cannot listen again: ") + std::strerror(errno);
    // Fill the accept queue (backlog 0 holds one or two): connect until one does not complete.
    for (int i = 0; i < 8; ++i) {
      const int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(port_);
      connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
      fillers_.push_back(c);
      pollfd p{c, POLLOUT, 0};
      if (poll(&p, 1, 200) == 0) return "";  // this SYN was dropped: the port is dark
    }
    return "every connect completed: the kernel did not drop SYNs";
  }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      char buf[4096];
      (void)!read(c, buf, sizeof buf);
      static const std::string ok =
          "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 15\r\n"
          "connection: close\r\n\r\n{\"status\":\"ok\"}";
      (void)!write(c, ok.data(), ok.size());
      close(c);
    }
  }

  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<int> fillers_;
};

TEST(GatewayConnectTimeoutTest, UnreachableUpstreamGets504AfterTheConnectTimeout) {
  VanishingUpstream upstream_server;
  ASSERT_NE(upstream_server.port(), 0);
  // kind openai: no kv_events subscription, only health checks; the next one is a minute away.
  const std::string config = write_config(
      "connect-timeout", "upstreams:\n  - url: " + upstream(upstream_server.port()) +
                             "\n    kind: openai\n"
                             "timeouts: {connect_ms: 300, health_interval_ms: 60000}\n");
  std::uint16_t port = 0;
  auto gw = start_gateway(port, {"--config", config});
  ASSERT_NE(port, 0) << gw->output();
  ASSERT_TRUE(wait_healthy(port, 1));
  const std::string dark = upstream_server.go_dark();
  ASSERT_EQ(dark, "") << "could not make the port drop connections";

  const Reply r =
      post(port, "/v1/chat/completions",
           R"({"messages":[{"role":"user","content":"anyone there?"}],"max_tokens":2})");
  EXPECT_TRUE(r.ok) << "no complete answer: the gateway hung";
  EXPECT_EQ(r.status, 504) << r.body;
  EXPECT_NE(r.body.find("upstream_timeout"), std::string::npos) << r.body;
  const Reply metrics = get(port, "/metrics");
  EXPECT_NE(metrics.body.find("prefixgate_upstream_failures_total{replica=\"" +
                              upstream(upstream_server.port()) + "\",kind=\"timeout\"}"),
            std::string::npos)
      << metrics.body;
}

}  // namespace
}  // namespace prefixgate::gateway::testing
