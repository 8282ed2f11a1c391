#include "server/upstream_pool.h"

#include <sys/socket.h>

#include <cerrno>

namespace prefixgate::gateway::server {
namespace {

// An idle HTTP/1.1 connection has nothing to read: EOF means the peer closed it, data means
// it is out of step. Either way it is not reusable.
bool still_idle(boost::asio::ip::tcp::socket& socket) {
  char byte = 0;
  const ssize_t n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace

UpstreamPool::UpstreamPool(std::size_t replicas, std::size_t max_idle_per_replica)
    : max_idle_(max_idle_per_replica), idle_(replicas) {}

std::optional<boost::asio::ip::tcp::socket> UpstreamPool::take_idle(ReplicaId replica) {
  for (;;) {
    std::optional<boost::asio::ip::tcp::socket> socket;
    {
      std::lock_guard lock(mu_);
      auto& list = idle_[replica];
      if (list.empty()) return std::nullopt;
      socket.emplace(std::move(list.back()));  // most recently used: least likely timed out
      list.pop_back();
    }
    if (still_idle(*socket)) return socket;
    // Closed by the peer while idle: the socket's destructor closes our end.
  }
}

void UpstreamPool::give_back(ReplicaId replica, boost::asio::ip::tcp::socket socket) {
  if (!socket.is_open()) return;
  std::lock_guard lock(mu_);
  auto& list = idle_[replica];
  if (list.size() < max_idle_) list.push_back(std::move(socket));
  // Over the limit: the socket closes as it goes out of scope.
}

void UpstreamPool::clear(ReplicaId replica) {
  std::vector<boost::asio::ip::tcp::socket> dropped;
  {
    std::lock_guard lock(mu_);
    dropped.swap(idle_[replica]);
  }
  // Closed here, outside the lock, as `dropped` goes out of scope.
}

}  // namespace prefixgate::gateway::server
