// Errors on /v1/messages through the gateway are Anthropic-shaped, whoever raises them: the
// gateway's router (405, 401 with a wrong x-api-key), its validation (400), its server core's
// body limit (413), no healthy replica (503), an OpenAI upstream's error re-shaped (404), and a
// replica lost mid-stream (an `error` event), on the native and on the translating path.
// /v1/responses keeps OpenAI's shape.
#include <gtest/gtest.h>

#include "engine_server/test_client.h"
#include "gateway_server/processes.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::gateway::testing {
namespace {

namespace et = prefixgate::engine::server::testing;

const std::map<std::string, std::string> kAnthropicHeaders = {{"x-api-key", "sk-a"},
                                                              {"anthropic-version", "2023-06-01"}};

// The Anthropic error type of a reply, or a note saying what the body was instead.
std::string anthropic_error_type(const Reply& r) {
  auto doc = json::parse(r.body);
  if (!doc || !doc->is_object()) return "not JSON: " + r.body;
  const json::Value* type = doc->find("type");
  const json::Value* error = doc->find("error");
  if (type == nullptr || !type->is_string() || type->as_string() != "error" || error == nullptr ||
      !error->is_object() || error->find("message") == nullptr) {
    return "not Anthropic-shaped: " + r.body;
  }
  return error->find("type")->as_string();
}

std::string messages_body(const std::string& model = "builtin:tiny") {
  return R"({"model":")" + model +
         R"(","max_tokens":4,"messages":[{"role":"user","content":"Hi"}]})";
}

TEST(AgentErrorsTest, EveryErrorOnMessagesIsAnthropicShaped) {
  std::uint16_t pe = 0, port = 0;
  auto engine = start_engine(pe);
  ASSERT_NE(pe, 0);
  const std::string config = write_config("agent-errors", "upstreams:\n  - {url: " + upstream(pe) +
                                                              ", kind: openai}\n"
                                                              "api_keys: [sk-a]\n"
                                                              "limits: {max_body_bytes: 4096}\n");
  auto gw = start_gateway(port, {"--config", config});
  ASSERT_NE(port, 0) << gw->output();
  ASSERT_TRUE(wait_healthy(port, 1));

  Reply r = call(port, http::verb::get, "/v1/messages", {}, kAnthropicHeaders);
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(anthropic_error_type(r), "invalid_request_error");
  r = post(port, "/v1/messages", messages_body());
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(anthropic_error_type(r), "authentication_error");
  r = post(port, "/v1/messages", messages_body(), {{"x-api-key", "sk-wrong"}});
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(anthropic_error_type(r), "authentication_error");
  r = post(port, "/v1/messages", R"({"model":"builtin:tiny","messages":[]})", kAnthropicHeaders);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(anthropic_error_type(r), "invalid_request_error");
  EXPECT_NE(r.body.find("'messages'"), std::string::npos) << r.body;
  r = post(port, "/v1/messages", std::string(5000, ' ') + messages_body(), kAnthropicHeaders);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(anthropic_error_type(r), "request_too_large");
  // The upstream's OpenAI-shaped 404 ("no such model"), re-shaped.
  r = post(port, "/v1/messages", messages_body("claude-elsewhere"), kAnthropicHeaders);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(anthropic_error_type(r), "not_found_error");
  EXPECT_NE(r.body.find("claude-elsewhere"), std::string::npos) << r.body;
  // Bearer works as well as x-api-key; Responses errors stay OpenAI-shaped.
  r = post(port, "/v1/responses", R"({"input":"x","store":true})",
           {{"authorization", "Bearer sk-a"}});
  EXPECT_EQ(r.status, 400);
  auto doc = json::parse(r.body);
  ASSERT_TRUE(doc && doc->find("error") != nullptr) << r.body;
  EXPECT_EQ(doc->find("error")->find("param")->as_string(), "store");

  engine->kill(SIGKILL);
  engine->wait();
  // Health checks eject the replica (a poll with a deadline, not a fixed wait).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (get(port, "/health").body.find("\"healthy_upstreams\":0") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling
  }
  r = post(port, "/v1/messages", messages_body(), kAnthropicHeaders);
  EXPECT_TRUE(r.status == 503 || r.status == 502) << r.status << " " << r.body;
  EXPECT_EQ(anthropic_error_type(r), r.status == 503 ? "overloaded_error" : "api_error");
}

bool has_delta(const std::string& body) {
  return body.find("event: content_block_delta") != std::string::npos;
}

void kill_replica_mid_messages_stream(const std::string& kind) {
  std::uint16_t pe = 0, port = 0;
  auto engine = start_engine(pe, "0.1");
  ASSERT_NE(pe, 0);
  const std::string config = write_config(
      "agent-mid-" + kind, "upstreams:\n  - {url: " + upstream(pe) + ", kind: " + kind + "}\n");
  auto gw = start_gateway(port, {"--config", config});
  ASSERT_NE(port, 0) << gw->output();
  ASSERT_TRUE(wait_healthy(port, 1));

  et::Client client(port, std::chrono::seconds(15));
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(
      client.send(http::verb::post, "/v1/messages",
                  R"({"model":"builtin:tiny","max_tokens":1000,"ignore_eos":true,)"
                  R"("stream":true,"messages":[{"role":"user","content":"A long story"}]})"));
  ASSERT_TRUE(client.read_header());
  ASSERT_EQ(client.status(), 200) << client.body();
  ASSERT_TRUE(client.read_until(has_delta)) << client.body();
  engine->kill(SIGKILL);
  engine->wait();
  const bool got_error = client.read_until(
      [](const std::string& b) { return b.find("event: error\n") != std::string::npos; });
  ASSERT_TRUE(got_error) << client.body().substr(
      client.body().size() > 2000 ? client.body().size() - 2000 : 0);
  const std::string& body = client.body();
  const std::size_t at = body.find("event: error\ndata: ");
  const std::size_t end = body.find("\n\n", at);
  ASSERT_NE(end, std::string::npos);
  auto error = json::parse(body.substr(at + 19, end - at - 19));
  ASSERT_TRUE(error) << body.substr(at);
  EXPECT_EQ(error->find("type")->as_string(), "error");
  EXPECT_EQ(error->find("error")->find("type")->as_string(), "api_error");
  while (client.read_some()) {
  }
  EXPECT_EQ(client.body().find("event: message_stop"), std::string::npos);
}

TEST(AgentErrorsTest, AReplicaLostMidStreamEndsTheNativeMessagesStreamWithAnErrorEvent) {
  kill_replica_mid_messages_stream("prefixgate");
}

TEST(AgentErrorsTest, AReplicaLostMidStreamEndsTheTranslatedMessagesStreamWithAnErrorEvent) {
  kill_replica_mid_messages_stream("openai");
}

}  // namespace
}  // namespace prefixgate::gateway::testing
