// Admission control through a real gateway process in front of sim engines: each tenant limit
// answers 429 with Retry-After and a body in the API's shape naming the limit; tokens are
// charged by estimate and settled to the reported usage; under the gateway-wide bound a tenant
// sending ten times more does not starve a light one; the queue's bound and timeout answer 503;
// a client that leaves while queued frees its place; bad keys exit 2 naming them. Orderings and
// counts are asserted, never durations (the sim engine runs slowed down only so that requests
// overlap).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "gateway_server/processes.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::gateway::testing {
namespace {

// A completion of `max_tokens` generated tokens ("" = the engine's default of 16).
std::string completion(const std::string& max_tokens = "", bool stream = false) {
  std::string body =
      R"({"prompt":"Hello there","stream":)" + std::string(stream ? "true" : "false");
  if (!max_tokens.empty()) body += R"(,"max_tokens":)" + max_tokens;
  return body + "}";
}

Reply send(std::uint16_t port, const std::string& tenant, const std::string& body,
           const std::string& target = "/v1/completions") {
  return post(port, target, body, {{"x-tenant", tenant}});
}

// One sample of the gateway's /metrics, e.g. `prefixgate_admission_queued{tenant="a"}`; 0 when
// the series is not there yet.
double metric(std::uint16_t port, const std::string& series) {
  const double value = metric_value(get(port, "/metrics").body, series);
  return value < 0 ? 0 : value;
}

// Polls until `series` reaches `want` (or, `at_least`, passes it): a deadline, not a fixed sleep.
bool wait_metric(std::uint16_t port, const std::string& series, double want,
                 std::chrono::seconds timeout = std::chrono::seconds(20), bool at_least = false) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    const double v = metric(port, series);
    if (v == want || (at_least && v > want)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::string q(const std::string& tenant) {
  return "prefixgate_admission_queued{tenant=\"" + tenant + "\"}";
}
std::string inflight(const std::string& tenant) {
  return "prefixgate_admission_inflight{tenant=\"" + tenant + "\"}";
}

json::Value parse(const std::string& body) {
  auto v = json::parse(body);
  EXPECT_TRUE(v.ok()) << body;
  return v.ok() ? *v : json::Value();
}

std::string str(const json::Value& v, std::string_view a, std::string_view b) {
  const json::Value* outer = v.find(a);
  const json::Value* inner = outer ? outer->find(b) : nullptr;
  return inner && inner->is_string() ? inner->as_string() : std::string();
}

// A gateway with `yaml` (tenants from x-tenant) in front of one sim engine at `speedup`.
struct Fleet {
  explicit Fleet(const std::string& yaml, const std::string& speedup = "inf") {
    engine = start_engine(engine_port, speedup);
    gateway = start_gateway(
        port, {"--config", write_config("admission", "tenant_header: x-tenant\n" + yaml),
               "--upstream", upstream(engine_port)});
    healthy = port != 0 && wait_healthy(port);
  }
  std::uint16_t engine_port = 0, port = 0;
  std::unique_ptr<Process> engine, gateway;
  bool healthy = false;
};

TEST(GatewayAdmissionTest, RequestsPerMinuteRefusesTheNextWith429RetryAfterAndItsShape) {
  Fleet f("tenant_limits: {default: {requests_per_minute: 3}}\n");
  ASSERT_TRUE(f.healthy);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(send(f.port, "a", completion()).status, 200) << i;
  const Reply r = send(f.port, "a", completion());
  EXPECT_EQ(r.status, 429);
  // One request per 20 s: the wait is up to 20 s, rounded up, at least 1.
  const int retry = std::stoi(r.header("retry-after").empty() ? "0" : r.header("retry-after"));
  EXPECT_GE(retry, 1);
  EXPECT_LE(retry, 20);
  const json::Value body = parse(r.body);
  EXPECT_EQ(str(body, "error", "type"), "rate_limit_error");
  EXPECT_EQ(str(body, "error", "code"), "requests_per_minute_exceeded");
  EXPECT_NE(str(body, "error", "message").find("requests_per_minute"), std::string::npos);
  // On the Messages API, Anthropic's shape.
  const Reply m = send(f.port, "a",
                       R"({"model":"builtin:tiny","max_tokens":4,)"
                       R"("messages":[{"role":"user","content":"Hi"}]})",
                       "/v1/messages");
  EXPECT_EQ(m.status, 429);
  EXPECT_FALSE(m.header("retry-after").empty());
  const json::Value anthropic = parse(m.body);
  const json::Value* type = anthropic.find("type");
  EXPECT_TRUE(type && type->is_string() && type->as_string() == "error") << m.body;
  EXPECT_EQ(str(anthropic, "error", "type"), "rate_limit_error");
  // Another tenant has its own bucket from the default.
  EXPECT_EQ(send(f.port, "b", completion()).status, 200);
  EXPECT_EQ(metric(f.port,
                   "prefixgate_admission_rejected_total{tenant=\"a\",reason=\"requests_"
                   "per_minute\"}"),
            2);
  EXPECT_EQ(metric(f.port, "prefixgate_admission_admitted_total{tenant=\"a\"}"), 3);
  EXPECT_EQ(
      metric(f.port, "prefixgate_tenant_limit{tenant=\"default\",limit=\"requests_per_minute\"}"),
      3);
}

// Charged prompt + default_max_tokens (150) but using prompt + 16 (the engine's default): the
// settlement gives the difference back, so six such requests fit in 400 tokens a minute where
// charges alone would refuse the third. A request estimated past the whole minute is refused.
TEST(GatewayAdmissionTest, TokensPerMinuteChargesTheEstimateAndSettlesToUsage) {
  Fleet f(
      "tenant_limits: {default: {tokens_per_minute: 400}}\n"
      "admission: {default_max_tokens: 150}\n");
  ASSERT_TRUE(f.healthy);
  // Three streams, then three whole bodies: either kind left unsettled would refuse its third.
  for (int i = 0; i < 6; ++i) {
    const Reply r = send(f.port, "a", completion("", /*stream=*/i < 3));
    ASSERT_EQ(r.status, 200) << "request " << i << ": " << r.body;
  }
  const Reply big = send(f.port, "a", completion("400"));
  EXPECT_EQ(big.status, 429);
  EXPECT_EQ(str(parse(big.body), "error", "code"), "tokens_per_minute_exceeded");
  EXPECT_FALSE(big.header("retry-after").empty());
  // What is left (400 less six settled requests, ~270) cannot take an estimate of ~355.
  const Reply over = send(f.port, "a", completion("350"));
  EXPECT_EQ(over.status, 429) << over.body;
  EXPECT_GE(std::stoi(over.header("retry-after").empty() ? "0" : over.header("retry-after")), 1);
}

// Holds `n` requests of `tenant` open (slow engine), in threads; join() collects the statuses.
struct Background {
  void start(std::uint16_t port, const std::string& tenant, const std::string& max_tokens,
             int n = 1) {
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([=, this] {
        const Reply r = send(port, tenant, completion(max_tokens));
        std::lock_guard lock(mu);
        statuses.push_back(r.status);
        order.push_back(tenant);
      });
    }
  }
  void join() {
    for (std::thread& t : threads) t.join();
    threads.clear();
  }
  ~Background() { join(); }
  std::mutex mu;
  std::vector<int> statuses;
  std::vector<std::string> order;  // tenants in the order their answers arrived
  std::vector<std::thread> threads;
};

TEST(GatewayAdmissionTest, MaxConcurrentRefusesPastTheTenantsOpenRequests) {
  Fleet f("tenant_limits: {team-a: {max_concurrent: 2}}\n", "0.1");
  ASSERT_TRUE(f.healthy);
  Background slow;
  slow.start(f.port, "team-a", "100", 2);
  ASSERT_TRUE(wait_metric(f.port, inflight("team-a"), 2));
  const Reply r = send(f.port, "team-a", completion("1"));
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(str(parse(r.body), "error", "code"), "max_concurrent_exceeded");
  EXPECT_EQ(r.header("retry-after"), "1");
  EXPECT_EQ(send(f.port, "team-b", completion("1")).status, 200);  // no entry, no default
  slow.join();
  EXPECT_EQ(slow.statuses, (std::vector<int>{200, 200}));
  EXPECT_EQ(send(f.port, "team-a", completion("1")).status, 200);  // the slots came back
}

// One request in flight at a time: twenty of "heavy" are sent, and once at least ten of them
// wait, two of "light". Slots go round robin between tenants with waiters, so light's two are
// answered within a few slots of arriving, ahead of most of heavy's waiters; first in, first out
// would answer them last.
TEST(GatewayAdmissionTest, ATenantSendingTenTimesMoreDoesNotStarveALightOne) {
  Fleet f("admission: {max_inflight: 1, max_queue: 100, queue_timeout_ms: 120000}\n", "0.1");
  ASSERT_TRUE(f.healthy);
  Background all;
  all.start(f.port, "heavy", "20", 20);
  ASSERT_TRUE(wait_metric(f.port, q("heavy"), 10, std::chrono::seconds(20), /*at_least=*/true))
      << metric(f.port, q("heavy"));
  all.start(f.port, "light", "20", 2);
  all.join();
  ASSERT_EQ(all.order.size(), 22U);
  EXPECT_EQ(std::count(all.statuses.begin(), all.statuses.end(), 200), 22);
  std::vector<std::size_t> light_at;
  for (std::size_t i = 0; i < all.order.size(); ++i) {
    if (all.order[i] == "light") light_at.push_back(i);
  }
  ASSERT_EQ(light_at.size(), 2U);
  // At least ten of heavy's were waiting when light's arrived; round robin lets at most two of
  // them (and those admitted while light's were on their way) go first.
  const std::size_t heavy_after_light = all.order.size() - 1 - light_at[1];
  EXPECT_GE(heavy_after_light, 5U)
      << "light answered at " << light_at[0] << " and " << light_at[1] << " of 22";
  EXPECT_GE(metric(f.port, "prefixgate_admission_queue_wait_seconds_count{tenant=\"light\"}"), 1);
}

TEST(GatewayAdmissionTest, AFullQueueAndAQueueTimeoutAnswer503WithRetryAfter) {
  Fleet f("admission: {max_inflight: 1, max_queue: 1, queue_timeout_ms: 300}\n", "0.1");
  ASSERT_TRUE(f.healthy);
  Background slow;
  slow.start(f.port, "a", "200");  // about four seconds in flight at a tenth of real speed
  ASSERT_TRUE(wait_metric(f.port, inflight("a"), 1));
  Background waiting;
  waiting.start(f.port, "a", "1");
  ASSERT_TRUE(wait_metric(f.port, q("a"), 1));
  // The queue holds one, and this tenant holds it: refused at once.
  const Reply full = send(f.port, "a", completion("1"));
  EXPECT_EQ(full.status, 503);
  EXPECT_EQ(full.header("retry-after"), "1");
  EXPECT_EQ(str(parse(full.body), "error", "code"), "queue_full");
  // The waiter gives up after queue_timeout_ms with its own error.
  waiting.join();
  EXPECT_EQ(waiting.statuses, (std::vector<int>{503}));
  EXPECT_EQ(metric(f.port,
                   "prefixgate_admission_rejected_total{tenant=\"a\",reason=\"queue_"
                   "timeout\"}"),
            1);
  EXPECT_EQ(metric(f.port, q("a")), 0);
  slow.join();
  EXPECT_EQ(slow.statuses, (std::vector<int>{200}));
}

// Sends a request on a raw socket and returns the socket without reading the answer.
int send_raw(std::uint16_t port, const std::string& tenant, const std::string& body) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string req =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nx-tenant: " + tenant +
      "\r\ncontent-type: application/json\r\ncontent-length: " + std::to_string(body.size()) +
      "\r\n\r\n" + body;
  EXPECT_EQ(::send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
  return fd;
}

TEST(GatewayAdmissionTest, AClientLeavingTheQueueFreesItsPlaceAndLosesNoSlot) {
  Fleet f("admission: {max_inflight: 1, max_queue: 1, queue_timeout_ms: 120000}\n", "0.1");
  ASSERT_TRUE(f.healthy);
  Background slow;
  slow.start(f.port, "a", "100");
  ASSERT_TRUE(wait_metric(f.port, inflight("a"), 1));
  const int fd = send_raw(f.port, "b", completion("1"));
  ASSERT_TRUE(wait_metric(f.port, q("b"), 1));
  ::close(fd);  // gone while queued
  EXPECT_TRUE(wait_metric(f.port, q("b"), 0));
  EXPECT_TRUE(wait_metric(f.port, "prefixgate_admission_abandoned_total{tenant=\"b\"}", 1));
  // Its place is free again: this one queues (not queue_full) and is served.
  Background next;
  next.start(f.port, "c", "1");
  next.join();
  EXPECT_EQ(next.statuses, (std::vector<int>{200}));
  slow.join();
  EXPECT_EQ(slow.statuses, (std::vector<int>{200}));
  // Every slot came back: nothing in flight, and a burst of one-slot requests all pass.
  EXPECT_TRUE(wait_metric(f.port, "prefixgate_admission_inflight{tenant=\"b\"}", 0));
  EXPECT_EQ(metric(f.port, inflight("a")) + metric(f.port, inflight("c")), 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(send(f.port, "d", completion("1")).status, 200);
}

TEST(GatewayAdmissionTest, StatsShowTheLimitsAndCounts) {
  Fleet f(
      "tenant_limits: {default: {requests_per_minute: 100}, team-a: {max_concurrent: 3}}\n"
      "admission: {max_inflight: 8}\n");
  ASSERT_TRUE(f.healthy);
  ASSERT_EQ(send(f.port, "team-a", completion("1")).status, 200);
  const json::Value stats = parse(get(f.port, "/stats").body);
  const json::Value* a = stats.find("admission");
  ASSERT_TRUE(a && a->is_object()) << get(f.port, "/stats").body.substr(0, 300);
  const json::Value* max = a->find("max_inflight");
  EXPECT_TRUE(max && max->is_number() && max->as_number().value == 8);
  const json::Value* tenants = a->find("tenants");
  ASSERT_TRUE(tenants && tenants->is_array());
  bool saw_team_a = false;
  for (const json::Value& t : tenants->as_array()) {
    const json::Value* name = t.find("tenant");
    if (!name || !name->is_string() || name->as_string() != "team-a") continue;
    saw_team_a = true;
    EXPECT_EQ(t.find("max_concurrent")->as_number().value, 3);
    EXPECT_TRUE(t.find("requests_per_minute")->is_null());  // its own entry: no rpm
    EXPECT_EQ(t.find("admitted")->as_number().value, 1);
  }
  EXPECT_TRUE(saw_team_a);
}

TEST(GatewayAdmissionTest, BadKeysExit2NamingThem) {
  const std::pair<std::string, std::string> cases[] = {
      {"tenant_limits: {team-a: {requests_per_minute: 0}}\n",
       "tenant_limits.team-a.requests_per_minute"},
      {"tenant_limits: {default: {tokens_per_min: 5}}\n", "tenant_limits.default.tokens_per_min"},
      {"admission: {max_inflight: lots}\n", "admission.max_inflight"},
      {"admission: {queue_timeout_ms: 0}\n", "admission.queue_timeout_ms"},
  };
  for (const auto& [yaml, key] : cases) {
    Process p(gateway_bin(), {"--config", write_config("bad-admission", yaml), "--upstream",
                              "http://127.0.0.1:9"});
    EXPECT_EQ(p.wait(), 2) << yaml;
    EXPECT_NE(p.output().find(key), std::string::npos) << p.output();
  }
}

}  // namespace
}  // namespace prefixgate::gateway::testing
