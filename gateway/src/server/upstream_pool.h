// Idle keep-alive connections to each replica, shared by every client connection.
//
// A pooled connection stays an open Beast stream (its socket and its timer), registered with the
// reactor of the server thread that opened it, so taking and returning one costs no epoll
// re-registration, and held by pointer, so that neither makes a stream: Beast's stream, moved or
// made, allocates its state and a timer anew. A
// connection is handed only to a client connection on that same thread: its reads and writes
// then complete where they are awaited, never bounced between threads.
//
// A connection idle for less than `recheck_after` is handed out without asking the kernel
// whether the replica closed it meanwhile (a one-byte peek, a system call per request); the
// rare one that was closed fails its write or its read, and the exchange retries on a fresh
// connection (UpstreamFailure on a pooled connection is not the replica's fault).
//
//   UpstreamPool pool(replica_count, max_idle_per_replica);
//   if (auto s = pool.take_idle(r, executor)) use(*s); else connect();
//   pool.give_back(r, std::move(stream));   // only after a complete keep-alive response
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "prefixgate/gateway/prefix_index.h"

namespace prefixgate::gateway::server {

class UpstreamPool {
 public:
  using Clock = std::chrono::steady_clock;
  using Stream = std::unique_ptr<boost::beast::tcp_stream>;

  UpstreamPool(std::size_t replicas, std::size_t max_idle_per_replica,
               Clock::duration recheck_after = std::chrono::seconds(1));
  UpstreamPool(const UpstreamPool&) = delete;
  UpstreamPool& operator=(const UpstreamPool&) = delete;

  // A live idle connection to `replica` opened on the event loop `executor` runs on; nullopt
  // null when none is left. Connections found closed by the peer are dropped here.
  Stream take_idle(ReplicaId replica, const boost::asio::any_io_executor& executor);
  // `stream` has no operation pending.
  void give_back(ReplicaId replica, Stream stream);
  // Drops every idle connection of `replica` (it was ejected or restarted).
  void clear(ReplicaId replica);

 private:
  struct Idle {
    Stream stream;
    Clock::time_point since;
  };
  std::size_t max_idle_;
  Clock::duration recheck_after_;
  std::mutex mu_;
  std::vector<std::vector<Idle>> idle_;
};

}  // namespace prefixgate::gateway::server
