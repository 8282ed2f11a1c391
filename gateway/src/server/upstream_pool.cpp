#include "server/upstream_pool.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace prefixgate::gateway::server {
namespace {

// An idle HTTP/1.1 connection has nothing to read: EOF means the peer closed it, data means
// it is out of step. Either way it is not reusable.
bool still_idle(int fd) {
  char byte = 0;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace

UpstreamPool::UpstreamPool(std::size_t replicas, std::size_t max_idle_per_replica)
    : max_idle_(max_idle_per_replica), idle_(replicas) {}

UpstreamPool::~UpstreamPool() {
  for (auto& list : idle_) {
    for (const Idle& i : list) ::close(i.fd);
  }
}

std::optional<boost::asio::ip::tcp::socket> UpstreamPool::take_idle(
    ReplicaId replica, const boost::asio::any_io_executor& executor) {
  for (;;) {
    Idle idle;
    {
      std::lock_guard lock(mu_);
      auto& list = idle_[replica];
      if (list.empty()) return std::nullopt;
      idle = list.back();  // most recently used: the least likely to have timed out
      list.pop_back();
    }
    if (!still_idle(idle.fd)) {
      ::close(idle.fd);
      continue;
    }
    boost::asio::ip::tcp::socket socket(executor);
    boost::system::error_code ec;
    socket.assign(idle.protocol, idle.fd, ec);
    if (ec) {
      ::close(idle.fd);
      continue;
    }
    return socket;
  }
}

void UpstreamPool::give_back(ReplicaId replica, boost::asio::ip::tcp::socket socket) {
  boost::system::error_code ec;
  const auto protocol = socket.local_endpoint(ec).protocol();
  if (ec) return;
  const int fd = socket.release(ec);
  if (ec) return;
  std::lock_guard lock(mu_);
  auto& list = idle_[replica];
  if (list.size() >= max_idle_) {
    ::close(fd);
    return;
  }
  list.push_back({protocol, fd});
}

void UpstreamPool::clear(ReplicaId replica) {
  std::vector<Idle> dropped;
  {
    std::lock_guard lock(mu_);
    dropped.swap(idle_[replica]);
  }
  for (const Idle& i : dropped) ::close(i.fd);
}

}  // namespace prefixgate::gateway::server
