// A deadline on a socket's reads that costs no timer operation per arming.
//
//   SocketDeadline deadline(executor);
//   deadline.arm(socket, 60s);              // cancels the socket's operations at now + 60 s
//   co_await socket.async_wait(...);        // ends with operation_aborted if it passed first
//   deadline.disarm();
//   if (deadline.expired()) ...             // the last arming passed and cancelled them
//
// A connection arms its idle deadline for every request and almost never reaches it. With a
// timer started and cancelled per arming, each request paid two timer-queue operations (a lock
// each) for a wait that never ended. Here the timer runs behind the deadline: an arming later
// than the wait under way only moves the deadline, and the wait, when it ends, waits again for
// whatever is armed then. Only an earlier deadline restarts the timer. So a busy keep-alive
// connection starts one wait per idle period, not one per request.
//
// Used from the socket's thread only. Leaves the socket open: whoever reads it sees
// operation_aborted, and can still answer (408) before closing. The socket passed to arm() must
// outlive the arming: disarm() (or destroy the deadline) before the socket goes.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <memory>

namespace prefixgate::serving {

class SocketDeadline {
 public:
  explicit SocketDeadline(const boost::asio::any_io_executor& executor);
  ~SocketDeadline();
  SocketDeadline(const SocketDeadline&) = delete;
  SocketDeadline& operator=(const SocketDeadline&) = delete;

  void arm(boost::asio::ip::tcp::socket& socket, std::chrono::milliseconds timeout);
  void disarm();
  // Whether the last arming's deadline passed and cancelled the socket's operations.
  bool expired() const;

 private:
  struct State;
  static void wait(const std::shared_ptr<State>& state);
  // Shared with the timer's handler, which can run after this is gone (and then does nothing).
  std::shared_ptr<State> state_;
};

}  // namespace prefixgate::serving
