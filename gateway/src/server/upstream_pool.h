// Idle keep-alive connections to each replica, shared by every client connection.
//
// A pooled connection stays an open Asio socket, registered with the io_context's reactor, so
// taking and returning one costs no system call beyond a one-byte liveness peek: no epoll
// re-registration, no re-reading of the socket's flags. The socket keeps the executor of the
// connection that opened it; that is safe because every operation on it completes through the
// handler's own executor (the awaiting coroutine's strand), and Beast binds its deadline timer
// to that executor too. The executor held by the socket is only used to track outstanding work.
//
//   UpstreamPool pool(replica_count, max_idle_per_replica);
//   if (auto s = pool.take_idle(r)) use(*s); else connect();
//   pool.give_back(r, std::move(socket));   // only after a complete keep-alive response
#pragma once

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
  UpstreamPool(const UpstreamPool&) = delete;
  UpstreamPool& operator=(const UpstreamPool&) = delete;

  // A live idle connection to `replica`; nullopt when none is left. Connections the peer
  // closed while idle are dropped here.
  std::optional<boost::asio::ip::tcp::socket> take_idle(ReplicaId replica);
  void give_back(ReplicaId replica, boost::asio::ip::tcp::socket socket);
  // Drops every idle connection of `replica` (it was ejected or restarted).
  void clear(ReplicaId replica);

 private:
  std::size_t max_idle_;
  std::mutex mu_;
  std::vector<std::vector<boost::asio::ip::tcp::socket>> idle_;
};

}  // namespace prefixgate::gateway::server
