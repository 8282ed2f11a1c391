// The prefixgate binary's configuration handling: bad flags and files are refused at start with
// exit status 2 and a message naming the key; a good file starts the gateway.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "gateway_server/processes.h"

namespace prefixgate::gateway::testing {
namespace {

std::string write_temp(const std::string& text) {
  char path[] = "/tmp/prefixgate_cfg_XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << text;
  return path;
}

int run_to_exit(std::vector<std::string> args, std::string& output) {
  Process p(gateway_bin(), std::move(args));
  const int status = p.wait();
  output = p.output();
  return status;
}

TEST(GatewayCliTest, RefusesInvalidConfigurationNamingTheKey) {
  std::string out;
  EXPECT_EQ(run_to_exit({"--upstream", "ftp://x:1"}, out), 2);
  EXPECT_NE(out.find("--upstream"), std::string::npos) << out;

  EXPECT_EQ(run_to_exit({"--listen", "127.0.0.1:0"}, out), 2);
  EXPECT_NE(out.find("upstreams"), std::string::npos) << out;

  EXPECT_EQ(run_to_exit({"--upstream", "http://127.0.0.1:9", "--policy", "fastest"}, out), 2);
  EXPECT_NE(out.find("policy"), std::string::npos) << out;

  const std::string bad_kind = write_temp(
      "upstreams:\n  - url: http://127.0.0.1:9001\n  - url: http://127.0.0.1:9002\n"
      "    kind: tgi\n");
  EXPECT_EQ(run_to_exit({"--config", bad_kind}, out), 2);
  EXPECT_NE(out.find("upstreams[1].kind"), std::string::npos) << out;

  // The flag form of an upstream's keys, refused the same way.
  EXPECT_EQ(run_to_exit({"--upstream", "http://127.0.0.1:9;kind=vllm;data_parallel_size=0"}, out),
            2);
  EXPECT_NE(out.find("--upstream.data_parallel_size"), std::string::npos) << out;
  EXPECT_EQ(run_to_exit({"--upstream", "http://127.0.0.1:9;kind=openai;kv_events=tcp://h:1"}, out),
            2);
  EXPECT_NE(out.find("--upstream.kv_events"), std::string::npos) << out;

  const std::string bad_mode =
      write_temp("upstreams: [http://127.0.0.1:9001]\ncanonicalization:\n  timestamp: maybe\n");
  EXPECT_EQ(run_to_exit({"--config", bad_mode}, out), 2);
  EXPECT_NE(out.find("canonicalization.timestamp"), std::string::npos) << out;

  EXPECT_EQ(run_to_exit({"--upstream", "http://127.0.0.1:9", "--peer", "127.0.0.1:7411"}, out), 2);
  EXPECT_NE(out.find("peers.listen"), std::string::npos) << out;
  EXPECT_EQ(run_to_exit({"--upstream", "http://127.0.0.1:9", "--peer-listen", "127.0.0.1:0",
                         "--peer", "127.0.0.1"},
                        out),
            2);
  EXPECT_NE(out.find("--peer"), std::string::npos) << out;

  const std::string unknown = write_temp("upstreams: [http://127.0.0.1:9001]\ntimeout: 3\n");
  EXPECT_EQ(run_to_exit({"--config", unknown}, out), 2);
  EXPECT_NE(out.find("timeout"), std::string::npos) << out;
}

TEST(GatewayCliTest, ConfigFileSetsKeysLimitsAndTenants) {
  std::uint16_t engine_port = 0;
  auto engine = start_engine(engine_port);
  ASSERT_NE(engine_port, 0);
  const std::string cfg = write_temp(
      "upstreams:\n  - url: " + upstream(engine_port) +
      "\n    kind: prefixgate\npolicy: round_robin\nlimits:\n  max_body_bytes: 2048\n"
      "api_keys:\n  - key: sk-alpha\n    tenant: alpha\n    isolate: true\n  - sk-beta\n");
  std::uint16_t port = 0;
  auto gw = start_gateway(port, {"--config", cfg});
  ASSERT_NE(port, 0) << gw->output();
  ASSERT_TRUE(wait_healthy(port));
  const std::string body = R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":2})";
  EXPECT_EQ(post(port, "/v1/chat/completions", body).status, 401);
  EXPECT_EQ(post(port, "/v1/chat/completions", body, {{"authorization", "Bearer nope"}}).status,
            401);
  EXPECT_EQ(post(port, "/v1/chat/completions", body, {{"authorization", "Bearer sk-beta"}}).status,
            200);
  // An isolated tenant's requests carry a salt, so its hashes differ from another tenant's.
  const Reply alpha = post(port, "/prefixgate/explain/chat/completions", body,
                           {{"authorization", "Bearer sk-alpha"}});
  const Reply beta = post(port, "/prefixgate/explain/chat/completions", body,
                          {{"authorization", "Bearer sk-beta"}});
  ASSERT_EQ(alpha.status, 200);
  ASSERT_EQ(beta.status, 200);
  EXPECT_NE(alpha.body.find("\"cache_salt\":\"prefixgate-tenant:alpha\""), std::string::npos)
      << alpha.body;
  EXPECT_NE(alpha.body.find("block_hashes"), std::string::npos);
  EXPECT_EQ(post(port, "/v1/completions", R"({"prompt":")" + std::string(4096, 'x') + "\"}",
                 {{"authorization", "Bearer sk-beta"}})
                .status,
            413);
}

}  // namespace
}  // namespace prefixgate::gateway::testing
