// A TCP relay that holds every chunk of bytes it forwards, each way, for `delay` before writing
// it on: latency added in user space, for kernels without tc's netem. It is not packet latency:
// TCP on each side sees a fast loopback path (no longer round trips, no effect on congestion
// control, no loss or reordering); what it delays is when each side's bytes reach the other.
//
//   DelayRelay relay("10.77.2.2", 8000);          // listens on 127.0.0.1:relay.port()
//   relay.set_delay(std::chrono::milliseconds(100));
//   relay.stall_event_streams(true);  // hold what the target sends on GET /v1/kv_events
//                                     // connections (and nothing else) until set back
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace prefixgate::netns_testing {

class DelayRelay {
 public:
  DelayRelay(const std::string& target_addr, std::uint16_t target_port) {
    target_.sin_family = AF_INET;
    target_.sin_port = htons(target_port);
    inet_pton(AF_INET, target_addr.c_str(), &target_.sin_addr);
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(listen_fd_, 128) != 0 ||
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return;
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~DelayRelay() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (Pipe& p : pipes_) close_pipe(p);
    close(listen_fd_);
  }
  DelayRelay(const DelayRelay&) = delete;
  DelayRelay& operator=(const DelayRelay&) = delete;

  std::uint16_t port() const { return port_; }
  void set_delay(std::chrono::milliseconds d) { delay_ms_ = static_cast<int>(d.count()); }
  // While on, the target's bytes on connections whose request is GET /v1/kv_events are held
  // (queued, not dropped): a stalled event stream, while every other exchange goes through.
  void stall_event_streams(bool on) { stall_events_ = on; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Held {
    Clock::time_point due;
    std::string bytes;  // empty: the sender closed its side (shut down ours after the delay)
  };
  struct Pipe {
    int fd[2] = {-1, -1};        // 0: the client's (the gateway's), 1: the target's
    std::deque<Held> toward[2];  // toward[k]: bytes to write on fd[k]
    bool read_closed[2] = {false, false};
    bool write_closed[2] = {false, false};
    bool events = false;  // its first request is GET /v1/kv_events
    bool seen_request = false;
  };

  static void close_pipe(Pipe& p) {
    for (int& fd : p.fd) {
      if (fd >= 0) close(fd);
      fd = -1;
    }
  }

  void accept_one() {
    const int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) return;
    const int t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(t, reinterpret_cast<const sockaddr*>(&target_), sizeof target_) != 0) {
      close(c);
      close(t);
      return;
    }
    const int one = 1;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(t, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    Pipe p;
    p.fd[0] = c;
    p.fd[1] = t;
    pipes_.push_back(std::move(p));
  }

  // Writes what is due; returns false when the pipe is finished (both ways closed, or an error).
  bool flush(Pipe& p, Clock::time_point now) {
    for (int k = 0; k < 2; ++k) {
      if (k == 0 && p.events && stall_events_) continue;  // held toward the client
      std::deque<Held>& q = p.toward[k];
      while (!q.empty() && q.front().due <= now) {
        if (q.front().bytes.empty()) {
          shutdown(p.fd[k], SHUT_WR);
          p.write_closed[k] = true;
        } else {
          // Blocking writes of small chunks: the peers here read promptly.
          const std::string& b = q.front().bytes;
          for (std::size_t off = 0; off < b.size();) {
            const ssize_t n = send(p.fd[k], b.data() + off, b.size() - off, MSG_NOSIGNAL);
            if (n <= 0) return false;
            off += static_cast<std::size_t>(n);
          }
        }
        q.pop_front();
      }
    }
    return !(p.write_closed[0] && p.write_closed[1]);
  }

  void serve() {
    while (!stop_) {
      std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
      for (const Pipe& p : pipes_) {
        for (int k = 0; k < 2; ++k) {
          fds.push_back({p.fd[k], static_cast<short>(p.read_closed[k] ? 0 : POLLIN), 0});
        }
      }
      poll(fds.data(), fds.size(), 2);
      if (fds[0].revents & POLLIN) accept_one();
      const auto now = Clock::now();
      const auto due = now + std::chrono::milliseconds(delay_ms_.load());
      for (std::size_t i = 0; i + 1 < fds.size() && i / 2 < pipes_.size(); ++i) {
        Pipe& p = pipes_[i / 2];
        const int k = static_cast<int>(i % 2);
        if (p.read_closed[k] || !(fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        char buf[16384];
        const ssize_t n = recv(p.fd[k], buf, sizeof buf, 0);
        if (n > 0) {
          if (k == 0 && !p.seen_request) {
            p.seen_request = true;
            p.events =
                std::string_view(buf, static_cast<std::size_t>(n)).starts_with("GET /v1/kv_events");
          }
          p.toward[1 - k].push_back({due, std::string(buf, static_cast<std::size_t>(n))});
        } else {
          p.read_closed[k] = true;
          p.toward[1 - k].push_back({due, std::string()});
        }
      }
      for (Pipe& p : pipes_) {
        if (!flush(p, now)) close_pipe(p);
      }
      std::erase_if(pipes_, [](const Pipe& p) { return p.fd[0] < 0; });
    }
  }

  sockaddr_in target_{};
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<int> delay_ms_{0};
  std::atomic<bool> stall_events_{false};
  std::atomic<bool> stop_{false};
  std::vector<Pipe> pipes_;  // the relay thread's only
  std::thread thread_;
};

}  // namespace prefixgate::netns_testing
