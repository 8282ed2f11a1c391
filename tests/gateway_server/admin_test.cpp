// The admin surface over real sockets: /metrics, /stats, /dashboard and /prefixgate/explain need
// the admin key (a bearer token, or the cookie of a login) when one is set, are open without
// one only when served on loopback (403 elsewhere, keyed on the listen address), and move to
// admin_listen's listener when it is set (404 on the main one).
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstdlib>
#include <regex>

#include "gateway_server/processes.h"

namespace prefixgate::gateway::testing {
namespace {

constexpr const char* kKey = "admin-0123456789abcdef";
const std::string kBearer = std::string("Bearer ") + kKey;
const std::vector<std::string> kAdminGets = {"/metrics", "/stats", "/dashboard"};
constexpr const char* kExplain = "/prefixgate/explain/chat/completions";
constexpr const char* kChat = "/v1/chat/completions";
const std::vector<std::string> kAdminRoutes = {"/metrics", "/stats", "/dashboard", kExplain};
const std::string kBody = R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":2})";

// Sets an environment variable for the processes a test starts, and unsets it after.
struct ScopedEnv {
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { unsetenv(name_); }
  const char* name_;
};

std::unique_ptr<Process> gateway_at(const std::string& listen, std::vector<std::string> args,
                                    std::uint16_t& port) {
  args.insert(args.begin(), {"--listen", listen, "--log-level", "warn"});
  auto p = std::make_unique<Process>(gateway_bin(), std::move(args));
  port = p->wait_listening();
  return p;
}

std::uint16_t admin_port_of(Process& gw) {
  std::smatch m;
  static const std::regex re(R"(admin routes listening on http://[^\s]+:(\d+))");
  if (!gw.read_until(re, m, std::chrono::seconds(10))) return 0;
  return static_cast<std::uint16_t>(std::stoi(m[1].str()));
}

// A request to an admin route (GET, or POST for explain) with `headers`.
Reply admin_call(const std::string& host, std::uint16_t port, const std::string& path,
                 const std::map<std::string, std::string>& headers = {}) {
  const bool explain = path == kExplain;
  return call_host(host, port, explain ? http::verb::post : http::verb::get, path,
                   explain ? kBody : std::string(), headers);
}

Reply login(std::uint16_t port, const std::string& form) {
  return call(port, http::verb::post, "/admin/login", form,
              {{"content-type", "application/x-www-form-urlencoded"}});
}

// The first IPv4 address of an interface that is up and not loopback, "" when none.
std::string non_loopback_ipv4() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  std::string found;
  for (ifaddrs* i = list; i && found.empty(); i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    const std::uint32_t a = ntohl(in->sin_addr.s_addr);
    if ((a >> 24) == 127) continue;
    found = std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 255) + "." +
            std::to_string((a >> 8) & 255) + "." + std::to_string(a & 255);
  }
  freeifaddrs(list);
  return found;
}

class GatewayAdminTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = start_engine(engine_port_);
    ASSERT_NE(engine_port_, 0);
  }
  std::string upstream_flag() const { return upstream(engine_port_); }

  std::uint16_t engine_port_ = 0;
  std::unique_ptr<Process> engine_;
};

TEST_F(GatewayAdminTest, LoopbackWithoutAKeyIsOpenAsBefore) {
  std::uint16_t port = 0;
  auto gw = start_gateway(port, {"--upstream", upstream_flag()});
  ASSERT_NE(port, 0) << gw->output();
  ASSERT_TRUE(wait_healthy(port));
  for (const std::string& path : kAdminGets) {
    EXPECT_EQ(get(port, path).status, 200) << path;
  }
  EXPECT_EQ(post(port, kExplain, kBody).status, 200);
  // Nothing to sign in to: the login page sends the browser on to the dashboard.
  const Reply page = get(port, "/admin/login");
  EXPECT_EQ(page.status, 303);
  EXPECT_EQ(page.header("location"), "/dashboard");
  EXPECT_EQ(gw->output().find("answer 403"), std::string::npos) << gw->output();
}

TEST_F(GatewayAdminTest, BearerKeyFromTheConfigurationOpensEveryAdminRoute) {
  const std::string config = write_config(
      "admin-bearer", "upstreams: [" + upstream_flag() + "]\nadmin_key: " + kKey +
                          "\napi_keys:\n  - {key: sk-team-a, tenant: team-a, isolate: true}\n");
  std::uint16_t port = 0;
  auto gw = start_gateway(port, {"--config", config});
  ASSERT_NE(port, 0) << gw->output();
  ASSERT_TRUE(wait_healthy(port));

  for (const std::string& path : kAdminRoutes) {
    const Reply missing = admin_call("127.0.0.1", port, path);
    EXPECT_EQ(missing.status, 401) << path << ": " << missing.body;
    EXPECT_EQ(missing.header("www-authenticate"), "Bearer realm=\"prefixgate-admin\"") << path;
    const Reply wrong = admin_call("127.0.0.1", port, path, {{"authorization", "Bearer nope"}});
    EXPECT_EQ(wrong.status, 401) << path;
    const Reply ok = admin_call("127.0.0.1", port, path, {{"authorization", kBearer}});
    EXPECT_EQ(ok.status, 200) << path << ": " << ok.body;
    if (path != std::string("/dashboard")) {  // JSON errors, saying what to send
      EXPECT_NE(missing.body.find("\"code\":\"admin_key_required\""), std::string::npos)
          << missing.body;
      EXPECT_NE(missing.body.find("Authorization: Bearer"), std::string::npos);
      EXPECT_NE(wrong.body.find("\"code\":\"invalid_admin_key\""), std::string::npos) << wrong.body;
    }
  }
  // The dashboard page without credentials: 401 with the login form and a link to it.
  const Reply page = get(port, "/dashboard");
  EXPECT_EQ(page.header("content-type"), "text/html; charset=utf-8");
  EXPECT_NE(page.body.find("action=\"/admin/login\""), std::string::npos) << page.body;
  EXPECT_EQ(page.header("link"), "</admin/login>; rel=\"login\"");
  EXPECT_EQ(get(port, "/").status, 401);

  // Odd credentials are refused, never a server error.
  for (const std::string& auth :
       {std::string("Bearer"), std::string("Basic YWRtaW46eA=="),
        std::string("Bearer ") + kKey + "x", std::string("Bearer ") + std::string(4000, 'k')}) {
    EXPECT_EQ(admin_call("127.0.0.1", port, "/metrics", {{"authorization", auth}}).status, 401)
        << auth;
  }
  EXPECT_EQ(admin_call("127.0.0.1", port, "/metrics", {{"cookie", "prefixgate_admin=; x"}}).status,
            401);
  // The admin key is not an API key, and the API does not need it.
  EXPECT_EQ(post(port, kChat, kBody, {{"authorization", kBearer}}).status, 401);
  EXPECT_EQ(post(port, kChat, kBody, {{"authorization", "Bearer sk-team-a"}}).status, 200);
  EXPECT_EQ(get(port, "/health").status, 200);
  // Explain as the admin names its tenant with x-api-key: the isolated tenant's salt shows.
  const Reply tenant =
      post(port, kExplain, kBody, {{"authorization", kBearer}, {"x-api-key", "sk-team-a"}});
  EXPECT_EQ(tenant.status, 200) << tenant.body;
  EXPECT_NE(tenant.body.find("prefixgate-tenant:team-a"), std::string::npos) << tenant.body;
  EXPECT_EQ(
      post(port, kExplain, kBody, {{"authorization", kBearer}, {"x-api-key", "sk-bad"}}).status,
      401);
  // A tenant's API key does not open the admin routes.
  EXPECT_EQ(admin_call("127.0.0.1", port, "/stats", {{"authorization", "Bearer sk-team-a"}}).status,
            401);
}

TEST_F(GatewayAdminTest, BrowserLoginSetsAStrictHttpOnlySessionCookie) {
  ScopedEnv env("PREFIXGATE_ADMIN_KEY", kKey);
  std::uint16_t port = 0;
  auto gw = start_gateway(port, {"--upstream", upstream_flag()});
  ASSERT_NE(port, 0) << gw->output();
  ASSERT_TRUE(wait_healthy(port));
  EXPECT_EQ(get(port, "/metrics").status, 401) << "PREFIXGATE_ADMIN_KEY was not applied";

  const Reply form = get(port, "/admin/login");
  EXPECT_EQ(form.status, 200);
  EXPECT_NE(form.body.find("type=\"password\""), std::string::npos) << form.body;
  EXPECT_NE(form.header("content-security-policy").find("form-action 'self'"), std::string::npos);
  EXPECT_EQ(form.header("x-frame-options"), "DENY");

  const Reply wrong = login(port, "key=not-the-admin-key");
  EXPECT_EQ(wrong.status, 401);
  EXPECT_TRUE(wrong.header("set-cookie").empty());
  EXPECT_NE(wrong.body.find("not the admin key"), std::string::npos) << wrong.body;
  EXPECT_EQ(login(port, "key=%zz").status, 401);  // bad encoding: refused, not a 500
  EXPECT_EQ(login(port, "").status, 401);

  // The key percent-encoded, as a browser sends a form.
  std::string encoded = "key=";
  for (const char ch : std::string(kKey))
    encoded += ch == '-' ? std::string("%2D") : std::string(1, ch);
  const Reply ok = login(port, encoded);
  ASSERT_EQ(ok.status, 303) << ok.body;
  EXPECT_EQ(ok.header("location"), "/dashboard");
  const std::string set_cookie = ok.header("set-cookie");
  EXPECT_NE(set_cookie.find("HttpOnly"), std::string::npos) << set_cookie;
  EXPECT_NE(set_cookie.find("SameSite=Strict"), std::string::npos) << set_cookie;
  EXPECT_NE(set_cookie.find("Path=/"), std::string::npos) << set_cookie;
  EXPECT_EQ(set_cookie.find(kKey), std::string::npos) << "the cookie must not carry the key";
  const std::string cookie = set_cookie.substr(0, set_cookie.find(';'));
  ASSERT_EQ(cookie.rfind("prefixgate_admin=", 0), 0u) << cookie;

  const std::map<std::string, std::string> with_cookie = {{"cookie", "theme=dark; " + cookie}};
  const Reply dashboard = call(port, http::verb::get, "/dashboard", {}, with_cookie);
  EXPECT_EQ(dashboard.status, 200);
  EXPECT_NE(dashboard.body.find("/stats?since="), std::string::npos);  // the page itself
  const Reply stats = call(port, http::verb::get, "/stats", {}, with_cookie);
  EXPECT_EQ(stats.status, 200);
  EXPECT_EQ(stats.body.front(), '{');
  EXPECT_EQ(call(port, http::verb::get, "/metrics", {}, with_cookie).status, 200);
  EXPECT_EQ(call(port, http::verb::post, kExplain, kBody, with_cookie).status, 200);

  // A made-up or altered session is refused; the dashboard asks to sign in again.
  std::string forged = cookie;
  forged.back() = forged.back() == '0' ? '1' : '0';
  const Reply stale = call(port, http::verb::get, "/dashboard", {}, {{"cookie", forged}});
  EXPECT_EQ(stale.status, 401);
  EXPECT_NE(stale.body.find("sign in again"), std::string::npos) << stale.body;
  EXPECT_EQ(call(port, http::verb::get, "/stats", {}, {{"cookie", forged}}).status, 401);

  // Signing out ends the session on the server, not only in the browser.
  const Reply out = call(port, http::verb::post, "/admin/logout", {}, with_cookie);
  EXPECT_EQ(out.status, 303);
  EXPECT_NE(out.header("set-cookie").find("Max-Age=0"), std::string::npos);
  EXPECT_EQ(call(port, http::verb::get, "/stats", {}, with_cookie).status, 401);
}

TEST_F(GatewayAdminTest, AdminListenServesTheAdminRoutesAndTheMainListenerHidesThem) {
  ScopedEnv env("PREFIXGATE_ADMIN_KEY", kKey);
  std::uint16_t port = 0;
  auto gw = start_gateway(port, {"--upstream", upstream_flag(), "--admin-listen", "127.0.0.1:0"});
  ASSERT_NE(port, 0) << gw->output();
  const std::uint16_t admin = admin_port_of(*gw);
  ASSERT_NE(admin, 0) << gw->output();
  ASSERT_NE(admin, port);
  ASSERT_TRUE(wait_healthy(port));

  for (const std::string& path : kAdminRoutes) {
    // On the main listener, as any unknown path: even with the key.
    const Reply hidden = admin_call("127.0.0.1", port, path, {{"authorization", kBearer}});
    EXPECT_EQ(hidden.status, 404) << path;
    EXPECT_EQ(hidden.body.find("admin"), std::string::npos) << hidden.body;
    EXPECT_EQ(admin_call("127.0.0.1", admin, path).status, 401) << path;
    EXPECT_EQ(admin_call("127.0.0.1", admin, path, {{"authorization", kBearer}}).status, 200)
        << path;
  }
  EXPECT_EQ(get(port, "/admin/login").status, 404);
  EXPECT_EQ(get(admin, "/admin/login").status, 200);
  // The API stays on the main listener; /health answers on both.
  EXPECT_EQ(post(port, kChat, kBody).status, 200);
  const Reply api_on_admin = post(admin, kChat, kBody);
  EXPECT_EQ(api_on_admin.status, 404);
  EXPECT_NE(api_on_admin.body.find("admin listener"), std::string::npos) << api_on_admin.body;
  EXPECT_EQ(get(admin, "/health").status, 200);
  EXPECT_EQ(get(port, "/health").status, 200);
  // What went through the main listener is in the admin listener's figures.
  const Reply metrics = call(admin, http::verb::get, "/metrics", {}, {{"authorization", kBearer}});
  EXPECT_NE(metrics.body.find("prefixgate_requests_total{route=\"/v1/chat/completions\""),
            std::string::npos)
      << metrics.body.substr(0, 2000);
}

TEST_F(GatewayAdminTest, WithoutAKeyOffLoopbackTheAdminRoutesAnswer403) {
  // The rule keys on the address the gateway listens on, not on the client's: a gateway on
  // 0.0.0.0 reached through 127.0.0.1 (as a reverse proxy on the same host would) is refused.
  std::uint16_t port = 0;
  auto gw = gateway_at("0.0.0.0:0", {"--upstream", upstream_flag()}, port);
  ASSERT_NE(port, 0) << gw->output();
  ASSERT_TRUE(wait_healthy(port));
  for (const std::string& path : kAdminRoutes) {
    const Reply r = admin_call("127.0.0.1", port, path);
    EXPECT_EQ(r.status, 403) << path << ": " << r.body;
    EXPECT_NE(r.body.find("PREFIXGATE_ADMIN_KEY"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("admin_listen"), std::string::npos) << r.body;
  }
  EXPECT_NE(get(port, "/metrics").body.find("\"code\":\"admin_key_not_set\""), std::string::npos);
  EXPECT_EQ(get(port, "/admin/login").status, 403);
  EXPECT_EQ(post(port, kChat, kBody).status, 200);  // the API is unaffected
  EXPECT_NE(gw->output().find("answer 403 on 0.0.0.0"), std::string::npos) << gw->output();

  // Bound to this machine's own non-loopback address, reached there.
  if (const std::string ip = non_loopback_ipv4(); !ip.empty()) {
    std::uint16_t p = 0;
    auto on_ip = gateway_at(ip + ":0", {"--upstream", upstream_flag()}, p);
    ASSERT_NE(p, 0) << on_ip->output();
    EXPECT_EQ(admin_call(ip, p, "/stats").status, 403) << ip;
    // /health is not an admin route: it answers there (503 until the first health check).
    const int health = call_host(ip, p, http::verb::get, "/health").status;
    EXPECT_TRUE(health == 200 || health == 503) << ip << ": " << health;
  }

  // With a key the same gateway serves them to whoever holds it.
  ScopedEnv env("PREFIXGATE_ADMIN_KEY", kKey);
  std::uint16_t keyed = 0;
  auto with_key = gateway_at("0.0.0.0:0", {"--upstream", upstream_flag()}, keyed);
  ASSERT_NE(keyed, 0) << with_key->output();
  EXPECT_EQ(admin_call("127.0.0.1", keyed, "/stats").status, 401);
  EXPECT_EQ(admin_call("127.0.0.1", keyed, "/stats", {{"authorization", kBearer}}).status, 200);
  EXPECT_EQ(with_key->output().find("answer 403"), std::string::npos) << with_key->output();
}

TEST_F(GatewayAdminTest, LoopbackAdminListenIsOpenWhileTheApiListensEverywhere) {
  std::uint16_t port = 0;
  auto gw = gateway_at("0.0.0.0:0",
                       {"--upstream", upstream_flag(), "--admin-listen", "127.0.0.1:0"}, port);
  ASSERT_NE(port, 0) << gw->output();
  const std::uint16_t admin = admin_port_of(*gw);
  ASSERT_NE(admin, 0) << gw->output();
  EXPECT_EQ(get(admin, "/stats").status, 200);
  EXPECT_EQ(get(port, "/stats").status, 404);
  EXPECT_EQ(gw->output().find("answer 403"), std::string::npos) << gw->output();

  // And the other way round: an admin listener off loopback without a key refuses.
  std::uint16_t p2 = 0;
  auto open_admin =
      gateway_at("127.0.0.1:0", {"--upstream", upstream_flag(), "--admin-listen", "0.0.0.0:0"}, p2);
  ASSERT_NE(p2, 0) << open_admin->output();
  const std::uint16_t admin2 = admin_port_of(*open_admin);
  ASSERT_NE(admin2, 0) << open_admin->output();
  EXPECT_EQ(get(admin2, "/stats").status, 403);
  EXPECT_EQ(get(p2, "/stats").status, 404);
}

TEST(GatewayAdminConfigTest, BadAdminSettingsExitTwoNamingTheKey) {
  const auto exit_of = [](std::vector<std::string> args, std::string& out) {
    Process p(gateway_bin(), std::move(args));
    const int status = p.wait();
    out = p.output();
    return status;
  };
  const std::string up = "upstreams: [http://127.0.0.1:9]\n";
  std::string out;
  const std::vector<std::pair<std::string, std::string>> files = {
      {up + "admin_key: short\n", "(admin_key)"},
      {up + "admin_key: [a, b]\n", "(admin_key)"},
      {up + "admin_key: \"has a space in it 0123\"\n", "(admin_key)"},
      {up + "admin_listen: localhost:9090\n", "(admin_listen)"},
      {up + "admin_listen: 127.0.0.1\n", "(admin_listen)"},
      {up + "listen: 127.0.0.1:18080\nadmin_listen: 127.0.0.1:18080\n", "(admin_listen)"},
      {up + "admin_key: sk-shared-0123456789\napi_keys: [sk-shared-0123456789]\n", "(admin_key)"}};
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string path = write_config("admin-bad-" + std::to_string(i), files[i].first);
    EXPECT_EQ(exit_of({"--config", path}, out), 2) << files[i].first << out;
    EXPECT_NE(out.find(files[i].second), std::string::npos) << files[i].first << out;
  }
  EXPECT_EQ(exit_of({"--upstream", "http://127.0.0.1:9", "--admin-listen", "nowhere"}, out), 2);
  EXPECT_NE(out.find("(--admin-listen)"), std::string::npos) << out;
  {
    ScopedEnv env("PREFIXGATE_ADMIN_KEY", "too-short");
    EXPECT_EQ(exit_of({"--upstream", "http://127.0.0.1:9"}, out), 2);
    EXPECT_NE(out.find("(PREFIXGATE_ADMIN_KEY)"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace prefixgate::gateway::testing
