// The gateway when things go wrong, for real: a replica killed mid-stream, SIGTERM while a
// stream is in flight, an upstream that accepts requests but never answers them, and a replica
// that hangs (SIGSTOP) long enough to be ejected, then resumes.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <csignal>
#include <thread>

#include "engine_server/test_client.h"
#include "gateway_server/processes.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::gateway::testing {
namespace {

namespace et = prefixgate::engine::server::testing;

// A stream that lasts seconds on a slow sim engine: many tokens, no early end.
std::string long_stream_body(int max_tokens) {
  return json::to_json(json::Object{
      {"model", "builtin:tiny"},
      {"messages", json::Array{json::Object{{"role", "user"}, {"content", "Tell a long story"}}}},
      {"max_tokens", max_tokens},
      {"ignore_eos", true},
      {"stream", true}});
}

bool has_data_event(const std::string& body) {
  return body.find("data: {") != std::string::npos;
}

TEST(GatewayFailureTest, ReplicaKilledMidStreamEndsTheStreamWithAnSseErrorEvent) {
  std::uint16_t pe = 0, port = 0;
  auto engine = start_engine(pe, "0.1");
  ASSERT_NE(pe, 0);
  auto gw = start_gateway(port, {"--upstream", upstream(pe)});
  ASSERT_NE(port, 0) << gw->output();
  ASSERT_TRUE(wait_healthy(port, 1));

  et::Client client(port, std::chrono::seconds(15));
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.send(http::verb::post, "/v1/chat/completions", long_stream_body(1000)));
  ASSERT_TRUE(client.read_header());
  ASSERT_EQ(client.status(), 200) << client.body();
  ASSERT_TRUE(client.read_until(has_data_event)) << client.body();
  ASSERT_EQ(client.body().find("[DONE]"), std::string::npos) << "stream ended before the kill";

  engine->kill(SIGKILL);
  engine->wait();
  // Each read is bounded by the client's deadline: a hang fails here instead of blocking.
  const bool got_error = client.read_until(
      [](const std::string& b) { return b.find("data: {\"error\":") != std::string::npos; });
  ASSERT_TRUE(got_error) << client.body().substr(
      client.body().size() > 2000 ? client.body().size() - 2000 : 0);
  const std::string& body = client.body();
  const std::size_t at = body.find("data: {\"error\":");
  const std::size_t end = body.find("\n\n", at);
  ASSERT_NE(end, std::string::npos);
  auto error = json::parse(body.substr(at + 6, end - at - 6));
  ASSERT_TRUE(error) << body.substr(at);
  const json::Value* e = error->find("error");
  ASSERT_TRUE(e && e->is_object());
  EXPECT_EQ(e->find("code")->as_string(), "upstream_stream_error");
  EXPECT_TRUE(e->find("message")->is_string());
  // Then the response ends (last chunk) rather than hanging open.
  while (client.read_some()) {
  }
  EXPECT_EQ(body.find("[DONE]"), std::string::npos);
  EXPECT_TRUE(et::parse_sse(client.body()).well_formed) << client.body().substr(at);
  const Reply metrics = get(port, "/metrics");
  EXPECT_NE(metrics.body.find("kind=\"mid_stream\""), std::string::npos);
}

TEST(GatewayFailureTest, SigtermLetsTheInFlightStreamFinishRefusesNewWorkAndExitsZero) {
  std::uint16_t pe = 0, port = 0;
  auto engine = start_engine(pe, "0.2");
  ASSERT_NE(pe, 0);
  auto gw = start_gateway(port, {"--upstream", upstream(pe)});
  ASSERT_NE(port, 0) << gw->output();
  ASSERT_TRUE(wait_healthy(port, 1));

  et::Client client(port, std::chrono::seconds(20));
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.send(http::verb::post, "/v1/chat/completions", long_stream_body(300)));
  ASSERT_TRUE(client.read_header());
  ASSERT_EQ(client.status(), 200);
  ASSERT_TRUE(client.read_until(has_data_event));
  ASSERT_EQ(client.body().find("[DONE]"), std::string::npos) << "stream ended before SIGTERM";

  gw->kill(SIGTERM);
  // New work is refused (connection refused) or answered 503 while the stream drains.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int refused_with = -1;
  while (std::chrono::steady_clock::now() < deadline) {
    const Reply r = call(port, http::verb::post, "/v1/chat/completions",
                         R"({"messages":[{"role":"user","content":"late"}],"max_tokens":2})", {},
                         std::chrono::seconds(5));
    if (r.status == 0 || r.status == 503) {
      refused_with = r.status;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling, not synchronizing
  }
  EXPECT_NE(refused_with, -1) << "new requests were still served after SIGTERM";

  ASSERT_TRUE(client.read_until([](const std::string& b) {
    return b.find("data: [DONE]") != std::string::npos;
  })) << client.body().substr(client.body().size() > 1000 ? client.body().size() - 1000 : 0);
  const et::SseEvents events = et::parse_sse(client.body());
  EXPECT_TRUE(events.well_formed);
  ASSERT_FALSE(events.chunks.empty());
  EXPECT_EQ(client.body().find("\"error\""), std::string::npos);

  // The process exits by itself, with 0, once the stream is done.
  EXPECT_EQ(gw->wait_for(std::chrono::seconds(15)), 0) << gw->output();
}

// Accepts connections and answers GET /health (so the gateway admits it), but never answers
// anything else: the first-byte timeout is the only way out.
class SilentUpstream {
 public:
  SilentUpstream() {
    fd_ = listen_on_loopback(port_);
    if (fd_ < 0) return;
    thread_ = std::thread([this] { serve(); });
  }
  ~SilentUpstream() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (const Conn& c : conns_) close(c.fd);
    close(fd_);
  }
  std::uint16_t port() const { return port_; }
  int requests_held() const { return held_.load(); }

 private:
  struct Conn {
    int fd;
    std::string buffer;
    bool silent = false;
  };
  void serve() {
    while (!stop_) {
      std::vector<pollfd> fds{{fd_, POLLIN, 0}};
      for (const Conn& c : conns_) fds.push_back({c.fd, POLLIN, 0});
      if (poll(fds.data(), fds.size(), 50) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        const int c = accept(fd_, nullptr, nullptr);
        if (c >= 0) conns_.push_back({c, {}, false});
      }
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        Conn& c = conns_[i - 1];
        char buf[4096];
        const ssize_t n = read(c.fd, buf, sizeof buf);
        if (n <= 0) {
          close(c.fd);
          c.fd = -1;
          continue;
        }
        if (c.silent) continue;
        c.buffer.append(buf, static_cast<std::size_t>(n));
        if (c.buffer.find("\r\n\r\n") == std::string::npos) continue;
        if (c.buffer.starts_with("GET /health")) {
          static const std::string ok =
              "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 15\r\n\r\n"
              "{\"status\":\"ok\"}";
          (void)!write(c.fd, ok.data(), ok.size());
          c.buffer.clear();
        } else {
          c.silent = true;  // hold it: no answer, ever
          ++held_;
        }
      }
      std::erase_if(conns_, [](const Conn& c) { return c.fd < 0; });
    }
  }

  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> held_{0};
  std::vector<Conn> conns_;  // the serving thread's only
  std::thread thread_;
};

TEST(GatewayFailureTest, UpstreamThatNeverAnswersGets504AfterTheFirstByteTimeout) {
  SilentUpstream silent;
  ASSERT_NE(silent.port(), 0);
  const std::string config =
      write_config("silent", "upstreams:\n  - url: " + upstream(silent.port()) +
                                 "\ntimeouts: {first_byte_ms: 800, "
                                 "health_interval_ms: 200}\n");
  std::uint16_t port = 0;
  auto gw = start_gateway(port, {"--config", config});
  ASSERT_NE(port, 0) << gw->output();
  ASSERT_TRUE(wait_healthy(port, 1));
  const Reply r = post(port, "/v1/chat/completions",
                       R"({"messages":[{"role":"user","content":"anyone?"}],"max_tokens":2})");
  EXPECT_TRUE(r.ok) << "no complete answer: the gateway hung";
  EXPECT_EQ(r.status, 504) << r.body;
  EXPECT_NE(r.body.find("upstream_timeout"), std::string::npos) << r.body;
  EXPECT_GE(silent.requests_held(), 1);
}

TEST(GatewayFailureTest, FirstByteTimeoutIsRetriedOnAnotherReplica) {
  SilentUpstream silent;
  ASSERT_NE(silent.port(), 0);
  std::uint16_t pe = 0, port = 0;
  auto engine = start_engine(pe);
  ASSERT_NE(pe, 0);
  const std::string config =
      write_config("silent-retry", "upstreams:\n  - url: " + upstream(silent.port()) +
                                       "\n  - url: " + upstream(pe) +
                                       "\npolicy: round_robin\ntimeouts: {first_byte_ms: 800, "
                                       "health_interval_ms: 200}\n");
  auto gw = start_gateway(port, {"--config", config});
  ASSERT_NE(port, 0) << gw->output();
  ASSERT_TRUE(wait_healthy(port, 2));
  for (int i = 0; i < 4; ++i) {
    const Reply r = post(port, "/v1/chat/completions",
                         R"({"messages":[{"role":"user","content":"retry me )" + std::to_string(i) +
                             R"("}],"max_tokens":2})");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("x-prefixgate-replica"), upstream(pe));
  }
  EXPECT_GE(silent.requests_held(), 1);
  const Reply metrics = get(port, "/metrics");
  EXPECT_NE(metrics.body.find("prefixgate_retries_total{reason=\"timeout\"}"), std::string::npos)
      << metrics.body;
}

// The gateway's index blocks for `replica` from /metrics; -1 when the line is missing.
long index_blocks(std::uint16_t port, const std::string& replica) {
  const Reply r = get(port, "/metrics");
  const std::string key = "prefixgate_index_blocks{replica=\"" + replica + "\"} ";
  const std::size_t at = r.body.find(key);
  if (at == std::string::npos) return -1;
  return std::strtol(r.body.c_str() + at + key.size(), nullptr, 10);
}

template <typename Pred>
bool poll_until(Pred pred, std::chrono::seconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling, not synchronizing
  }
  return pred();
}

// A replica that hangs (SIGSTOP) is ejected by its failed health checks, which makes the index
// forget its blocks; its /v1/kv_events stream stays open (the stop is shorter than idle_ms).
// When it resumes, the blocks it still holds must come back: the follower asks for a fresh
// snapshot instead of carrying on with deltas (which left the index empty for that replica).
TEST(GatewayFailureTest, HungReplicaEjectedThenResumedIsRelearnedFromAFreshSnapshot) {
  std::uint16_t pe = 0, port = 0;
  auto engine = start_engine(pe);
  ASSERT_NE(pe, 0);
  const std::string config = write_config(
      "hung", "upstreams:\n  - url: " + upstream(pe) +
                  "\ntimeouts: {health_interval_ms: 200, first_byte_ms: 5000, idle_ms: 30000}\n");
  auto gw = start_gateway(port, {"--config", config});
  ASSERT_NE(port, 0) << gw->output();
  ASSERT_TRUE(wait_healthy(port, 1));
  for (int i = 0; i < 4; ++i) {
    const Reply r = post(port, "/v1/chat/completions",
                         R"({"messages":[{"role":"user","content":")" + std::to_string(i) +
                             std::string(200, 'a' + i) + R"("}],"max_tokens":2})");
    ASSERT_EQ(r.status, 200) << r.body;
  }
  long held = 0;
  ASSERT_TRUE(poll_until([&] { return (held = index_blocks(port, upstream(pe))) >= 40; })) << held;

  engine->kill(SIGSTOP);
  const bool ejected = poll_until([&] { return index_blocks(port, upstream(pe)) == 0; });
  engine->kill(SIGCONT);
  ASSERT_TRUE(ejected) << "the hung replica was not ejected";
  ASSERT_TRUE(wait_healthy(port, 1));
  long relearned = 0;
  EXPECT_TRUE(poll_until([&] { return (relearned = index_blocks(port, upstream(pe))) >= held; }))
      << "index holds " << relearned << " of the replica's " << held << " blocks after it resumed";
}

}  // namespace
}  // namespace prefixgate::gateway::testing
