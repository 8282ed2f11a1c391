#include "server/upstream_pool.h"

#include <sys/socket.h>

#include <boost/asio/execution/context.hpp>
#include <boost/asio/query.hpp>
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

const boost::asio::execution_context* event_loop_of(const boost::asio::any_io_executor& ex) {
  return &boost::asio::query(ex, boost::asio::execution::context);
}

}  // namespace

UpstreamPool::UpstreamPool(std::size_t replicas, std::size_t max_idle_per_replica,
                           Clock::duration recheck_after)
    : max_idle_(max_idle_per_replica), recheck_after_(recheck_after), idle_(replicas) {}

UpstreamPool::Stream UpstreamPool::take_idle(ReplicaId replica,
                                             const boost::asio::any_io_executor& executor) {
  const boost::asio::execution_context* loop = event_loop_of(executor);
  for (;;) {
    Stream stream;
    bool recheck = false;
    {
      std::lock_guard lock(mu_);
      auto& list = idle_[replica];
      // Most recently used first: the least likely to have timed out.
      auto it = list.rbegin();
      while (it != list.rend() && event_loop_of(it->stream->get_executor()) != loop) ++it;
      if (it == list.rend()) return nullptr;
      recheck = Clock::now() - it->since >= recheck_after_;
      stream = std::move(it->stream);
      list.erase(std::next(it).base());
    }
    if (!recheck || still_idle(stream->socket())) return stream;
    // Closed by the peer while idle: the stream's destructor closes our end.
  }
}

void UpstreamPool::give_back(ReplicaId replica, Stream stream) {
  if (stream == nullptr || !stream->socket().is_open()) return;
  std::lock_guard lock(mu_);
  auto& list = idle_[replica];
  if (list.size() < max_idle_) list.push_back(Idle{std::move(stream), Clock::now()});
  // Over the limit: the stream closes as it goes out of scope.
}

void UpstreamPool::clear(ReplicaId replica) {
  std::vector<Idle> dropped;
  {
    std::lock_guard lock(mu_);
    dropped.swap(idle_[replica]);
  }
  // Closed here, outside the lock, as `dropped` goes out of scope.
}

}  // namespace prefixgate::gateway::server
