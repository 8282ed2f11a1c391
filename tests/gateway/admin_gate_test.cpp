// AdminGate's rules without sockets: the key, sessions and their expiry, the loopback rule, and
// the parsing of what a browser sends (cookies, forms); the admin configuration keys.
#include "server/admin_gate.h"

#include <gtest/gtest.h>

#include "config.h"

namespace prefixgate::gateway::server {
namespace {

using Clock = AdminGate::Clock;
constexpr const char* kKey = "admin-0123456789abcdef";

std::string cookie_of(const std::string& set_cookie) {
  return set_cookie.substr(0, set_cookie.find(';'));
}

TEST(AdminGateTest, WithoutAKeyOpenOnlyOnLoopback) {
  const AdminGate loopback("", true);
  EXPECT_TRUE(loopback.open());
  EXPECT_EQ(loopback.check("", "", Clock::now()).verdict, AdminVerdict::kAllowed);
  const AdminGate everywhere("", false);
  EXPECT_FALSE(everywhere.open());
  EXPECT_EQ(everywhere.check("Bearer anything", "", Clock::now()).verdict,
            AdminVerdict::kNoKeyOffLoopback);
  EXPECT_FALSE(everywhere.key_matches(""));
}

TEST(AdminGateTest, BearerKeyOrSessionElse401) {
  AdminGate gate(kKey, true);  // a key applies on loopback too
  const auto now = Clock::now();
  EXPECT_EQ(gate.check("", "", now).verdict, AdminVerdict::kMissing);
  EXPECT_EQ(gate.check("Bearer wrong", "", now).verdict, AdminVerdict::kWrong);
  EXPECT_EQ(gate.check(std::string("Bearer ") + kKey + "0", "", now).verdict, AdminVerdict::kWrong);
  EXPECT_EQ(gate.check(std::string("bearer ") + kKey, "", now).verdict, AdminVerdict::kMissing);
  const AdminCheck ok = gate.check(std::string("Bearer ") + kKey, "", now);
  EXPECT_EQ(ok.verdict, AdminVerdict::kAllowed);
  EXPECT_TRUE(ok.by_bearer);

  const std::string set_cookie = gate.login(now);
  EXPECT_NE(set_cookie.find("HttpOnly"), std::string::npos);
  EXPECT_NE(set_cookie.find("SameSite=Strict"), std::string::npos);
  EXPECT_EQ(set_cookie.find(kKey), std::string::npos);
  const std::string cookie = "a=b; " + cookie_of(set_cookie) + "; c=d";
  const AdminCheck by_cookie = gate.check("", cookie, now);
  EXPECT_EQ(by_cookie.verdict, AdminVerdict::kAllowed);
  EXPECT_FALSE(by_cookie.by_bearer);
  // A tenant's bearer key along with the session (explain in a browser) is allowed.
  EXPECT_EQ(gate.check("Bearer sk-tenant", cookie, now).verdict, AdminVerdict::kAllowed);
  EXPECT_EQ(gate.check("", "prefixgate_admin=" + std::string(64, '0'), now).verdict,
            AdminVerdict::kWrong);
  // Sessions end after their lifetime, and on logout.
  EXPECT_EQ(gate.check("", cookie, now + AdminGate::kSessionTtl + std::chrono::seconds(1)).verdict,
            AdminVerdict::kWrong);
  EXPECT_NE(gate.logout(cookie).find("Max-Age=0"), std::string::npos);
  EXPECT_EQ(gate.check("", cookie, now).verdict, AdminVerdict::kWrong);
}

TEST(AdminGateTest, SessionsAreRandomAndBounded) {
  AdminGate gate(kKey, false);
  const auto now = Clock::now();
  const std::string first = cookie_of(gate.login(now));
  EXPECT_NE(first, cookie_of(gate.login(now)));
  for (std::size_t i = 0; i < AdminGate::kMaxSessions; ++i) (void)gate.login(now);
  EXPECT_EQ(gate.check("", first, now).verdict, AdminVerdict::kWrong) << "the oldest goes first";
}

TEST(AdminGateTest, ParsesCookiesAndForms) {
  EXPECT_EQ(cookie_value("a=1; prefixgate_admin=xyz; b=2", kAdminCookie), "xyz");
  EXPECT_EQ(cookie_value("prefixgate_admin=\"q\"", kAdminCookie), "q");
  EXPECT_FALSE(cookie_value("xprefixgate_admin=1; other", kAdminCookie));
  EXPECT_EQ(form_value("a=1&key=x%2By+z", "key"), "x+y z");
  EXPECT_EQ(form_value("key=", "key"), "");
  EXPECT_FALSE(form_value("key=%4", "key"));
  EXPECT_FALSE(form_value("key=%zz", "key"));
  EXPECT_FALSE(form_value("other=1", "key"));
  EXPECT_TRUE(same_secret("abc", "abc"));
  EXPECT_FALSE(same_secret("abc", "abd"));
  EXPECT_FALSE(same_secret("abc", "abcd"));
  EXPECT_FALSE(same_secret("", "a"));
}

TEST(AdminConfigTest, LoopbackAddresses) {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "::1", "[::1]", "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(is_loopback_host(host)) << host;
  }
  for (const char* host : {"0.0.0.0", "::", "10.0.0.1", "192.0.2.2", "localhost", "", "128.0.0.1",
                           "::ffff:10.0.0.1"}) {
    EXPECT_FALSE(is_loopback_host(host)) << host;
  }
}

TEST(AdminConfigTest, YamlKeysAndTheirErrors) {
  GatewayConfig cfg;
  ASSERT_TRUE(apply_config_yaml(
      std::string("admin_key: ") + kKey + "\nadmin_listen: \"[::1]:9090\"\n", cfg));
  EXPECT_EQ(cfg.admin.key, kKey);
  EXPECT_EQ(cfg.admin.host, "::1");
  EXPECT_EQ(cfg.admin.port, 9090);
  for (const auto& [yaml, param] : std::vector<std::pair<std::string, std::string>>{
           {"admin_key: short", "admin_key"},
           {"admin_key: {a: 1}", "admin_key"},
           {"admin_listen: nohost:1", "admin_listen"},
           {"admin_listen: 127.0.0.1:99999", "admin_listen"}}) {
    GatewayConfig c;
    const Status st = apply_config_yaml(yaml, c);
    ASSERT_FALSE(st) << yaml;
    EXPECT_EQ(st.error().param, param) << yaml;
  }
  GatewayConfig same;
  same.upstreams.push_back(*parse_upstream_url("http://127.0.0.1:9"));
  ASSERT_TRUE(parse_listen("127.0.0.1:8080", same));
  ASSERT_TRUE(parse_admin_listen("127.0.0.1:8080", "admin_listen", same.admin));
  EXPECT_EQ(validate(same).error().param, "admin_listen");
  ASSERT_TRUE(parse_admin_listen("127.0.0.1:9090", "admin_listen", same.admin));
  EXPECT_TRUE(validate(same));
  same.tenants.api_keys.push_back({.key = kKey, .tenant = "", .isolate = false});
  ASSERT_TRUE(set_admin_key(kKey, "PREFIXGATE_ADMIN_KEY", same.admin));
  EXPECT_EQ(validate(same).error().param, "admin_key");
}

}  // namespace
}  // namespace prefixgate::gateway::server
