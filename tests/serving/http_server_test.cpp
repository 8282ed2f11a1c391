// The serving core on real loopback sockets: what both prefixgate and prefixgate-engine do with
// well-behaved, malformed, oversized, idle and departing clients, and how they drain.
#include <gtest/gtest.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "prefixgate/serving/errors.h"
#include "prefixgate/serving/server.h"
#include "serving/raw_client.h"

namespace prefixgate::serving {
namespace {

using prefixgate::testing::body_of;
using prefixgate::testing::RawClient;
using prefixgate::testing::status_of;
using namespace std::chrono_literals;

struct PerConnection : ConnectionState {
  int requests = 0;
};

// Answers /echo with the body and the connection's request count, /slow once released,
// /stream as three chunks, and throws on /throw.
class TestHandler : public Handler {
 public:
  std::unique_ptr<ConnectionState> open(Connection&) override {
    ++opened;
    return std::make_unique<PerConnection>();
  }

  Awaitable<bool> handle(Connection& c, Request& req) override {
    auto& state = static_cast<PerConnection&>(*c.state);
    ++state.requests;
    const bool keep_alive = req.keep_alive() && !server->draining();
    const std::string_view path = path_of(req.target());
    if (path == "/throw") throw std::runtime_error("handler failed");
    if (path == "/slow") {
      ++slow_started;
      asio::steady_timer timer(c.stream.get_executor());
      for (int i = 0; i < 2000 && !release.load(); ++i) {
        timer.expires_after(5ms);
        co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
      }
    }
    if (path == "/stream") {
      StreamHead head = make_stream_head(req, http::status::ok, "text/event-stream", keep_alive);
      bool ok = co_await write_stream_head(c, head);
      for (const char* event : {"data: 1\n\n", "data: 2\n\n", "data: 3\n\n"}) {
        ok = ok && co_await write_chunk(c, event);
      }
      ok = ok && co_await write_last_chunk(c);
      co_return ok&& keep_alive;
    }
    if (path == "/listener") {  // which listener accepted this connection
      co_return co_await write_response(c, make_response(req, http::status::ok, "text/plain",
                                                         std::to_string(c.listener), keep_alive)) &&
          keep_alive;
    }
    const std::string body = req.body() + "#" + std::to_string(state.requests);
    co_return co_await write_response(
        c, make_response(req, http::status::ok, "text/plain", body, keep_alive)) &&
        keep_alive;
  }

  void refused(Response& res) override {
    ++refused_count;
    res.set("x-refused", "yes");
  }

  HttpServer* server = nullptr;
  std::atomic<int> opened{0};
  std::atomic<int> refused_count{0};
  std::atomic<int> slow_started{0};
  std::atomic<bool> release{false};
};

class ServingTest : public ::testing::Test {
 protected:
  // `listeners`: how many the server has (add_listener for each after the first).
  void start(ServerOptions options = {}, int listeners = 1) {
    options.server_name = "test-server";
    server_ = std::make_unique<HttpServer>(options, handler_);
    handler_.server = server_.get();
    auto port = server_->start();
    ASSERT_TRUE(port.ok()) << port.error().message;
    port_ = *port;
    for (int i = 1; i < listeners; ++i) {
      auto more = server_->add_listener("127.0.0.1", 0, "admin_listen");
      ASSERT_TRUE(more.ok()) << more.error().message;
      extra_ports_.push_back(*more);
    }
    thread_ = std::thread([this] { server_->run(); });
  }
  void TearDown() override {
    handler_.release = true;
    if (server_) server_->request_shutdown();
    if (thread_.joinable()) thread_.join();
  }
  // Waits until the server has `n` open connections (or gives up after 5 s).
  bool wait_for_connections(std::size_t n) {
    for (int i = 0; i < 500; ++i) {
      if (server_->open_connections() == n) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  static std::string post(std::string_view target, std::string_view body,
                          std::string_view extra_headers = {}) {
    return std::string("POST ") + std::string(target) + " HTTP/1.1\r\nHost: x\r\n" +
           std::string(extra_headers) + "Content-Length: " + std::to_string(body.size()) +
           "\r\n\r\n" + std::string(body);
  }

  TestHandler handler_;
  std::unique_ptr<HttpServer> server_;
  std::uint16_t port_ = 0;
  std::vector<std::uint16_t> extra_ports_;
  std::thread thread_;
};

TEST_F(ServingTest, AddedListenersShareTheHandlerAndTagTheirConnections) {
  start({}, 3);
  const std::vector<std::uint16_t> ports = {port_, extra_ports_.at(0), extra_ports_.at(1)};
  for (std::size_t i = 0; i < ports.size(); ++i) {
    RawClient c(ports[i]);
    ASSERT_TRUE(c.connected()) << i;
    ASSERT_TRUE(c.send("GET /listener HTTP/1.1\r\nHost: x\r\n\r\n"));
    const std::string res = c.read_response();
    EXPECT_EQ(status_of(res), 200) << res;
    EXPECT_EQ(body_of(res), std::to_string(i)) << "listener " << i;
  }
  // Errors name the caller's key: an address in use, a host that is not an address.
  HttpServer other(ServerOptions{}, handler_);
  ASSERT_TRUE(other.start().ok());
  const auto taken = other.add_listener("127.0.0.1", port_, "admin_listen");
  ASSERT_FALSE(taken.ok());
  EXPECT_EQ(taken.error().param, "admin_listen");
  EXPECT_NE(taken.error().message.find("cannot bind"), std::string::npos) << taken.error().message;
  EXPECT_FALSE(other.add_listener("nowhere", 0, "admin_listen").ok());
}

TEST_F(ServingTest, KeepAliveServesSeveralRequestsOnOneConnectionWithItsState) {
  start();
  RawClient c(port_);
  ASSERT_TRUE(c.connected());
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(c.send(post("/echo", "hi")));
    const std::string res = c.read_response();
    EXPECT_EQ(status_of(res), 200) << res;
    EXPECT_EQ(body_of(res), "hi#" + std::to_string(i));
    EXPECT_NE(res.find("Server: test-server\r\n"), std::string::npos) << res;
  }
  EXPECT_EQ(handler_.opened.load(), 1);
}

TEST_F(ServingTest, PipelinedRequestsAreAnsweredInOrder) {
  start();
  RawClient c(port_);
  ASSERT_TRUE(c.send(post("/echo", "a") + post("/echo", "b") + post("/echo", "c")));
  EXPECT_EQ(body_of(c.read_response()), "a#1");
  EXPECT_EQ(body_of(c.read_response()), "b#2");
  EXPECT_EQ(body_of(c.read_response()), "c#3");
}

// The read between requests grows with a connection's requests (ReadSizer); whatever its size,
// bodies larger and smaller than it, in pieces or pipelined behind one, arrive whole and in order.
TEST_F(ServingTest, BodiesOfEverySizeArriveWholeAsTheConnectionsReadsGrowAndShrink) {
  start();
  RawClient c(port_);
  ASSERT_TRUE(c.connected());
  const auto body = [](std::size_t n, char fill) {
    std::string b(n, fill);
    for (std::size_t i = 0; i < n; i += 997) b[i] = static_cast<char>('a' + i % 26);
    return b;
  };
  int count = 0;
  for (const std::size_t n : {std::size_t{10}, std::size_t{200} << 10, std::size_t{30} << 10,
                              std::size_t{100}, std::size_t{70} << 10}) {
    const std::string sent = body(n, 'x');
    const std::string wire = post("/echo", sent);
    // The big ones in three pieces with pauses, so that the server reads what has come.
    const std::size_t third = wire.size() / 3;
    ASSERT_TRUE(c.send(wire.substr(0, third)));
    std::this_thread::sleep_for(20ms);
    ASSERT_TRUE(c.send(wire.substr(third, third)));
    std::this_thread::sleep_for(20ms);
    ASSERT_TRUE(c.send(wire.substr(2 * third)));
    const std::string res = c.read_response();
    ASSERT_EQ(status_of(res), 200) << n;
    EXPECT_EQ(body_of(res), sent + "#" + std::to_string(++count)) << n;
  }
  // Pipelined: a large body and a small one behind it in one write.
  const std::string big = body(std::size_t{90} << 10, 'y');
  ASSERT_TRUE(c.send(post("/echo", big) + post("/echo", "tail")));
  EXPECT_EQ(body_of(c.read_response()), big + "#" + std::to_string(++count));
  EXPECT_EQ(body_of(c.read_response()), "tail#" + std::to_string(++count));
}

TEST_F(ServingTest, ChunkedStreamArrivesWholeAndTheConnectionIsReused) {
  start();
  RawClient c(port_);
  ASSERT_TRUE(c.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string stream = c.read_until_close_or("0\r\n\r\n");
  EXPECT_NE(stream.find("Transfer-Encoding: chunked"), std::string::npos) << stream;
  EXPECT_NE(stream.find("Cache-Control: no-cache"), std::string::npos) << stream;
  EXPECT_NE(stream.find("data: 3\n\n\r\n0\r\n\r\n"), std::string::npos) << stream;
}

TEST_F(ServingTest, BodyOverTheLimitIs413AndTheClientStillReadsIt) {
  ServerOptions o;
  o.max_body_bytes = 1024;
  start(o);
  RawClient c(port_);
  // The whole 1 MiB body goes out: without the lingering close, the server's close with
  // unread data would reset the connection and the client might never see the 413.
  const std::string body(1u << 20, 'x');
  c.send(post("/echo", body));
  const std::string res = c.read_response();
  ASSERT_EQ(status_of(res), 413) << res.substr(0, 200);
  EXPECT_NE(body_of(res).find(R"("code":"request_too_large")"), std::string::npos) << res;
  EXPECT_NE(body_of(res).find(R"("type":"invalid_request_error")"), std::string::npos) << res;
  EXPECT_NE(res.find("Connection: close"), std::string::npos) << res;
  EXPECT_NE(res.find("x-refused: yes"), std::string::npos) << res;
  EXPECT_EQ(handler_.refused_count.load(), 1);
}

TEST_F(ServingTest, HeadersOverTheLimitAre431) {
  ServerOptions o;
  o.max_header_bytes = 2048;
  start(o);
  RawClient c(port_);
  c.send("GET /echo HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(8192, 'a') + "\r\n\r\n");
  const std::string res = c.read_response();
  EXPECT_EQ(status_of(res), 431) << res.substr(0, 200);
  EXPECT_NE(body_of(res).find("request headers are larger than 2048 bytes"), std::string::npos);
}

TEST_F(ServingTest, MalformedRequestsAre400AndClose) {
  start();
  for (const std::string& bad : {std::string("GARBAGE\r\n\r\n"),
                                 std::string("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                                             "Content-Length: 6\r\n\r\nhello"),
                                 std::string("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
                                             "chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n")}) {
    SCOPED_TRACE(bad);
    RawClient c(port_);
    c.send(bad);
    const std::string res = c.read_response();
    EXPECT_EQ(status_of(res), 400) << res;
    EXPECT_NE(body_of(res).find(R"("code":"bad_request")"), std::string::npos) << res;
    c.read_until_close_or();
    EXPECT_TRUE(c.closed_by_peer());
  }
}

TEST_F(ServingTest, ConnectionsOverTheCapAre503WithoutReading) {
  ServerOptions o;
  o.max_connections = 2;
  start(o);
  RawClient a(port_), b(port_);
  ASSERT_TRUE(wait_for_connections(2));
  RawClient third(port_);
  const std::string res = third.read_response();
  EXPECT_EQ(status_of(res), 503) << res;
  EXPECT_NE(body_of(res).find(R"("code":"too_many_connections")"), std::string::npos);
  EXPECT_NE(body_of(res).find(R"("type":"server_error")"), std::string::npos);
  // The first two still work.
  ASSERT_TRUE(a.send(post("/echo", "ok")));
  EXPECT_EQ(status_of(a.read_response()), 200);
  EXPECT_EQ(handler_.opened.load(), 2);
}

TEST_F(ServingTest, ClientThatClosesIsForgottenQuietly) {
  start();
  {
    RawClient c(port_);
    ASSERT_TRUE(c.send(post("/echo", "x")));
    EXPECT_EQ(status_of(c.read_response()), 200);
    ASSERT_TRUE(wait_for_connections(1));
  }
  EXPECT_TRUE(wait_for_connections(0));
  EXPECT_EQ(handler_.refused_count.load(), 0);  // an EOF between requests is not an error
}

TEST_F(ServingTest, IdleConnectionIsClosedAfterTheIdleTimeout) {
  ServerOptions o;
  o.idle_timeout = 100ms;
  start(o);
  RawClient c(port_);
  ASSERT_TRUE(wait_for_connections(1));
  c.read_until_close_or();
  EXPECT_TRUE(c.closed_by_peer());
  EXPECT_FALSE(c.timed_out());
  EXPECT_TRUE(wait_for_connections(0));
}

TEST_F(ServingTest, RequestsKeepAConnectionOpenPastTheIdleTimeoutAndSilenceClosesIt) {
  // The idle deadline restarts with every request: a connection busy for three idle periods
  // stays open (its first arming's timer does not cut it), then closes once it falls silent.
  ServerOptions o;
  o.idle_timeout = 500ms;
  start(o);
  RawClient c(port_);
  ASSERT_TRUE(c.connected());
  const auto start_time = std::chrono::steady_clock::now();
  auto last_answer = start_time;
  int answered = 0;
  while (std::chrono::steady_clock::now() - start_time < 1500ms) {
    ASSERT_TRUE(c.send(post("/echo", "hi"))) << "after " << answered << " answers";
    const std::string res = c.read_response();
    ASSERT_EQ(status_of(res), 200) << "after " << answered << " answers: " << res;
    last_answer = std::chrono::steady_clock::now();
    ++answered;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(handler_.opened.load(), 1) << "one connection served them all";
  // The deadline was armed before the last answer left the server: the close comes at least
  // the idle timeout after that, less the answer's way to the client.
  c.read_until_close_or();
  EXPECT_TRUE(c.closed_by_peer());
  EXPECT_GE(std::chrono::steady_clock::now() - last_answer, 400ms);
}

TEST_F(ServingTest, AHandlerThatThrowsClosesOnlyItsConnection) {
  start();
  RawClient bad(port_);
  ASSERT_TRUE(bad.send(post("/throw", "")));
  bad.read_until_close_or();
  EXPECT_TRUE(bad.closed_by_peer());
  RawClient good(port_);
  ASSERT_TRUE(good.send(post("/echo", "still here")));
  EXPECT_EQ(body_of(good.read_response()), "still here#1");
}

TEST_F(ServingTest, DrainFinishesInFlightRequestsClosesIdleOnesAndStopsAccepting) {
  start();
  RawClient idle(port_);
  RawClient busy(port_);
  ASSERT_TRUE(busy.send(post("/slow", "work")));
  for (int i = 0; i < 500 && handler_.slow_started.load() == 0; ++i)
    std::this_thread::sleep_for(5ms);
  ASSERT_EQ(handler_.slow_started.load(), 1);

  server_->request_shutdown();
  EXPECT_TRUE(server_->draining());
  idle.read_until_close_or();
  EXPECT_TRUE(idle.closed_by_peer());  // woken and closed, not left to its idle deadline
  RawClient late(port_);
  EXPECT_TRUE(!late.connected() || (late.read_until_close_or().empty() && late.closed_by_peer()));

  handler_.release = true;
  const std::string res = busy.read_response();
  EXPECT_EQ(status_of(res), 200);
  EXPECT_EQ(body_of(res), "work#1");
  EXPECT_NE(res.find("Connection: close"), std::string::npos) << res;  // no keep-alive in a drain
  thread_.join();  // run() returns once the last connection is gone
}

TEST_F(ServingTest, DrainGivesUpAfterTheDrainTimeout) {
  ServerOptions o;
  o.drain_timeout = 200ms;
  start(o);
  RawClient busy(port_);
  ASSERT_TRUE(busy.send(post("/slow", "")));
  for (int i = 0; i < 500 && handler_.slow_started.load() == 0; ++i)
    std::this_thread::sleep_for(5ms);
  const auto begin = std::chrono::steady_clock::now();
  server_->request_shutdown();
  thread_.join();
  // Bounded by the drain timeout, not by the 10 s the handler would take (generous bound).
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 5s);
}

TEST_F(ServingTest, BindErrorsNameTheListenAddress) {
  ServerOptions o;
  o.host = "not-an-address";
  HttpServer bad(o, handler_);
  auto port = bad.start();
  ASSERT_FALSE(port.ok());
  EXPECT_EQ(port.error().param, "listen");
  EXPECT_NE(port.error().message.find("not-an-address"), std::string::npos);

  start();
  ServerOptions same;
  same.port = port_;
  HttpServer clash(same, handler_);
  auto taken = clash.start();
  ASSERT_FALSE(taken.ok());
  EXPECT_NE(taken.error().message.find("cannot bind"), std::string::npos);
}

TEST(ServingHttpTest, PathAndQueryParameters) {
  EXPECT_EQ(path_of("/v1/kv_events?since=5"), "/v1/kv_events");
  EXPECT_EQ(path_of("/stats"), "/stats");
  EXPECT_EQ(query_param("/x?a=1&since=42&b", "since"), "42");
  EXPECT_EQ(query_param("/x?b", "b"), "");
  EXPECT_FALSE(query_param("/x?sincere=1", "since").has_value());
  EXPECT_FALSE(query_param("/x", "since").has_value());
}

TEST(ServingErrorsTest, OpenAiBodiesCarryTypeParamAndCode) {
  const Error e = make_error(ErrorCode::kWrongType, "messages[0].content must be a string",
                             "messages[0].content");
  EXPECT_EQ(
      openai_error_body(e),
      R"({"error":{"message":"messages[0].content must be a string",)"
      R"("type":"invalid_request_error","param":"messages[0].content","code":"invalid_type"}})");
  EXPECT_EQ(openai_error_body(make_error(ErrorCode::kTooLarge, "body \"big\"")),
            R"({"error":{"message":"body \"big\"","type":"invalid_request_error","param":null,)"
            R"("code":"request_too_large"}})");
  EXPECT_NE(openai_error_body(make_error(ErrorCode::kInternal, "device failed"))
                .find(R"("type":"server_error")"),
            std::string::npos);
  EXPECT_NE(openai_error_body(make_error(ErrorCode::kResourceExhausted, "slow down"))
                .find(R"("type":"rate_limit_error","param":null,"code":"rate_limit_exceeded")"),
            std::string::npos);
  EXPECT_NE(openai_error_body(401, "invalid API key", "invalid_api_key")
                .find(R"("type":"authentication_error")"),
            std::string::npos);
}

}  // namespace
}  // namespace prefixgate::serving
