// Raw bytes into the gateway's HTTP listener (serving/'s server under the gateway's handler),
// over a real loopback socket: request lines, headers, chunked bodies, pipelined requests. The
// gateway runs in this process in front of one upstream that refuses connections, so a request
// that gets as far as routing is answered 502/503. Each input is written, the write side is shut,
// and the answer is read to the end: every response must be an HTTP/1.1 status line, and the
// gateway must close the connection within the deadline (a hang aborts the run).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>

#include "server/gateway.h"

namespace {

using namespace prefixgate::gateway;
using namespace std::chrono_literals;

constexpr auto kDeadline = 10s;  // far past the gateway's linger and its refused-upstream path

std::uint16_t start_gateway() {
  spdlog::set_level(spdlog::level::off);  // a refused request is logged; millions would be noise
  GatewayConfig config;
  config.host = "127.0.0.1";
  config.port = 0;
  config.threads = 2;
  // Port 1 on loopback: nothing listens there, every attempt is refused at once.
  auto up = parse_upstream_url("http://127.0.0.1:1");
  if (!up) std::abort();
  config.upstreams.push_back(*up);
  config.timeouts.client_idle = 2000ms;
  config.timeouts.client_request = 2000ms;
  config.limits.max_body_bytes = 1 << 16;
  config.limits.max_header_bytes = 1 << 13;
  config.tenants.tenant_header = "x-tenant";
  auto* gw = new server::Gateway(config);  // serves for the life of the process
  auto port = gw->start();
  if (!port) {
    std::fprintf(stderr, "fuzz_http: %s\n", port.error().message.c_str());
    std::abort();
  }
  std::thread([gw] { gw->run(); }).detach();
  return *port;
}

// A signal (libFuzzer's own timers) may interrupt connect(): a fresh socket is tried again.
int connect_to(std::uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
    const int error = errno;
    ::close(fd);
    if (error != EINTR) {
      std::fprintf(stderr, "fuzz_http: connect: %s\n", std::strerror(error));
      std::abort();
    }
  }
  std::fprintf(stderr, "fuzz_http: connect: interrupted 100 times\n");
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::uint16_t port = start_gateway();
  const int fd = connect_to(port);
  std::size_t sent = 0;
  while (sent < size) {
    const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the gateway answered and closed before reading it all
    sent += static_cast<std::size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string answer;
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left <= 0ms) {
      std::fprintf(stderr, "fuzz_http: the connection stayed open past the deadline\n");
      std::abort();
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // closed (or reset after the answer)
    answer.append(buf, static_cast<std::size_t>(n));
  }
  // Closed with a reset: a graceful close would leave this side's port in TIME_WAIT, and a
  // thousand connections a second exhaust the machine's ephemeral ports within a minute (other
  // programs on the machine then cannot connect or bind).
  const linger reset{.l_onoff = 1, .l_linger = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  ::close(fd);
  if (!answer.empty() && answer.rfind("HTTP/1.", 0) != 0) {
    std::fprintf(stderr, "fuzz_http: an answer that is not HTTP: %.60s\n", answer.c_str());
    std::abort();
  }
  return 0;
}
