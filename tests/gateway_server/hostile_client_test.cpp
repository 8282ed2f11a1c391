// Hostile and broken clients against the real gateway process in front of a real engine: a
// client that vanishes mid-stream (the engine's sequence is aborted, not run to the end), bodies
// with invalid UTF-8 or raw NUL bytes (400 in the API's own error shape), a NUL in a header, and
// a slowloris request line bounded by timeouts.client_request_ms (408). The HTTP-level cases
// (smuggling shapes, chunk sizes, limits, idle connections) are tests/serving/hostile_client_test.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "engine_server/test_client.h"
#include "gateway_server/processes.h"
#include "prefixgate/canonicalize/json.h"
#include "serving/raw_client.h"

namespace prefixgate::gateway::testing {
namespace {

namespace et = prefixgate::engine::server::testing;
using prefixgate::testing::RawClient;
using prefixgate::testing::status_of;
using namespace std::chrono_literals;

template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = 10000ms) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(20ms);  // polling, not synchronizing
  }
  return pred();
}

TEST(GatewayHostileClientTest, AClientThatVanishesMidStreamAbortsTheEnginesSequence) {
  std::uint16_t pe = 0, port = 0;
  auto engine = start_engine(pe, "0.1");  // slow: the whole stream would take ~25 s
  auto gw = start_gateway(port, {"--upstream", upstream(pe)});
  ASSERT_TRUE(wait_healthy(port, 1)) << gw->output();

  et::Client client(port, std::chrono::seconds(15));
  ASSERT_TRUE(client.send(
      http::verb::post, "/v1/chat/completions",
      json::to_json(json::Object{
          {"model", "builtin:tiny"},
          {"messages", json::Array{json::Object{{"role", "user"}, {"content", "a long story"}}}},
          {"max_tokens", 1000},
          {"ignore_eos", true},
          {"stream", true}})));
  ASSERT_TRUE(client.read_header());
  ASSERT_EQ(client.status(), 200) << client.body();
  ASSERT_TRUE(client.read_until([](const std::string& b) { return b.find("data: {") != b.npos; }));
  ASSERT_TRUE(eventually([&] {
    return metric_value(get(pe, "/metrics").body, "prefixgate_engine_num_requests_running") == 1;
  }));

  client.close();
  EXPECT_TRUE(eventually([&] {
    return metric_value(get(pe, "/metrics").body, "prefixgate_engine_num_requests_running") == 0;
  })) << get(pe, "/metrics").body.substr(0, 2000);
  // The gateway still serves.
  EXPECT_EQ(get(port, "/health").status, 200);
}

TEST(GatewayHostileClientTest, InvalidUtf8AndRawNulBytesInBodiesAre400InTheApisShape) {
  std::uint16_t pe = 0, port = 0;
  auto engine = start_engine(pe);
  auto gw = start_gateway(port, {"--upstream", upstream(pe)});
  ASSERT_TRUE(wait_healthy(port, 1)) << gw->output();
  using namespace std::string_literals;
  for (const std::string& content : {"caf\xc3"s, "\xff\xfe"s, "a\0b"s, "\xed\xa0\x80"s}) {
    const std::string chat = R"({"messages":[{"role":"user","content":")" + content + "\"}]}";
    const Reply r = post(port, "/v1/chat/completions", chat);
    EXPECT_EQ(r.status, 400) << r.body;
    auto doc = json::parse(r.body);
    ASSERT_TRUE(doc && doc->find("error") && doc->find("error")->is_object()) << r.body;
    EXPECT_TRUE(doc->find("error")->find("message")->is_string());

    const std::string messages =
        R"({"model":"m","max_tokens":8,"messages":[{"role":"user","content":")" + content + "\"}]}";
    const Reply m = post(port, "/v1/messages", messages);
    EXPECT_EQ(m.status, 400) << m.body;
    auto mdoc = json::parse(m.body);
    ASSERT_TRUE(mdoc && mdoc->find("type") && mdoc->find("type")->is_string()) << m.body;
    EXPECT_EQ(mdoc->find("type")->as_string(), "error");
    ASSERT_TRUE(mdoc->find("error") && mdoc->find("error")->is_object()) << m.body;
  }
  // An escaped NUL is valid JSON text and reaches the engine.
  const Reply ok = post(port, "/v1/chat/completions",
                        R"({"messages":[{"role":"user","content":"a\u0000b"}],"max_tokens":2})");
  EXPECT_EQ(ok.status, 200) << ok.body;
}

TEST(GatewayHostileClientTest, NulInAHeaderIs400AndASlowRequestLineIs408) {
  std::uint16_t pe = 0, port = 0;
  auto engine = start_engine(pe);
  const std::string config = write_config(
      "hostile", "timeouts: {client_request_ms: 300}\nupstreams:\n  - url: " + upstream(pe) + "\n");
  auto gw = start_gateway(port, {"--config", config});
  ASSERT_TRUE(wait_healthy(port, 1)) << gw->output();

  {
    RawClient client(port);
    using namespace std::string_literals;
    client.send("GET /health HTTP/1.1\r\nHost: x\r\nx-tenant: a\0b\r\n\r\n"s);
    const std::string answer = client.read_until_close_or();
    EXPECT_EQ(status_of(answer), 400) << answer;
    EXPECT_TRUE(client.closed_by_peer());
  }
  {
    RawClient client(port);
    const auto start = std::chrono::steady_clock::now();
    for (const char ch : std::string("GET /health HTTP/1.1\r\nHost: x\r\n")) {
      if (!client.send(std::string_view(&ch, 1))) break;
      std::this_thread::sleep_for(50ms);
    }
    const std::string answer = client.read_until_close_or();
    EXPECT_EQ(status_of(answer), 408) << answer;
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
    EXPECT_NE(answer.find("\"request_timeout\""), std::string::npos) << answer;
  }
  EXPECT_EQ(get(port, "/health").status, 200);
}

// curl sends `Expect: 100-continue` with a body over 1 MB and waits a second for the go-ahead:
// the gateway gives it, and does not pass the expectation on. A replica asked for a go-ahead
// answers `100 Continue` before its answer, which the gateway would have relayed as the answer.
TEST(GatewayHostileClientTest, ABodyAfterExpectContinueIsAnsweredAndTheExpectationNotPassedOn) {
  std::uint16_t pe = 0, port = 0;
  auto engine = start_engine(pe);
  auto gw = start_gateway(port, {"--upstream", upstream(pe)});
  ASSERT_TRUE(wait_healthy(port, 1)) << gw->output();
  const auto exchange = [&](const std::string& path, const std::string& body) {
    RawClient client(port, 5s);
    client.send("POST " + path +
                " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                "Expect: 100-continue\r\nContent-Length: " +
                std::to_string(body.size()) + "\r\n\r\n");
    const std::string go_ahead = client.read_response();
    EXPECT_EQ(go_ahead, "HTTP/1.1 100 Continue\r\n\r\n") << path;
    client.send(body);
    return client.read_response();
  };
  const std::string chat =
      exchange("/v1/chat/completions",
               R"({"model":"builtin:tiny","max_tokens":2,"messages":[{"role":"user","content":")" +
                   std::string(100, 'a') + "\"}]}");
  EXPECT_EQ(status_of(chat), 200) << chat.substr(0, 400);
  // A route the gateway passes through as it is: the replica's own answer (it serves no such
  // route), after a body long enough that the replica reads its header before all of it.
  const std::string other = exchange("/v1/no_such_route", std::string(2 << 20, ' ') + "{}");
  EXPECT_EQ(status_of(other), 404) << other.substr(0, 400);
}

// Load balancers check health with HEAD as often as with GET: the gateway and the engine answer
// it with GET's status and head and no body.
TEST(GatewayHostileClientTest, HeadHealthIsAnsweredWithoutABody) {
  std::uint16_t pe = 0, port = 0;
  auto engine = start_engine(pe);
  auto gw = start_gateway(port, {"--upstream", upstream(pe)});
  ASSERT_TRUE(wait_healthy(port, 1)) << gw->output();
  for (const std::uint16_t p : {port, pe}) {
    RawClient client(p, 3s);
    client.send("HEAD /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    const std::string both = client.read_until_close_or("}");
    const std::size_t head_end = both.find("\r\n\r\n");
    ASSERT_NE(head_end, std::string::npos) << both;
    EXPECT_EQ(status_of(both), 200) << both;
    EXPECT_EQ(status_of(both.substr(head_end + 4)), 200) << "no body after HEAD's head: " << both;
  }
}

TEST(GatewayHostileClientTest, ApiKeysMatchOnlyWholeNeverByPrefixOrExtension) {
  // The keys are compared in constant time (every byte, every configured key): what must still
  // hold is that only the exact key passes.
  std::uint16_t pe = 0, port = 0;
  auto engine = start_engine(pe);
  const std::string config = write_config(
      "keys", "api_keys: [sk-first-key, {key: sk-second, tenant: t2}]\nupstreams:\n  - url: " +
                  upstream(pe) + "\n");
  auto gw = start_gateway(port, {"--config", config});
  ASSERT_TRUE(wait_healthy(port, 1)) << gw->output();
  const auto status = [&](const std::string& key) {
    return call(port, http::verb::get, "/v1/models", {}, {{"authorization", "Bearer " + key}})
        .status;
  };
  EXPECT_EQ(status("sk-first-key"), 200);
  EXPECT_EQ(status("sk-second"), 200);
  for (const char* bad : {"sk-first-ke", "sk-first-keyX", "sk-second-key", "sk-secon", "", "s",
                          "sk-first-kez", "tk-first-key"}) {
    EXPECT_EQ(status(bad), 401) << bad;
  }
}

}  // namespace
}  // namespace prefixgate::gateway::testing
