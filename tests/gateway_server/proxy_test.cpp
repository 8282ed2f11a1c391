// The gateway as a proxy, for real: prefixgate-engine replicas (sim device) and the prefixgate
// binary on loopback ports the OS picks, and HTTP clients.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <set>

#include "engine_server/test_client.h"
#include "gateway_server/processes.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::gateway::testing {
namespace {

namespace et = prefixgate::engine::server::testing;

std::string chat_body(const std::string& system, const std::string& user, bool stream = false,
                      int max_tokens = 4, const std::string& extra = {}) {
  json::Object body{{"model", "builtin:tiny"},
                    {"messages", json::Array{json::Object{{"role", "system"}, {"content", system}},
                                             json::Object{{"role", "user"}, {"content", user}}}},
                    {"max_tokens", max_tokens},
                    {"temperature", 0}};
  if (stream) body.push_back({"stream", true});
  std::string out = json::to_json(body);
  if (!extra.empty()) out.insert(out.size() - 1, "," + extra);
  return out;
}

std::size_t cached_tokens(const std::string& body) {
  auto doc = json::parse(body);
  if (!doc) return 0;
  const json::Value* usage = doc->find("usage");
  const json::Value* details = usage ? usage->find("prompt_tokens_details") : nullptr;
  const json::Value* cached = details ? details->find("cached_tokens") : nullptr;
  return cached && cached->is_number() ? static_cast<std::size_t>(cached->as_number().value) : 0;
}
std::size_t prompt_tokens(const std::string& body) {
  auto doc = json::parse(body);
  const json::Value* usage = doc ? doc->find("usage") : nullptr;
  const json::Value* p = usage ? usage->find("prompt_tokens") : nullptr;
  return p && p->is_number() ? static_cast<std::size_t>(p->as_number().value) : 0;
}

std::string long_system_prompt(int group) {
  std::string s = "You are assistant number " + std::to_string(group) +
                  " of the support team. Follow these rules carefully. ";
  for (int i = 0; i < 12; ++i) {
    s += "Rule " + std::to_string(i) + " for team " + std::to_string(group) +
         ": answer politely, cite the manual section, never invent facts. ";
  }
  return s;
}

// Two sim replicas behind a cache_aware gateway, shared by the tests of this suite.
class GatewayProxyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    engine_a_ = start_engine(port_a_).release();
    engine_b_ = start_engine(port_b_).release();
    gateway_ = start_gateway(port_, {"--upstream", upstream(port_a_), "--upstream",
                                     upstream(port_b_), "--policy", "cache_aware"})
                   .release();
  }
  static void TearDownTestSuite() {
    delete gateway_;
    delete engine_a_;
    delete engine_b_;
  }
  void SetUp() override {
    ASSERT_NE(port_a_, 0);
    ASSERT_NE(port_b_, 0);
    ASSERT_NE(port_, 0) << gateway_->output();
    ASSERT_TRUE(wait_healthy(port_, 2));
  }
  static inline Process* engine_a_ = nullptr;
  static inline Process* engine_b_ = nullptr;
  static inline Process* gateway_ = nullptr;
  static inline std::uint16_t port_a_ = 0, port_b_ = 0, port_ = 0;
};

TEST_F(GatewayProxyTest, NonStreamingAnswerCarriesReplicaOverheadAndRequestId) {
  const Reply r = post(port_, "/v1/chat/completions", chat_body("Be brief.", "Hello"),
                       {{"x-request-id", "req-abc-123"}});
  ASSERT_EQ(r.status, 200) << r.body;
  auto doc = json::parse(r.body);
  ASSERT_TRUE(doc);
  EXPECT_EQ(doc->find("object")->as_string(), "chat.completion");
  EXPECT_EQ(r.header("x-request-id"), "req-abc-123");
  const std::string replica = r.header("x-prefixgate-replica");
  EXPECT_TRUE(replica == upstream(port_a_) || replica == upstream(port_b_)) << replica;
  EXPECT_FALSE(r.header("x-prefixgate-overhead-us").empty());

  const Reply created = post(port_, "/v1/completions", R"({"prompt":"Hi","max_tokens":2})");
  ASSERT_EQ(created.status, 200) << created.body;
  EXPECT_FALSE(created.header("x-request-id").empty());
  EXPECT_EQ(json::parse(created.body)->find("object")->as_string(), "text_completion");
}

TEST_F(GatewayProxyTest, StreamingForwardsEventsAndStripsTheUsageChunkItAskedFor) {
  const Reply plain =
      post(port_, "/v1/chat/completions", chat_body("Be brief.", "Stream please", true, 6));
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_EQ(plain.header("content-type").rfind("text/event-stream", 0), 0u);
  const et::SseEvents events = et::parse_sse(plain.body);
  EXPECT_TRUE(events.well_formed);
  EXPECT_TRUE(events.done);
  ASSERT_GE(events.chunks.size(), 2u);
  for (const json::Value& c : events.chunks) {
    const json::Value* usage = c.find("usage");
    EXPECT_TRUE(!usage || usage->is_null()) << json::to_json(c);
  }
  EXPECT_FALSE(plain.header("x-prefixgate-replica").empty());

  const Reply asked = post(port_, "/v1/chat/completions",
                           chat_body("Be brief.", "Stream please", true, 6,
                                     R"("stream_options":{"include_usage":true})"));
  ASSERT_EQ(asked.status, 200);
  const et::SseEvents with_usage = et::parse_sse(asked.body);
  ASSERT_FALSE(with_usage.chunks.empty());
  const json::Value* usage = with_usage.chunks.back().find("usage");
  ASSERT_TRUE(usage && usage->is_object()) << asked.body;
  EXPECT_GT(usage->find("prompt_tokens")->as_number().value, 0);
}

TEST_F(GatewayProxyTest, BlockHashesEqualTheEngineKvEventHashes) {
  const std::string body = chat_body(long_system_prompt(99), "Which hashes?");
  const Reply explain = post(port_, "/prefixgate/explain/chat/completions", body);
  ASSERT_EQ(explain.status, 200) << explain.body;
  auto plan = json::parse(explain.body);
  ASSERT_TRUE(plan);
  const json::Array& hashes = plan->find("block_hashes")->as_array();
  ASSERT_GT(hashes.size(), 10u);

  const Reply r = post(port_, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200);
  const std::string replica = r.header("x-prefixgate-replica");
  const std::uint16_t engine_port = replica == upstream(port_a_) ? port_a_ : port_b_;
  // The engine's snapshot is its first kv_events line.
  et::Client events(engine_port);
  ASSERT_TRUE(events.send(http::verb::get, "/v1/kv_events"));
  ASSERT_TRUE(events.read_header());
  ASSERT_TRUE(events.read_until([](const std::string& b) { return b.find('\n') != b.npos; }));
  auto snapshot = json::parse(events.body().substr(0, events.body().find('\n')));
  ASSERT_TRUE(snapshot);
  std::set<std::string> held;
  for (const json::Value& b : snapshot->find("blocks")->as_array()) {
    held.insert(b.find("hash")->as_string());
  }
  for (const json::Value& h : hashes) {
    EXPECT_TRUE(held.count(h.as_string())) << "engine does not hold " << h.as_string();
  }
  // And the second identical request is predicted, and served, from cache.
  const Reply again = post(port_, "/v1/chat/completions", body);
  ASSERT_EQ(again.status, 200);
  EXPECT_EQ(again.header("x-prefixgate-replica"), replica);
  EXPECT_EQ(again.header("x-prefixgate-predicted-cached-tokens"),
            std::to_string(hashes.size() * 16));
  EXPECT_EQ(cached_tokens(again.body), hashes.size() * 16);
}

TEST_F(GatewayProxyTest, BadRequestsGetOpenAiShapedErrors) {
  const Reply malformed = post(port_, "/v1/chat/completions", "{\"messages\": [");
  EXPECT_EQ(malformed.status, 400);
  auto err = json::parse(malformed.body);
  ASSERT_TRUE(err) << malformed.body;
  const json::Value* e = err->find("error");
  ASSERT_TRUE(e && e->is_object());
  EXPECT_TRUE(e->find("message")->is_string());
  EXPECT_EQ(e->find("type")->as_string(), "invalid_request_error");
  EXPECT_EQ(e->find("code")->as_string(), "invalid_json");

  const Reply wrong_type = post(port_, "/v1/chat/completions", R"({"messages":"hi"})");
  EXPECT_EQ(wrong_type.status, 400);

  const Reply unknown = get(port_, "/nope");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_TRUE(json::parse(unknown.body));

  const Reply oversized =
      post(port_, "/v1/completions", R"({"prompt":")" + std::string(17u << 20, 'a') + "\"}");
  EXPECT_EQ(oversized.status, 413);
}

TEST_F(GatewayProxyTest, ModelsHealthAndMetrics) {
  const Reply models = get(port_, "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_NE(models.body.find("builtin:tiny"), std::string::npos);
  ASSERT_EQ(post(port_, "/v1/chat/completions", chat_body("Metrics", "count me")).status, 200);
  const Reply metrics = get(port_, "/metrics");
  ASSERT_EQ(metrics.status, 200);
  for (const char* family :
       {"prefixgate_requests_total", "prefixgate_time_to_first_token_seconds",
        "prefixgate_request_duration_seconds", "prefixgate_gateway_overhead_seconds",
        "prefixgate_prompt_tokens_total", "prefixgate_cached_tokens_total",
        "prefixgate_predicted_cached_tokens_total", "prefixgate_routing_decisions_total",
        "prefixgate_upstream_healthy", "prefixgate_index_size_hashes", "prefixgate_kv_events_total",
        "prefixgate_canonicalization_changes_total"}) {
    EXPECT_NE(metrics.body.find(std::string("# TYPE ") + family), std::string::npos) << family;
  }
  EXPECT_NE(
      metrics.body.find("prefixgate_upstream_healthy{replica=\"" + upstream(port_a_) + "\"} 1"),
      std::string::npos);
}

TEST(GatewayNoUpstreamTest, AnswersServiceUnavailable) {
  // A port nothing listens on: bind one, then close it.
  std::uint16_t dead = 0;
  {
    asio::io_context ioc;
    asio::ip::tcp::acceptor a(ioc, {asio::ip::make_address("127.0.0.1"), 0});
    dead = a.local_endpoint().port();
  }
  std::uint16_t port = 0;
  auto gw = start_gateway(port, {"--upstream", upstream(dead)});
  ASSERT_NE(port, 0) << gw->output();
  const Reply health = get(port, "/health");
  EXPECT_EQ(health.status, 503);
  const Reply r = post(port, "/v1/chat/completions", chat_body("x", "y"));
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.body.find("no_healthy_upstream"), std::string::npos);
}

// Shared-prefix traffic: a few groups of prompts with a long common system prompt. Routed
// cache-aware, every group stays on one replica and most prompt tokens come from cache; routed
// round-robin over fresh engines, every replica prefills every group again.
double hit_ratio(const std::string& policy, bool check_convergence) {
  std::uint16_t pa = 0, pb = 0, pc = 0, port = 0;
  auto a = start_engine(pa);
  auto b = start_engine(pb);
  auto c = start_engine(pc);
  auto gw = start_gateway(port, {"--upstream", upstream(pa), "--upstream", upstream(pb),
                                 "--upstream", upstream(pc), "--policy", policy});
  EXPECT_TRUE(wait_healthy(port, 3));
  std::size_t prompt = 0, cached = 0;
  for (int group = 0; group < 4; ++group) {
    std::set<std::string> replicas;
    for (int i = 0; i < 6; ++i) {
      const Reply r = post(
          port, "/v1/chat/completions",
          chat_body(long_system_prompt(group), "Question " + std::to_string(i) + " about item " +
                                                   std::to_string(group * 100 + i)));
      EXPECT_EQ(r.status, 200) << r.body;
      prompt += prompt_tokens(r.body);
      cached += cached_tokens(r.body);
      replicas.insert(r.header("x-prefixgate-replica"));
    }
    if (check_convergence) {
      EXPECT_EQ(replicas.size(), 1u) << "group " << group;
    }
  }
  return prompt == 0 ? 0.0 : static_cast<double>(cached) / static_cast<double>(prompt);
}

TEST(GatewayRoutingTest, CacheAwareConvergesAndBeatsRoundRobinOnSharedPrefixes) {
  const double cache_aware = hit_ratio("cache_aware", true);
  const double round_robin = hit_ratio("round_robin", false);
  EXPECT_GT(cache_aware, 0.7);
  EXPECT_GT(cache_aware, round_robin * 1.4)
      << "cache_aware " << cache_aware << " round_robin " << round_robin;
}

TEST(GatewayFailoverTest, KilledReplicaCostsNoRequestThatHadNotStartedStreaming) {
  std::uint16_t pa = 0, pb = 0, port = 0;
  auto a = start_engine(pa, "5");
  auto b = start_engine(pb, "5");
  auto gw = start_gateway(
      port, {"--upstream", upstream(pa), "--upstream", upstream(pb), "--policy", "round_robin"});
  ASSERT_TRUE(wait_healthy(port, 2));
  std::atomic<int> ok{0}, failed{0}, done{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 12; ++i) {
        const Reply r = post(
            port, "/v1/chat/completions",
            chat_body("Client " + std::to_string(t), "Request " + std::to_string(i), false, 24));
        (r.status == 200 ? ok : failed)++;
        done++;
      }
    });
  }
  while (done.load() < 8) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  b->kill(SIGKILL);
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(ok.load(), 48);
  const Reply metrics = get(port, "/metrics");
  EXPECT_NE(metrics.body.find("prefixgate_upstream_healthy{replica=\"" + upstream(pb) + "\"} 0"),
            std::string::npos);
  // Requests did reach the dead replica and were retried elsewhere.
  EXPECT_NE(metrics.body.find("prefixgate_retries_total{reason="), std::string::npos);
}

}  // namespace
}  // namespace prefixgate::gateway::testing
