// The gateway's /dashboard in a real browser: headless Chromium (Debian `chromium`) driven by
// playwright-core (tests/js/dashboard_browser.mjs), against a gateway with two engine replicas
// and some traffic. The page loads with no console error and no request leaving the gateway,
// every panel shows data, the hit rates on the page equal /stats, and a screenshot is written to
// ${CMAKE_BINARY_DIR}/artifacts/dashboard.png. The gateway has an admin key, so the browser
// first meets the login form (401), signs in, and the page runs on its session cookie. Skips where
// Chromium or node_modules are missing (CI installs both: scripts/install-deps.sh,
// scripts/install-js-deps.sh).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "gateway_server/dashboard_traffic.h"
#include "gateway_server/processes.h"

namespace prefixgate::gateway::testing {
namespace {

namespace fs = std::filesystem;

std::string chromium_path() {
  if (const char* env = std::getenv("PREFIXGATE_CHROMIUM"); env && *env) return env;
  return "/usr/bin/chromium";
}

TEST(DashboardBrowserTest, PageShowsLiveDataMatchingStatsWithNoConsoleErrors) {
  const fs::path js = fs::path(PREFIXGATE_SOURCE_DIR) / "tests" / "js";
  const std::string chromium = chromium_path();
  std::string version;
  if (run_command("node --version", version) != 0) GTEST_SKIP() << "node is not installed";
  if (!fs::exists(chromium)) {
    GTEST_SKIP() << chromium << " is missing (Debian package chromium; scripts/install-deps.sh)";
  }
  if (!fs::exists(js / "node_modules" / "playwright-core" / "package.json")) {
    GTEST_SKIP() << "tests/js/node_modules/playwright-core is missing: "
                    "run scripts/install-js-deps.sh";
  }

  constexpr const char* kAdminKey = "browser-admin-key-0123456789";
  setenv("PREFIXGATE_ADMIN_KEY", kAdminKey, 1);  // for the gateway this test starts
  std::uint16_t pa = 0, pb = 0, port = 0;
  auto a = start_engine(pa, "1");
  auto b = start_engine(pb, "1");
  ASSERT_NE(pa, 0);
  ASSERT_NE(pb, 0);
  auto gw = start_gateway(port, {"--config", write_dashboard_config(), "--upstream", upstream(pa),
                                 "--upstream", upstream(pb)});
  unsetenv("PREFIXGATE_ADMIN_KEY");
  ASSERT_NE(port, 0) << gw->output();
  ASSERT_TRUE(wait_healthy(port, 2));

  const int rounds = 8;
  ASSERT_EQ(send_dashboard_traffic(port, rounds, std::chrono::milliseconds(700)), 3 * rounds)
      << gw->output();
  wait_stats_requests(port, 3 * rounds, std::chrono::seconds(20),
                      {{"authorization", std::string("Bearer ") + kAdminKey}});

  const fs::path artifacts = fs::path(PREFIXGATE_ARTIFACTS_DIR);
  fs::create_directories(artifacts);
  const fs::path png = artifacts / "dashboard.png";
  fs::remove(png);
  std::string output;
  const int rc = run_command("timeout 120 node '" + (js / "dashboard_browser.mjs").string() +
                                 "' http://127.0.0.1:" + std::to_string(port) + " '" +
                                 png.string() + "' '" + chromium + "' '" + kAdminKey + "'",
                             output);
  EXPECT_EQ(rc, 0) << output;
  EXPECT_NE(output.find("\"failures\": []"), std::string::npos) << output;
  EXPECT_TRUE(fs::exists(png) && fs::file_size(png) > 10000) << png;
  std::printf("dashboard screenshot: %s\n", png.c_str());
}

}  // namespace
}  // namespace prefixgate::gateway::testing
