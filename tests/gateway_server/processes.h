// Real processes for the gateway tests: prefixgate-engine replicas and the prefixgate binary,
// on loopback ports the OS picks (each prints "listening on http://HOST:PORT"), and a small
// HTTP client with headers and a deadline.
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "prefixgate/process/process.h"

namespace prefixgate::gateway::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

// A child process whose stdout+stderr we read. Killed (SIGKILL) when destroyed.
using Process = proc::Process;

// The binaries under test: the build's own, or those named by PREFIXGATE_GATEWAY_BIN /
// PREFIXGATE_ENGINE_BIN in the environment (scripts/test.sh drives ThreadSanitizer builds of the
// servers with these tests this way: every gateway test talks to the gateway as a process).
inline std::string binary_under_test(const char* env, const char* built) {
  const char* chosen = std::getenv(env);
  return chosen != nullptr && *chosen != '\0' ? chosen : built;
}
inline std::string gateway_bin() {
  return binary_under_test("PREFIXGATE_GATEWAY_BIN", PREFIXGATE_GATEWAY_BIN);
}
inline std::string engine_bin() {
  return binary_under_test("PREFIXGATE_ENGINE_BIN", PREFIXGATE_ENGINE_BIN);
}

// A sim replica of builtin:tiny; `extra` flags go last (a --tokenizer, say).
inline std::unique_ptr<Process> start_engine(std::uint16_t& port,
                                             const std::string& speedup = "inf",
                                             const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args{"--device",      "sim",   "--sim-profile", "h100:builtin:tiny",
                                "--sim-speedup", speedup, "--port",        "0",
                                "--log-level",   "warn"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto p = std::make_unique<Process>(engine_bin(), std::move(args));
  port = p->wait_listening();
  return p;
}

inline std::unique_ptr<Process> start_gateway(std::uint16_t& port, std::vector<std::string> args,
                                              const std::string& log_level = "warn") {
  args.insert(args.begin(), {"--listen", "127.0.0.1:0", "--log-level", log_level});
  auto p = std::make_unique<Process>(gateway_bin(), std::move(args));
  port = p->wait_listening();
  return p;
}

// The configs write_config() wrote, removed when the test program exits.
struct WrittenConfigs {
  std::set<std::string> paths;
  ~WrittenConfigs() {
    for (const std::string& path : paths) std::remove(path.c_str());
  }
};

// Writes a gateway YAML config under the test temp dir; returns its path.
inline std::string write_config(const std::string& name, const std::string& yaml) {
  static WrittenConfigs written;
  const std::string path =
      ::testing::TempDir() + "prefixgate-" + std::to_string(getpid()) + "-" + name + ".yaml";
  std::ofstream(path) << yaml;
  written.paths.insert(path);
  return path;
}

// A listening TCP socket on 127.0.0.1 at a free port, for a test's own upstream; -1 (and port
// 0) when the system refuses one.
inline int listen_on_loopback(std::uint16_t& port) {
  port = 0;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  port = ntohs(addr.sin_port);
  return fd;
}

inline std::string upstream(std::uint16_t port) {
  return "http://127.0.0.1:" + std::to_string(port);
}

struct Reply {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
  bool ok = false;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// One request on a fresh connection, bounded by `timeout`. Compiled once, in processes.cpp: the
// Beast client is most of a test file's compile time when every file instantiates it.
Reply call(std::uint16_t port, http::verb verb, const std::string& target,
           const std::string& body = {}, const std::map<std::string, std::string>& headers = {},
           std::chrono::seconds timeout = std::chrono::seconds(30));
// The same, to `host` (an IP address) rather than 127.0.0.1.
Reply call_host(const std::string& host, std::uint16_t port, http::verb verb,
                const std::string& target, const std::string& body = {},
                const std::map<std::string, std::string>& headers = {},
                std::chrono::seconds timeout = std::chrono::seconds(30));

inline Reply post(std::uint16_t port, const std::string& target, const std::string& body,
                  const std::map<std::string, std::string>& headers = {}) {
  return call(port, http::verb::post, target, body, headers);
}
inline Reply get(std::uint16_t port, const std::string& target) {
  return call(port, http::verb::get, target);
}

// A chat body for builtin:tiny: a system and a user message, 2 tokens at temperature 0, and
// `extra` (`"key":value` members) appended to the object.
std::string system_user_chat(const std::string& system, const std::string& user,
                             const std::string& extra = {});

// The value of `series` (a name, with its labels when it has some: `x{tenant="a"}`) in
// Prometheus text, -1 when no line has it.
double metric_value(const std::string& text, const std::string& series);

// Runs a shell command (stderr folded into stdout); returns its exit status (128 + signal when
// killed) and appends its output. For the tests that drive node clients.
int run_command(const std::string& command, std::string& output);

// The folder of the node client scripts (tests/js). Empty, with `why` saying what is missing,
// when node or one of `packages` is not installed (scripts/install-js-deps.sh installs them).
std::filesystem::path node_clients(std::initializer_list<const char*> packages, std::string& why);

// Polls until the gateway reports a healthy upstream (or `want` of them).
inline bool wait_healthy(std::uint16_t port, std::size_t want = 1,
                         std::chrono::seconds timeout = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    const Reply r = get(port, "/health");
    const std::string needle = "\"healthy_upstreams\":" + std::to_string(want);
    if (r.status == 200 && r.body.find(needle) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling, not synchronizing
  }
  return false;
}

}  // namespace prefixgate::gateway::testing
