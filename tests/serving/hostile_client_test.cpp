// Hostile and broken clients against the serving core on real loopback sockets: request
// smuggling shapes, oversized request lines, slowloris headers and bodies, readers that never
// read a stream, NUL bytes and invalid UTF-8 in fields, and thousands of idle connections.
// Each case has one expected outcome: a status (400, 408, 431), a closed connection, and a bound
// on how long the server takes to get there.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "prefixgate/serving/server.h"
#include "serving/raw_client.h"

namespace prefixgate::serving {
namespace {

using prefixgate::testing::RawClient;
using prefixgate::testing::status_of;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// /echo answers the body and the value of x-probe; /stream writes 64 KiB chunks until a write
// fails, and records when it did.
class Handler : public serving::Handler {
 public:
  Awaitable<bool> handle(Connection& c, Request& req) override {
    ++handled;
    const bool keep_alive = req.keep_alive();
    if (path_of(req.target()) == "/stream") {
      StreamHead head = make_stream_head(req, http::status::ok, "text/event-stream", false);
      if (!co_await write_stream_head(c, head)) co_return false;
      const std::string chunk(64 * 1024, 'x');
      while (co_await write_chunk(c, chunk)) ++chunks_written;
      stream_write_failed = true;
      co_return false;
    }
    std::string body = req.body() + "|" + std::string(req["x-probe"]);
    co_return co_await write_response(
        c, make_response(req, http::status::ok, "text/plain", std::move(body), keep_alive)) &&
        keep_alive;
  }

  std::atomic<int> handled{0};
  std::atomic<int> chunks_written{0};
  std::atomic<bool> stream_write_failed{false};
};

class HostileClientTest : public ::testing::Test {
 protected:
  static constexpr auto kRequestTimeout = 500ms;
  static constexpr auto kWriteTimeout = 500ms;

  void SetUp() override {
    ServerOptions o;
    o.threads = 2;
    o.max_header_bytes = 8 * 1024;
    o.max_body_bytes = 64 * 1024;
    o.max_connections = 20000;
    o.idle_timeout = 10s;
    o.request_timeout = kRequestTimeout;
    o.write_timeout = kWriteTimeout;
    o.linger_timeout = 200ms;
    server_ = std::make_unique<HttpServer>(o, handler_);
    auto port = server_->start();
    ASSERT_TRUE(port.ok()) << port.error().message;
    port_ = *port;
    thread_ = std::thread([this] { server_->run(); });
  }
  void TearDown() override {
    server_->request_shutdown();
    thread_.join();
  }

  // Sends `bytes` on a fresh connection and reads until the server closes it (10 s at most).
  std::string exchange(std::string_view bytes, bool* closed = nullptr) {
    RawClient client(port_);
    EXPECT_TRUE(client.connected());
    client.send(bytes);
    std::string answer = client.read_until_close_or();
    if (closed != nullptr) *closed = client.closed_by_peer();
    return answer;
  }

  // Dribbles a byte every 50 ms on `client` (whose request began at `start`) until the server
  // gives up, then expects its 408 and its close within the request timeout, `handled` requests
  // having reached the handler.
  void expect_408_for_dribble(RawClient& client, Clock::time_point start, int handled) {
    for (int i = 0; i < 200 && client.send("a"); ++i) {
      std::this_thread::sleep_for(50ms);
      if (Clock::now() - start > kRequestTimeout + 2s) break;
    }
    const std::string answer = client.read_until_close_or();
    EXPECT_EQ(status_of(answer), 408) << answer;
    EXPECT_TRUE(client.closed_by_peer());
    EXPECT_LT(Clock::now() - start, kRequestTimeout + 3s);
    EXPECT_EQ(handler_.handled.load(), handled);
  }

  static int count_responses(std::string_view answer) {
    int n = 0;
    for (std::size_t pos = 0; (pos = answer.find("HTTP/1.1 ", pos)) != std::string::npos; ++pos) {
      ++n;
    }
    return n;
  }

  Handler handler_;
  std::unique_ptr<HttpServer> server_;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

TEST_F(HostileClientTest, ContentLengthWithTransferEncodingIs400AndNothingIsSmuggled) {
  // A front end that honours Content-Length and one that honours chunked would disagree on where
  // the second request starts: refuse the message, answer once, close.
  bool closed = false;
  const std::string answer = exchange(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
      "0\r\n\r\nGET /echo HTTP/1.1\r\nHost: x\r\nx-probe: smuggled\r\n\r\n",
      &closed);
  EXPECT_EQ(status_of(answer), 400) << answer;
  EXPECT_EQ(count_responses(answer), 1) << answer;
  EXPECT_EQ(answer.find("smuggled"), std::string::npos) << answer;
  EXPECT_TRUE(closed);
  EXPECT_EQ(handler_.handled.load(), 0);
}

TEST_F(HostileClientTest, ConflictingContentLengthsAre400) {
  for (const char* lengths :
       {"Content-Length: 2\r\nContent-Length: 3\r\n", "Content-Length: 2, 3\r\n",
        "Content-Length: -1\r\n", "Content-Length: 1x\r\n",
        "Content-Length: 99999999999999999999\r\n"}) {
    bool closed = false;
    const std::string answer =
        exchange(std::string("POST /echo HTTP/1.1\r\nHost: x\r\n") + lengths + "\r\nabc", &closed);
    EXPECT_EQ(status_of(answer), 400) << lengths << answer;
    EXPECT_TRUE(closed) << lengths;
  }
  EXPECT_EQ(handler_.handled.load(), 0);
}

TEST_F(HostileClientTest, ObsoleteLineFoldingIsUnfoldedToSpaces) {
  // RFC 9112 section 5.2: a server rejects obs-fold or replaces it with spaces; Beast replaces
  // it, so the handler (and whatever it forwards) never sees a folded line.
  RawClient client(port_);
  client.send("GET /echo HTTP/1.1\r\nHost: x\r\nx-probe: a\r\n folded\r\n\tmore\r\n\r\n");
  const std::string answer = client.read_response();
  EXPECT_EQ(status_of(answer), 200) << answer;
  EXPECT_NE(answer.find("|a folded more"), std::string::npos) << answer;
}

TEST_F(HostileClientTest, TransferCodingsOtherThanChunkedAloneAreRefused) {
  const struct {
    const char* header;
    int status;
  } cases[] = {{"Transfer-Encoding: gzip, chunked\r\n", 501},
               {"Transfer-Encoding: identity\r\nContent-Length: 2\r\n", 501},
               {"Transfer-Encoding: chunked, gzip\r\n", 400},
               {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", 400}};
  for (const auto& c : cases) {
    bool closed = false;
    const std::string answer = exchange(
        std::string("POST /echo HTTP/1.1\r\nHost: x\r\n") + c.header + "\r\n0\r\n\r\n", &closed);
    EXPECT_EQ(status_of(answer), c.status) << c.header << answer;
    EXPECT_TRUE(closed) << c.header;
  }
  EXPECT_EQ(handler_.handled.load(), 0);
}

// A compressed body is refused for what it is, before it is read: it would otherwise fail as
// JSON that is not UTF-8. `identity` is no coding at all.
TEST_F(HostileClientTest, ACompressedBodyIs415NamingItsCoding) {
  bool closed = false;
  const std::string answer = exchange(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n"
      "Content-Length: 4\r\n\r\n\x1f\x8b\x08\x00",
      &closed);
  EXPECT_EQ(status_of(answer), 415) << answer;
  EXPECT_NE(answer.find("Accept-Encoding: identity\r\n"), std::string::npos) << answer;
  EXPECT_NE(answer.find("content coding 'gzip' is not supported"), std::string::npos) << answer;
  EXPECT_NE(answer.find("\"unsupported_content_encoding\""), std::string::npos) << answer;
  EXPECT_TRUE(closed);
  EXPECT_EQ(handler_.handled.load(), 0);
  RawClient client(port_);
  client.send(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Encoding: Identity\r\nContent-Length: "
      "2\r\n\r\nok");
  const std::string plain = client.read_response();
  EXPECT_EQ(status_of(plain), 200) << plain;
}

TEST_F(HostileClientTest, BadChunkSizesAre400Or413) {
  for (const char* chunk :
       {"zz\r\nab\r\n0\r\n\r\n", "-1\r\nab\r\n0\r\n\r\n", "ffffffffffffffffffff\r\nab\r\n0\r\n\r\n",
        "2\r\nabc\r\n0\r\n\r\n", "2;\x01\r\nab\r\n0\r\n\r\n", "2\r\nab\r\n0\n\r\n",
        "2\r\nab\n0\r\n\r\n"}) {
    bool closed = false;
    const std::string answer = exchange(
        std::string("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n") + chunk,
        &closed);
    const int status = status_of(answer);
    EXPECT_TRUE(status == 400 || status == 413) << chunk << answer;
    EXPECT_TRUE(closed) << chunk;
  }
  EXPECT_EQ(handler_.handled.load(), 0);
}

// Every byte of a chunked request in its own read (the last chunk's `0<CRLF>`, `<CR>` and `<LF>`
// included, which Beast's own chunk parser cannot take in pieces): the body arrives decoded,
// extensions and trailers passed over, and the request pipelined after it is answered too.
TEST_F(HostileClientTest, AChunkedBodySentAByteAtATimeIsDecodedWholeAndTheNextRequestFollows) {
  RawClient client(port_);
  const std::string request =
      "POST /echo HTTP/1.1\r\nHost: x\r\nx-probe: p\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;ext=\"v\"\r\nhello\r\n1\r\n \r\nA\r\nchunked wo\r\n3\r\nrld\r\n"
      "0\r\nx-trailer: t\r\n\r\n"
      "GET /echo HTTP/1.1\r\nHost: x\r\nx-probe: second\r\n\r\n";
  for (const char byte : request) {
    ASSERT_TRUE(client.send(std::string_view(&byte, 1)));
    std::this_thread::sleep_for(1ms);
  }
  const std::string first = client.read_response();
  EXPECT_EQ(status_of(first), 200) << first;
  EXPECT_NE(first.find("\r\n\r\nhello chunked world|p"), std::string::npos) << first;
  const std::string second = client.read_response();
  EXPECT_EQ(status_of(second), 200) << second;
  EXPECT_NE(second.find("\r\n\r\n|second"), std::string::npos) << second;
  EXPECT_EQ(handler_.handled.load(), 2);
}

TEST_F(HostileClientTest, AChunkedBodyOverTheBodyLimitIs413) {
  // 64 KiB allowed: nine chunks of 8 KiB announce no length, so the limit is met mid-body.
  std::string request = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 9; ++i) request += "2000\r\n" + std::string(8192, 'b') + "\r\n";
  request += "0\r\n\r\n";
  bool closed = false;
  const std::string answer = exchange(request, &closed);
  EXPECT_EQ(status_of(answer), 413) << answer.substr(0, 300);
  EXPECT_TRUE(closed);
  EXPECT_EQ(handler_.handled.load(), 0);
}

TEST_F(HostileClientTest, AChunkedBodyThatStopsMidwayGets408WithinTheRequestTimeout) {
  RawClient client(port_);
  const auto start = Clock::now();
  client.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel");
  const std::string answer = client.read_until_close_or();
  EXPECT_EQ(status_of(answer), 408) << answer;
  EXPECT_TRUE(client.closed_by_peer());
  EXPECT_LT(Clock::now() - start, kRequestTimeout + 3s);
  EXPECT_EQ(handler_.handled.load(), 0);
}

// A client that sends `Expect: 100-continue` (curl, for a body over 1 MB) waits for the go-ahead
// before its body, a second by default: the server sends it once the header is read, and not at
// all when the body came with the header or the request is refused on its header.
TEST_F(HostileClientTest, AClientExpectingContinueGetsTheGoAheadThenItsAnswer) {
  RawClient client(port_, 3s);
  client.send(
      "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-Continue\r\nContent-Length: 5\r\n\r\n");
  const std::string go_ahead = client.read_response();
  EXPECT_EQ(go_ahead, "HTTP/1.1 100 Continue\r\n\r\n");
  client.send("hello");
  const std::string answer = client.read_response();
  EXPECT_EQ(status_of(answer), 200) << answer;
  EXPECT_NE(answer.find("\r\n\r\nhello|"), std::string::npos) << answer;

  // The body already there: the answer alone.
  client.send(
      "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi");
  const std::string second = client.read_response();
  EXPECT_EQ(status_of(second), 200) << second;
  EXPECT_NE(second.find("\r\n\r\nhi|"), std::string::npos) << second;

  // Over the body limit by its Content-Length: 413 at once, no go-ahead, nothing read.
  bool closed = false;
  const std::string refused = exchange(
      "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 1000000\r\n\r\n",
      &closed);
  EXPECT_EQ(status_of(refused), 413) << refused;
  EXPECT_TRUE(closed);
  EXPECT_EQ(handler_.handled.load(), 2);
}

// HEAD is answered as GET without the body: the head says the GET's Content-Length, no body
// bytes follow (the next answer on the connection comes right after), and a stream ends at its
// head.
TEST_F(HostileClientTest, HeadIsAnsweredAsGetWithoutTheBody) {
  RawClient client(port_, 3s);
  client.send(
      "HEAD /echo HTTP/1.1\r\nHost: x\r\nx-probe: abc\r\n\r\n"
      "GET /echo HTTP/1.1\r\nHost: x\r\nx-probe: second\r\n\r\n");
  const std::string both = client.read_until_close_or("|second");
  const std::size_t head_end = both.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos) << both;
  const std::string head = both.substr(0, head_end + 4);
  EXPECT_EQ(status_of(head), 200) << head;
  EXPECT_NE(head.find("Content-Length: 4\r\n"), std::string::npos) << head;  // "|abc"
  const std::string second = both.substr(head_end + 4);
  EXPECT_EQ(status_of(second), 200) << both;
  EXPECT_TRUE(second.ends_with("\r\n\r\n|second")) << both;

  RawClient streamer(port_, 3s);
  streamer.send("HEAD /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string stream = streamer.read_until_close_or();
  EXPECT_EQ(status_of(stream), 200) << stream;
  EXPECT_TRUE(stream.ends_with("\r\n\r\n")) << stream;  // the head, no chunk
  EXPECT_TRUE(streamer.closed_by_peer());
  EXPECT_EQ(handler_.chunks_written.load(), 0);
}

TEST_F(HostileClientTest, OversizedRequestLineIs431) {
  bool closed = false;
  const std::string answer =
      exchange("GET /" + std::string(32 * 1024, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
  EXPECT_EQ(status_of(answer), 431) << answer.substr(0, 200);
  EXPECT_TRUE(closed);
}

TEST_F(HostileClientTest, NulAndControlBytesInTheRequestLineOrHeadersAre400) {
  using namespace std::string_literals;
  for (const std::string& request :
       {"GET /ec\0ho HTTP/1.1\r\nHost: x\r\n\r\n"s, "GET /echo HTTP/1.1\r\nx-probe: a\0b\r\n\r\n"s,
        "GET /echo HTTP/1.1\r\nx-pr\0obe: a\r\n\r\n"s, "GET /e\x01 HTTP/1.1\r\n\r\n"s,
        "GET /echo HTTP/1.1\r\nx-probe: a\rb\r\n\r\n"s, "G\xc3\xa9T /echo HTTP/1.1\r\n\r\n"s}) {
    bool closed = false;
    const std::string answer = exchange(request, &closed);
    EXPECT_EQ(status_of(answer), 400) << answer;
    EXPECT_TRUE(closed);
  }
  EXPECT_EQ(handler_.handled.load(), 0);
}

TEST_F(HostileClientTest, InvalidUtf8InAHeaderValueIsPassedAsBytes) {
  // HTTP field values are bytes (obs-text): the server does not judge their encoding, the
  // handler gets them unchanged (an application that needs UTF-8 checks it, as the gateway does
  // for JSON bodies).
  RawClient client(port_);
  client.send("GET /echo HTTP/1.1\r\nHost: x\r\nx-probe: \xff\xfe\xc3\r\n\r\n");
  const std::string answer = client.read_response();
  EXPECT_EQ(status_of(answer), 200) << answer;
  EXPECT_NE(answer.find("|\xff\xfe\xc3"), std::string::npos) << answer;
}

TEST_F(HostileClientTest, HeadersDribbledAByteAtATimeGet408WithinTheRequestTimeout) {
  RawClient client(port_);
  const auto start = Clock::now();
  client.send("GET /echo HTTP/1.1\r\nHost: x\r\n");
  // One header byte every 50 ms, for up to 10 s: each byte arrives well inside any idle timeout.
  std::string answer;
  for (int i = 0; i < 200 && client.send("a"); ++i) {
    std::this_thread::sleep_for(50ms);
    if (Clock::now() - start > kRequestTimeout + 2s) break;
  }
  answer = client.read_until_close_or();
  const auto took = Clock::now() - start;
  EXPECT_EQ(status_of(answer), 408) << answer;
  EXPECT_TRUE(client.closed_by_peer());
  EXPECT_LT(took, kRequestTimeout + 3s);
  EXPECT_EQ(handler_.handled.load(), 0);
}

TEST_F(HostileClientTest, BodyDribbledAByteAtATimeGets408WithinTheRequestTimeout) {
  RawClient client(port_);
  const auto start = Clock::now();
  client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n");
  expect_408_for_dribble(client, start, 0);
}

TEST_F(HostileClientTest, AnIdleKeepAliveConnectionIsNotCutByTheRequestTimeout) {
  // The request deadline starts at a request's first byte: waiting between requests is the
  // idle timeout's business (10 s here).
  RawClient client(port_);
  client.send("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(status_of(client.read_response()), 200);
  std::this_thread::sleep_for(kRequestTimeout * 3);
  client.send("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(status_of(client.read_response()), 200);
}

// The connection's deadline is armed again for each request: a later request on a kept-alive
// connection that dribbles in gets its 408 too, within its own timeout.
TEST_F(HostileClientTest, ALaterRequestOnAKeptAliveConnectionGets408WhenItDribbles) {
  RawClient client(port_);
  for (int i = 0; i < 3; ++i) {
    client.send("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(status_of(client.read_response()), 200);
  }
  std::this_thread::sleep_for(kRequestTimeout * 2);  // idle: no deadline of its own
  const auto start = Clock::now();
  client.send("GET /echo HTTP/1.1\r\nHost: x\r\n");
  expect_408_for_dribble(client, start, 3);
}

TEST_F(HostileClientTest, AStreamReaderThatNeverReadsIsCutOffByTheWriteTimeout) {
  RawClient client(port_);
  client.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  // Reads nothing: the socket buffers fill, the next write times out, the handler stops.
  const auto deadline = Clock::now() + 15s;
  while (!handler_.stream_write_failed && Clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(handler_.stream_write_failed);
  EXPECT_GT(handler_.chunks_written.load(), 0);
}

TEST_F(HostileClientTest, PipelinedRequestsWithBodiesAreAnsweredInOrder) {
  RawClient client(port_);
  std::string batch;
  for (int i = 0; i < 50; ++i) {
    const std::string body = "body-" + std::to_string(i);
    batch += "POST /echo HTTP/1.1\r\nHost: x\r\nx-probe: " + std::to_string(i) +
             "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  }
  client.send(batch);
  for (int i = 0; i < 50; ++i) {
    const std::string answer = client.read_response();
    ASSERT_EQ(status_of(answer), 200) << i;
    EXPECT_NE(answer.find("body-" + std::to_string(i) + "|" + std::to_string(i)), std::string::npos)
        << answer;
  }
}

TEST_F(HostileClientTest, TenThousandIdleConnectionsDoNotStopServiceToOthers) {
  // The idle clients live in a child process, so that neither process needs descriptors for
  // both ends of 10,000 connections (a container's limit may be 20,000, and not raisable).
  constexpr std::size_t kIdle = 10000;
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  ASSERT_GE(limit.rlim_cur, kIdle + 512) << "descriptor limit too low for this test";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port_);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int ready[2];
  int hold[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(hold), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Only system calls from here: the parent's other threads may hold locks (malloc's too).
    close(ready[0]);
    close(hold[1]);
    std::size_t opened = 0;
    for (; opened < kIdle; ++opened) {
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      if (fd < 0) break;
      int rc;
      do {
        rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
      } while (rc != 0 && errno == EINTR);
      if (rc != 0) break;
    }
    if (write(ready[1], &opened, sizeof opened) != sizeof opened) _exit(1);
    char c;
    while (read(hold[0], &c, 1) < 0 && errno == EINTR) {
    }
    _exit(0);  // every connection closes with the process
  }
  close(ready[1]);
  close(hold[0]);
  std::size_t opened = 0;
  ASSERT_EQ(read(ready[0], &opened, sizeof opened), static_cast<ssize_t>(sizeof opened));
  close(ready[0]);
  EXPECT_EQ(opened, kIdle);
  const auto deadline = Clock::now() + 30s;
  while (server_->open_connections() < opened && Clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(server_->open_connections(), opened);
  RawClient client(port_);
  client.send("GET /echo HTTP/1.1\r\nHost: x\r\nx-probe: alive\r\n\r\n");
  const std::string answer = client.read_response();
  EXPECT_EQ(status_of(answer), 200);
  EXPECT_NE(answer.find("|alive"), std::string::npos);
  std::printf("idle connections held: %zu\n", opened);
  close(hold[1]);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace prefixgate::serving
