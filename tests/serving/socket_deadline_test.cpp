// SocketDeadline on a real loopback socket: an arming that passes cancels the socket's wait, a
// later arming postpones it (the timer already running waits again), an earlier one restarts
// it, a disarmed one never fires, and one destroyed mid-wait leaves nothing behind.
// Times are only bounded from below, where the deadline guarantees them: a deadline never fires
// early. Upper bounds are generous, for a busy machine.
#include "prefixgate/serving/socket_deadline.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <optional>

#include "serving/socket_pair.h"

namespace prefixgate::serving {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct Fixture : prefixgate::testing::SocketPair {
  // Waits for `b` to be readable; returns how the wait ended and when.
  struct Outcome {
    boost::system::error_code ec;
    Clock::duration after{};
    bool ended = false;
  };
  Outcome outcome;
  Clock::time_point start = Clock::now();
  void wait_readable() {
    b.async_wait(tcp::socket::wait_read, [this](const boost::system::error_code& ec) {
      outcome = {ec, Clock::now() - start, true};
    });
  }
  // Runs `f` on the loop after `delay`.
  template <class F>
  void at(Clock::duration delay, F f) {
    auto timer = std::make_shared<asio::steady_timer>(ioc, delay);
    timer->async_wait([timer, f](const boost::system::error_code&) { f(); });
  }
  void run_for(Clock::duration limit) { ioc.run_for(limit); }
};

TEST(SocketDeadlineTest, AnArmingThatPassesCancelsTheSocketsWait) {
  Fixture f;
  SocketDeadline deadline(f.ioc.get_executor());
  deadline.arm(f.b, 50ms);
  f.wait_readable();
  f.run_for(5s);
  ASSERT_TRUE(f.outcome.ended);
  EXPECT_EQ(f.outcome.ec, asio::error::operation_aborted);
  EXPECT_GE(f.outcome.after, 50ms);
  EXPECT_TRUE(deadline.expired());
  EXPECT_TRUE(f.b.is_open()) << "cancelled, not closed: the server can still answer 408";
}

TEST(SocketDeadlineTest, ALaterArmingPostponesTheCancellation) {
  Fixture f;
  SocketDeadline deadline(f.ioc.get_executor());
  deadline.arm(f.b, 100ms);
  f.wait_readable();
  // Before the first deadline, a request's worth of activity arms it again, further out: the
  // timer started for 100 ms must not cut the wait at 100 ms.
  f.at(60ms, [&] {
    deadline.disarm();
    deadline.arm(f.b, 200ms);
  });
  f.run_for(5s);
  ASSERT_TRUE(f.outcome.ended);
  EXPECT_EQ(f.outcome.ec, asio::error::operation_aborted);
  EXPECT_GE(f.outcome.after, 260ms);
  EXPECT_TRUE(deadline.expired());
}

TEST(SocketDeadlineTest, AnEarlierArmingRestartsTheTimer) {
  Fixture f;
  SocketDeadline deadline(f.ioc.get_executor());
  deadline.arm(f.b, 60s);
  deadline.disarm();
  deadline.arm(f.b, 50ms);  // a request's deadline, shorter than the idle one running
  f.wait_readable();
  f.run_for(10s);
  ASSERT_TRUE(f.outcome.ended) << "the 60 s timer was not restarted for the 50 ms deadline";
  EXPECT_EQ(f.outcome.ec, asio::error::operation_aborted);
  EXPECT_GE(f.outcome.after, 50ms);
}

TEST(SocketDeadlineTest, ADisarmedDeadlineNeverCancels) {
  Fixture f;
  SocketDeadline deadline(f.ioc.get_executor());
  deadline.arm(f.b, 30ms);
  deadline.disarm();
  f.wait_readable();
  // Data arrives well after the deadline would have passed: the wait ends with it.
  f.at(150ms, [&] { asio::write(f.a, asio::buffer("x", 1)); });
  f.run_for(5s);
  ASSERT_TRUE(f.outcome.ended);
  EXPECT_FALSE(f.outcome.ec) << f.outcome.ec.message();
  EXPECT_GE(f.outcome.after, 150ms);
  EXPECT_FALSE(deadline.expired());
}

TEST(SocketDeadlineTest, ArmingAgainClearsAnExpiry) {
  Fixture f;
  SocketDeadline deadline(f.ioc.get_executor());
  deadline.arm(f.b, 10ms);
  f.wait_readable();
  f.run_for(5s);
  ASSERT_TRUE(deadline.expired());
  deadline.arm(f.b, 10s);
  EXPECT_FALSE(deadline.expired());
}

TEST(SocketDeadlineTest, DestroyedWhileItsTimerRunsItTouchesNothing) {
  Fixture f;
  {
    std::optional<SocketDeadline> deadline;
    deadline.emplace(f.ioc.get_executor());
    deadline->arm(f.b, 20ms);
    f.wait_readable();
    deadline.reset();  // the connection ended; its timer's handler runs later
  }
  f.at(100ms, [&] { asio::write(f.a, asio::buffer("x", 1)); });
  f.run_for(5s);
  ASSERT_TRUE(f.outcome.ended);
  EXPECT_FALSE(f.outcome.ec) << "a destroyed deadline cancelled the socket";
}

}  // namespace
}  // namespace prefixgate::serving
