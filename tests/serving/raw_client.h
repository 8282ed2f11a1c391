// A blocking TCP client that sends exact bytes and reads what comes back, for tests of what a
// server does with malformed, oversized, slow or vanishing clients. Every read has a deadline,
// so a server that hangs fails the test instead of hanging it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace prefixgate::testing {

class RawClient {
 public:
  explicit RawClient(std::uint16_t port,
                     std::chrono::milliseconds read_timeout = std::chrono::seconds(10)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(read_timeout.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((read_timeout.count() % 1000) * 1000);
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawClient() { close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }

  // False once the peer has closed or reset the connection.
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  // Reads until the peer closes, the deadline passes, or `text` has arrived in full.
  std::string read_until_close_or(std::string_view stop = {}) {
    char buf[8192];
    for (;;) {
      if (!stop.empty() && received_.find(stop) != std::string::npos) break;
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n > 0) {
        received_.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      closed_by_peer_ = n == 0 || errno == ECONNRESET;
      timed_out_ = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
      break;
    }
    return received_;
  }

  // Reads one complete response with a Content-Length body (the servers' plain answers).
  std::string read_response() {
    for (;;) {
      const std::size_t head_end = received_.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        std::size_t length = 0;
        const std::size_t cl = lower(received_.substr(0, head_end)).find("content-length:");
        if (cl != std::string::npos) length = std::stoul(received_.substr(cl + 15));
        if (received_.size() >= head_end + 4 + length) {
          std::string out = received_.substr(0, head_end + 4 + length);
          received_.erase(0, out.size());
          return out;
        }
      }
      const std::size_t before = received_.size();
      read_more();
      if (received_.size() == before) return {};
    }
  }

  bool closed_by_peer() const { return closed_by_peer_; }
  bool timed_out() const { return timed_out_; }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  static std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return s;
  }
  void read_more() {
    char buf[8192];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n > 0) {
      received_.append(buf, static_cast<std::size_t>(n));
    } else {
      closed_by_peer_ = n == 0 || errno == ECONNRESET;
      timed_out_ = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
  }

  int fd_ = -1;
  bool connected_ = false;
  bool closed_by_peer_ = false;
  bool timed_out_ = false;
  std::string received_;
};

// The status code of a raw response ("HTTP/1.1 413 ..." -> 413), 0 if none.
inline int status_of(std::string_view response) {
  if (!response.starts_with("HTTP/1.")) return 0;
  return std::stoi(std::string(response.substr(9, 3)));
}

inline std::string body_of(std::string_view response) {
  const std::size_t end = response.find("\r\n\r\n");
  return end == std::string_view::npos ? std::string() : std::string(response.substr(end + 4));
}

}  // namespace prefixgate::testing
