// The official OpenAI SDK (npm `openai`, tests/js/openai_sdk_client.mjs) pointed at the gateway
// with only the base URL changed: chat, streaming, tools, completions, models, a 400.
#include <gtest/gtest.h>

#include <filesystem>

#include "gateway_server/processes.h"

namespace prefixgate::gateway::testing {
namespace {

TEST(OpenAiSdkTest, OfficialClientWorksWithOnlyTheBaseUrlChanged) {
  std::string why;
  const std::filesystem::path js = node_clients({"openai"}, why);
  ASSERT_FALSE(js.empty()) << why;

  std::uint16_t pa = 0, pb = 0, port = 0;
  auto a = start_engine(pa);
  auto b = start_engine(pb);
  ASSERT_NE(pa, 0);
  ASSERT_NE(pb, 0);
  auto gw = start_gateway(port, {"--upstream", upstream(pa), "--upstream", upstream(pb)});
  ASSERT_NE(port, 0) << gw->output();
  ASSERT_TRUE(wait_healthy(port, 2));

  std::string output;
  const int rc = run_command("timeout 120 node " + (js / "openai_sdk_client.mjs").string() +
                                 " http://127.0.0.1:" + std::to_string(port) + "/v1",
                             output);
  EXPECT_EQ(rc, 0) << output;
  // The summary names every step; a step that threw is listed under failures instead.
  for (const char* step : {"\"chat\":", "\"chat_stream\":", "\"chat_stream_usage\":", "\"tools\":",
                           "\"completion\":", "\"models\":", "\"bad_request\":"}) {
    EXPECT_NE(output.find(step), std::string::npos) << step << " missing in " << output;
  }
  EXPECT_NE(output.find("\"failures\":[]"), std::string::npos) << output;
}

}  // namespace
}  // namespace prefixgate::gateway::testing
