// The official Anthropic SDK (messages.create, messages.stream + finalMessage, tools and tool
// results, cache_control, errors) and OpenAI SDK (responses.create, responses.stream, function
// calls, a refused previous_response_id), tests/js/agent_sdk_client.mjs, pointed at the gateway
// with only the base URL changed: in front of prefixgate-engine replicas (which serve both APIs
// natively) and in front of the same engines declared `kind: openai` (the gateway translates to
// Chat Completions and back).
#include <gtest/gtest.h>

#include <filesystem>

#include "gateway_server/processes.h"

namespace prefixgate::gateway::testing {
namespace {

void run_sdks_through_a_gateway(const std::string& kind) {
  std::string why;
  const std::filesystem::path js = node_clients({"@anthropic-ai/sdk", "openai"}, why);
  ASSERT_FALSE(js.empty()) << why;
  std::uint16_t pa = 0, pb = 0, port = 0;
  auto a = start_engine(pa);
  auto b = start_engine(pb);
  ASSERT_NE(pa, 0);
  ASSERT_NE(pb, 0);
  const std::string config = write_config("agent-sdk-" + kind,
                                          "upstreams:\n"
                                          "  - {url: " +
                                              upstream(pa) + ", kind: " + kind +
                                              "}\n"
                                              "  - {url: " +
                                              upstream(pb) + ", kind: " + kind +
                                              "}\n"
                                              "api_keys: [sk-test]\n");
  auto gw = start_gateway(port, {"--config", config});
  ASSERT_NE(port, 0) << gw->output();
  ASSERT_TRUE(wait_healthy(port, 2));

  std::string output;
  const int rc =
      run_command("timeout 120 node " + (js / "agent_sdk_client.mjs").string() +
                      " http://127.0.0.1:" + std::to_string(port) + " sk-test builtin:tiny",
                  output);
  EXPECT_EQ(rc, 0) << output;
  for (const char* step :
       {"\"messages_create\":", "\"messages_stream\":", "\"messages_raw_stream\":",
        "\"messages_tools\":", "\"messages_errors\":", "\"responses_create\":",
        "\"responses_stream\":", "\"responses_function_calls\":", "\"responses_errors\":"}) {
    EXPECT_NE(output.find(step), std::string::npos) << step << " missing in " << output;
  }
  EXPECT_NE(output.find("\"failures\":[]"), std::string::npos) << output;
  // Which path answered: an engine names its messages itself, the gateway's translation after
  // the request id ("msg_pg-...").
  const bool translated = output.find("\"id\":\"msg_pg-") != std::string::npos;
  EXPECT_EQ(translated, kind != "prefixgate") << output;
}

TEST(AgentSdkTest, OfficialSdksWorkThroughTheGatewayInFrontOfPrefixgateEngines) {
  run_sdks_through_a_gateway("prefixgate");
}

TEST(AgentSdkTest, OfficialSdksWorkThroughTheGatewayTranslatingForAnOpenAiUpstream) {
  run_sdks_through_a_gateway("openai");
}

}  // namespace
}  // namespace prefixgate::gateway::testing
