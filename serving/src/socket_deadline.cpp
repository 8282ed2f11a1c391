#include "prefixgate/serving/socket_deadline.h"

#include <boost/system/error_code.hpp>

namespace prefixgate::serving {

using Clock = std::chrono::steady_clock;

struct SocketDeadline::State {
  explicit State(const boost::asio::any_io_executor& executor) : timer(executor) {}
  boost::asio::steady_timer timer;
  boost::asio::ip::tcp::socket* socket = nullptr;  // armed: the socket to cancel
  Clock::time_point deadline;
  // Each wait started carries the next generation; a wait that an earlier deadline replaced
  // ends (operation_aborted) with an older one and leaves the state to its replacement.
  std::uint64_t generation = 0;
  bool armed = false;
  bool fired = false;
  bool waiting = false;
};

SocketDeadline::SocketDeadline(const boost::asio::any_io_executor& executor)
    : state_(std::make_shared<State>(executor)) {}

SocketDeadline::~SocketDeadline() {
  state_->armed = false;
  state_->socket = nullptr;
  state_->timer.cancel();
}

void SocketDeadline::arm(boost::asio::ip::tcp::socket& socket, std::chrono::milliseconds timeout) {
  State& s = *state_;
  s.socket = &socket;
  s.deadline = Clock::now() + timeout;
  s.armed = true;
  s.fired = false;
  // The wait under way ends no later than the new deadline and looks again then.
  if (s.waiting && s.timer.expiry() <= s.deadline) return;
  wait(state_);
}

void SocketDeadline::disarm() {
  state_->armed = false;
  state_->socket = nullptr;
}

bool SocketDeadline::expired() const {
  return state_->fired;
}

void SocketDeadline::wait(const std::shared_ptr<State>& state) {
  State& s = *state;
  s.waiting = true;
  const std::uint64_t generation = ++s.generation;
  s.timer.expires_at(s.deadline);  // ends a wait under way (its handler sees a newer generation)
  s.timer.async_wait([state, generation](const boost::system::error_code& ec) {
    State& st = *state;
    if (st.generation != generation) return;
    st.waiting = false;
    if (ec || !st.armed) return;  // cancelled with its owner, or nothing armed now
    if (Clock::now() < st.deadline) {
      wait(state);  // armed again, later, while this waited
      return;
    }
    st.fired = true;
    boost::system::error_code ignored;
    st.socket->cancel(ignored);
  });
}

}  // namespace prefixgate::serving
