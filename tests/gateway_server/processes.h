// Real processes for the gateway tests: prefixgate-engine replicas and the prefixgate binary,
// on loopback ports the OS picks (each prints "listening on http://HOST:PORT"), and a small
// HTTP client with headers and a deadline.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace prefixgate::gateway::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

// A child process whose stdout+stderr we read. Killed (SIGKILL) when destroyed.
class Process {
 public:
  Process(std::string binary, std::vector<std::string> args) {
    args.insert(args.begin(), std::move(binary));
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      close(fds[0]);
      close(fds[1]);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    out_ = fds[0];
  }
  ~Process() {
    kill(SIGKILL);
    wait();
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // Reads output until "listening on http://HOST:PORT"; returns the port, 0 on timeout/exit.
  std::uint16_t wait_listening(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    static const std::regex re(R"(listening on http://[^:\s]+:(\d+))");
    std::smatch m;
    if (!read_until(re, m, timeout)) return 0;
    return static_cast<std::uint16_t>(std::stoi(m[1].str()));
  }
  bool read_until(const std::regex& re, std::smatch& m, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (std::regex_search(output_, m, re)) return true;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || out_ < 0) return false;
      pollfd pfd{out_, POLLIN, 0};
      if (poll(&pfd, 1, static_cast<int>(left.count())) <= 0) return false;
      char buf[4096];
      const ssize_t n = read(out_, buf, sizeof buf);
      if (n <= 0) return false;
      output_.append(buf, static_cast<std::size_t>(n));
    }
  }
  void kill(int signal) {
    if (pid_ > 0 && !exited_) ::kill(pid_, signal);
  }
  int wait() {
    if (pid_ <= 0 || exited_) return status_;
    int status = 0;
    waitpid(pid_, &status, 0);
    return reap(status);
  }
  // Waits up to `timeout` for the process to exit by itself; -1 while it is still running.
  int wait_for(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (pid_ > 0 && !exited_) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) return reap(status);
      if (std::chrono::steady_clock::now() >= deadline) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return status_;
  }
  const std::string& output() const { return output_; }

 private:
  int reap(int status) {
    exited_ = true;
    if (out_ >= 0) {
      char buf[4096];
      for (ssize_t n; (n = read(out_, buf, sizeof buf)) > 0;) {
        output_.append(buf, static_cast<std::size_t>(n));
      }
      close(out_);
      out_ = -1;
    }
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return status_;
  }

  pid_t pid_ = -1;
  int out_ = -1;
  std::string output_;
  bool exited_ = false;
  int status_ = -1;
};

inline std::unique_ptr<Process> start_engine(std::uint16_t& port,
                                             const std::string& speedup = "inf") {
  auto p = std::make_unique<Process>(
      PREFIXGATE_ENGINE_BIN,
      std::vector<std::string>{"--device", "sim", "--sim-profile", "h100:builtin:tiny",
                               "--sim-speedup", speedup, "--port", "0", "--log-level", "warn"});
  port = p->wait_listening();
  return p;
}

inline std::unique_ptr<Process> start_gateway(std::uint16_t& port, std::vector<std::string> args,
                                              const std::string& log_level = "warn") {
  args.insert(args.begin(), {"--listen", "127.0.0.1:0", "--log-level", log_level});
  auto p = std::make_unique<Process>(PREFIXGATE_GATEWAY_BIN, std::move(args));
  port = p->wait_listening();
  return p;
}

// Writes a gateway YAML config under the test temp dir; returns its path.
inline std::string write_config(const std::string& name, const std::string& yaml) {
  const std::string path =
      ::testing::TempDir() + "prefixgate-" + std::to_string(getpid()) + "-" + name + ".yaml";
  std::ofstream(path) << yaml;
  return path;
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

// One request on a fresh connection, bounded by `timeout`.
inline Reply call(std::uint16_t port, http::verb verb, const std::string& target,
                  const std::string& body = {},
                  const std::map<std::string, std::string>& headers = {},
                  std::chrono::seconds timeout = std::chrono::seconds(30)) {
  asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  Reply reply;
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, "127.0.0.1");
  for (const auto& [k, v] : headers) req.set(k, v);
  if (verb == http::verb::post) {
    if (headers.find("content-type") == headers.end()) {
      req.set(http::field::content_type, "application/json");
    }
    req.body() = body;
    req.prepare_payload();
  }
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  stream.expires_after(timeout);
  stream.async_connect({asio::ip::make_address("127.0.0.1"), port}, [&](beast::error_code ec) {
    if (ec) return;
    // A server may answer before it has read the whole request (413): read even if the
    // write failed.
    http::async_write(stream, req, [&](beast::error_code, std::size_t) {
      http::async_read(stream, buffer, parser,
                       [&](beast::error_code rec, std::size_t) { reply.ok = !rec; });
    });
  });
  ioc.run();
  if (parser.is_header_done()) {
    reply.status = static_cast<int>(parser.get().result_int());
    for (const auto& f : parser.get()) {
      std::string name(f.name_string());
      for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      reply.headers[name] = std::string(f.value());
    }
    reply.body = parser.get().body();
  }
  return reply;
}

inline Reply post(std::uint16_t port, const std::string& target, const std::string& body,
                  const std::map<std::string, std::string>& headers = {}) {
  return call(port, http::verb::post, target, body, headers);
}
inline Reply get(std::uint16_t port, const std::string& target) {
  return call(port, http::verb::get, target);
}

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
