// Idle keep-alive connections to each replica, shared by every client connection.
//
// A pooled connection is kept as a bare file descriptor, and re-homed on the executor (the
// strand) of the connection coroutine that takes it: an Asio socket is bound to one executor,
// and its operations, deadline timer included, must run there. Re-homing costs one epoll
// registration; a fresh TCP connection costs a handshake.
//
//   UpstreamPool pool(replica_count, max_idle_per_replica);
//   if (auto s = pool.take_idle(r, ex)) use(*s); else connect();
//   pool.give_back(r, std::move(socket));   // only after a complete keep-alive response
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstddef>
#include <mutex>
#include <optional>
#include <vector>

#include "prefixgate/gateway/prefix_index.h"

namespace prefixgate::gateway::server {

class UpstreamPool {
 public:
  UpstreamPool(std::size_t replicas, std::size_t max_idle_per_replica);
  ~UpstreamPool();
  UpstreamPool(const UpstreamPool&) = delete;
  UpstreamPool& operator=(const UpstreamPool&) = delete;

  // A live idle connection to `replica`, bound to `executor`; nullopt when none is left.
  // Connections the peer closed while idle are dropped here.
  std::optional<boost::asio::ip::tcp::socket> take_idle(
      ReplicaId replica, const boost::asio::any_io_executor& executor);
  void give_back(ReplicaId replica, boost::asio::ip::tcp::socket socket);
  // Drops every idle connection of `replica` (it was ejected or restarted).
  void clear(ReplicaId replica);

 private:
  struct Idle {
    boost::asio::ip::tcp protocol = boost::asio::ip::tcp::v4();
    int fd = -1;
  };
  std::size_t max_idle_;
  std::mutex mu_;
  std::vector<std::vector<Idle>> idle_;
};

}  // namespace prefixgate::gateway::server
