// prefixgate-bench end to end: bad usage exits 2 with a message, and a small `compare` starts
// real sim replicas and gateways and writes the documented JSON.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "prefixgate/canonicalize/json.h"
#include "prefixgate/process/process.h"

namespace prefixgate::bench {
namespace {

struct Outcome {
  int status = -1;
  std::string output;
};

// Engine and gateway logs, one directory per test process: fleets of tests that run at the same
// time must not write each other's logs.
std::string log_dir() {
  return ::testing::TempDir() + "prefixgate-bench-logs-" + std::to_string(getpid());
}

Outcome run_bench(std::vector<std::string> args,
                  std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  proc::Process p(PREFIXGATE_BENCH_BIN, std::move(args));
  std::smatch m;
  static const std::regex never("\\x01never\\x01");
  p.read_until(never, m, timeout);  // until the process closes its output, or the timeout
  Outcome o;
  o.status = p.wait_for(std::chrono::seconds(1));
  if (o.status < 0) o.status = p.stop(std::chrono::seconds(1));
  o.output = p.output();
  return o;
}

class BenchCliBadUsageTest : public ::testing::TestWithParam<std::vector<std::string>> {};

TEST_P(BenchCliBadUsageTest, ExitsTwoWithAMessage) {
  const Outcome o = run_bench(GetParam());
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_FALSE(o.output.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Args, BenchCliBadUsageTest,
    ::testing::Values(std::vector<std::string>{}, std::vector<std::string>{"frobnicate"},
                      std::vector<std::string>{"compare", "--workload", "nope"},
                      std::vector<std::string>{"compare", "--groups", "many"},
                      std::vector<std::string>{"compare", "--policies", "round_robin,fastest"},
                      std::vector<std::string>{"compare", "--workload", "trace"},
                      std::vector<std::string>{"compare", "--workload", "trace", "--trace",
                                               "/nonexistent/trace.jsonl"},
                      std::vector<std::string>{"compare", "--rate", "-3"},
                      std::vector<std::string>{"compare", "--rate", "trace"},
                      std::vector<std::string>{"compare", "--replicas", "0"},
                      std::vector<std::string>{"compare", "--device", "tpu"},
                      std::vector<std::string>{"compare", "--target", "ftp://x"},
                      std::vector<std::string>{"compare", "--rule-sets", "as-sent,strict"},
                      std::vector<std::string>{"compare", "--gateways", "0"},
                      std::vector<std::string>{"simulate", "--replicas", "0"},
                      std::vector<std::string>{"simulate", "--policies", "cache_aware,fastest"},
                      std::vector<std::string>{"simulate", "--load", "0"},
                      std::vector<std::string>{"simulate", "--concurrency", "4"},
                      std::vector<std::string>{"simulate", "--sim-profile", "tpu:llama3-8b"},
                      std::vector<std::string>{"simulate", "--workload", "trace"},
                      std::vector<std::string>{"compare", "--api", "grpc"},
                      std::vector<std::string>{"compare", "--api", "messages"},  // not agent
                      std::vector<std::string>{"soak", "--duration", "soon"},
                      std::vector<std::string>{"soak", "--duration", "0"},
                      std::vector<std::string>{"soak", "--restart-every", "often"},
                      std::vector<std::string>{"soak", "--warmup", "1.5"},
                      std::vector<std::string>{"soak", "--replicas", "0"},
                      std::vector<std::string>{"run"},
                      std::vector<std::string>{"run", "--url", "http://127.0.0.1:bad"},
                      std::vector<std::string>{"cost-chart"},
                      std::vector<std::string>{
                          // JSON, but not a benchmark's
                          "cost-chart", "--input",
                          PREFIXGATE_SOURCE_DIR "/tools/prefixgate-bench/overhead_request.json"}));

// The agent-turn chart drawn again from the benchmark JSON kept in docs/results.
TEST(BenchCliTest, CostChartDrawsTheKeptAgentTurnBenchmark) {
  const std::string svg = ::testing::TempDir() + "agent-turn-" + std::to_string(getpid()) + ".svg";
  const Outcome o =
      run_bench({"cost-chart", "--input", PREFIXGATE_SOURCE_DIR "/docs/results/agent-turn.json",
                 "--svg", svg});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("BM_AgentTurn/llama3_cache: 3652="), std::string::npos) << o.output;
  std::ifstream in(svg);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("<polyline"), std::string::npos);
  EXPECT_NE(text.str().find("BM_AgentTurn/llama3_nocache"), std::string::npos);
}

TEST(BenchCliTest, CompareWritesTheResultsAndCacheAwareHitsMoreThanRoundRobin) {
  const std::string json_path =
      ::testing::TempDir() + "prefixgate-bench-" + std::to_string(getpid()) + ".json";
  // Closed loop of one session at a time: deterministic routing, no sibling racing its
  // prefix's prefill. Round-robin spreads each group over both replicas (every group misses
  // once per replica); cache_aware keeps a group on one (one miss per group).
  const Outcome o = run_bench({"compare",
                               "--replicas",
                               "2",
                               "--device",
                               "sim",
                               "--sim-profile",
                               "h100:builtin:tiny",
                               "--sim-speedup",
                               "inf",
                               "--policies",
                               "round_robin,cache_aware",
                               "--workload",
                               "shared-prefix",
                               "--groups",
                               "4",
                               "--prompts-per-group",
                               "4",
                               "--system-len",
                               "256",
                               "--question-len",
                               "32",
                               "--output-len",
                               "4",
                               "--concurrency",
                               "1",
                               "--json",
                               json_path,
                               "--engine-bin",
                               PREFIXGATE_ENGINE_BIN,
                               "--gateway-bin",
                               PREFIXGATE_GATEWAY_BIN,
                               "--log-dir",
                               log_dir(),
                               "--no-progress"});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("cache_aware"), std::string::npos) << o.output;
  std::ifstream in(json_path);
  std::stringstream text;
  text << in.rdbuf();
  auto doc = json::parse(text.str());
  ASSERT_TRUE(doc.ok()) << text.str();
  const json::Value* ceiling = doc->find("ceiling_hit_rate");
  ASSERT_TRUE(ceiling != nullptr && ceiling->is_number());
  // 4 groups x 4 prompts of ~290 tokens sharing 256: 12 of 16 hit 256 tokens (16 blocks).
  EXPECT_GT(ceiling->as_number().value, 0.6);
  const json::Value* results = doc->find("results");
  ASSERT_TRUE(results != nullptr && results->is_array());
  ASSERT_EQ(results->as_array().size(), 2u);
  std::map<std::string, double> hit;
  for (const json::Value& r : results->as_array()) {
    for (const char* key : {"policy", "hit_rate", "ttft_p50", "ttft_p99", "itl_p50",
                            "throughput_rps", "output_tps", "imbalance", "errors"}) {
      EXPECT_NE(r.find(key), nullptr) << key;
    }
    ASSERT_TRUE(r.find("policy")->is_string());
    EXPECT_EQ(r.find("errors")->as_number().value, 0) << text.str();
    EXPECT_EQ(r.find("requests")->as_number().value, 16);
    hit[r.find("policy")->as_string()] = r.find("hit_rate")->as_number().value;
  }
  EXPECT_GT(hit["cache_aware"], hit["round_robin"]) << text.str();
  EXPECT_LE(hit["cache_aware"], ceiling->as_number().value + 1e-9);
  std::ifstream svg(json_path.substr(0, json_path.size() - 5) + ".svg");
  std::string first_line;
  std::getline(svg, first_line);
  EXPECT_EQ(first_line.rfind("<svg", 0), 0u);
}

// simulate: the grid of replica counts, gateway counts and loads, each cell with every policy,
// in the JSON compare's field names use.
TEST(BenchCliTest, SimulateWritesEveryCellOfTheGrid) {
  const std::string json_path =
      ::testing::TempDir() + "prefixgate-bench-sim-" + std::to_string(getpid()) + ".json";
  const Outcome o = run_bench({"simulate",
                               "--replicas",
                               "2,4",
                               "--gateways",
                               "1,2",
                               "--load",
                               "0.5",
                               "--policies",
                               "round_robin,cache_aware",
                               "--workload",
                               "shared-prefix",
                               "--groups",
                               "6",
                               "--prompts-per-group",
                               "8",
                               "--system-len",
                               "512",
                               "--output-len",
                               "8",
                               "--json",
                               json_path,
                               "--no-progress"});
  ASSERT_EQ(o.status, 0) << o.output;
  std::ifstream in(json_path);
  std::stringstream text;
  text << in.rdbuf();
  auto doc = json::parse(text.str());
  ASSERT_TRUE(doc.ok()) << text.str();
  const json::Value* results = doc->find("results");
  ASSERT_TRUE(results != nullptr && results->is_array());
  ASSERT_EQ(results->as_array().size(), 8u);
  std::map<std::string, double> hit;
  for (const json::Value& r : results->as_array()) {
    for (const char* key : {"replicas", "gateways", "policy", "load", "hit_rate",
                            "ceiling_hit_rate", "ttft_p50", "ttft_p99", "itl_p50", "itl_p99",
                            "imbalance", "preemptions", "gpu_seconds", "queue_p99"}) {
      EXPECT_NE(r.find(key), nullptr) << key;
    }
    EXPECT_EQ(r.find("requests")->as_number().value, 48);
    EXPECT_LE(r.find("hit_rate")->as_number().value,
              r.find("ceiling_hit_rate")->as_number().value + 1e-9);
    const std::string cell = std::to_string(r.find("replicas")->as_number().value) + "/" +
                             std::to_string(r.find("gateways")->as_number().value);
    hit[cell + r.find("policy")->as_string()] = r.find("hit_rate")->as_number().value;
  }
  for (const char* cell : {"2.000000/1.000000", "4.000000/2.000000"}) {
    EXPECT_GT(hit[std::string(cell) + "cache_aware"], hit[std::string(cell) + "round_robin"])
        << text.str();
  }
}

// --api: the agent loop over Anthropic's Messages API and OpenAI's Responses API. The load
// generator reads each API's usage (message_delta's cache_read_input_tokens, the response's
// input_tokens_details.cached_tokens): the same prompts, the same cached tokens. One replica, so
// that what is cached cannot depend on where a late prediction sent a step on a busy host.
TEST(BenchCliTest, AgentLoopOverMessagesAndResponsesCountsTheirCachedTokens) {
  std::map<std::string, std::pair<double, double>> tokens;  // api -> prompt, cached
  for (const char* api : {"chat", "messages", "responses"}) {
    const std::string json_path =
        ::testing::TempDir() + "prefixgate-bench-" + api + "-" + std::to_string(getpid()) + ".json";
    const Outcome o = run_bench({"compare",
                                 "--replicas",
                                 "1",
                                 "--device",
                                 "sim",
                                 "--sim-profile",
                                 "h100:builtin:tiny",
                                 "--sim-speedup",
                                 "inf",
                                 "--policies",
                                 "cache_aware",
                                 "--workload",
                                 "agent",
                                 "--api",
                                 api,
                                 "--agents",
                                 "2",
                                 "--steps",
                                 "3",
                                 "--tools",
                                 "2",
                                 "--tool-schema-len",
                                 "64",
                                 "--system-len",
                                 "128",
                                 "--tool-result-len",
                                 "64",
                                 "--output-len",
                                 "2",
                                 "--concurrency",
                                 "1",
                                 "--json",
                                 json_path,
                                 "--engine-bin",
                                 PREFIXGATE_ENGINE_BIN,
                                 "--gateway-bin",
                                 PREFIXGATE_GATEWAY_BIN,
                                 "--log-dir",
                                 log_dir(),
                                 "--no-progress"});
    ASSERT_EQ(o.status, 0) << api << ": " << o.output;
    std::ifstream in(json_path);
    std::stringstream text;
    text << in.rdbuf();
    auto doc = json::parse(text.str());
    ASSERT_TRUE(doc.ok()) << text.str();
    const json::Value& r = doc->find("results")->as_array().front();
    EXPECT_EQ(r.find("errors")->as_number().value, 0) << api << ": " << text.str();
    EXPECT_EQ(r.find("requests")->as_number().value, 6) << api;
    tokens[api] = {r.find("prompt_tokens")->as_number().value,
                   r.find("cached_tokens")->as_number().value};
    EXPECT_GT(tokens[api].second, 0) << api << ": " << text.str();
  }
  EXPECT_EQ(tokens["messages"], tokens["chat"]);
  EXPECT_EQ(tokens["responses"], tokens["chat"]);
}

// --rule-sets: one gateway per rule set, each row measured against the ceiling of its own
// rules. The volatile app's timestamp breaks every prefix as sent; with every rule on, its
// requests share their system prompt and tools.
TEST(BenchCliTest, RuleSetsRunEachPolicyUnderEachCanonicalization) {
  const std::string json_path =
      ::testing::TempDir() + "prefixgate-bench-rules-" + std::to_string(getpid()) + ".json";
  const Outcome o = run_bench({"compare",
                               "--replicas",
                               "2",
                               "--device",
                               "sim",
                               "--sim-profile",
                               "h100:builtin:tiny",
                               "--sim-speedup",
                               "inf",
                               "--policies",
                               "cache_aware",
                               "--rule-sets",
                               "as-sent,canonical",
                               "--workload",
                               "volatile",
                               "--requests",
                               "12",
                               "--system-len",
                               "256",
                               "--tools",
                               "2",
                               "--output-len",
                               "2",
                               "--concurrency",
                               "1",
                               "--max-model-len",
                               "4096",
                               "--json",
                               json_path,
                               "--engine-bin",
                               PREFIXGATE_ENGINE_BIN,
                               "--gateway-bin",
                               PREFIXGATE_GATEWAY_BIN,
                               "--log-dir",
                               log_dir(),
                               "--no-progress"});
  ASSERT_EQ(o.status, 0) << o.output;
  std::ifstream in(json_path);
  std::stringstream text;
  text << in.rdbuf();
  auto doc = json::parse(text.str());
  ASSERT_TRUE(doc.ok()) << text.str();
  const json::Array& results = doc->find("results")->as_array();
  ASSERT_EQ(results.size(), 2u) << text.str();
  EXPECT_EQ(results[0].find("policy")->as_string(), "cache_aware (as-sent)");
  EXPECT_EQ(results[1].find("policy")->as_string(), "cache_aware (canonical)");
  const double as_sent_ceiling = doc->find("ceiling_hit_rate_as_sent")->as_number().value;
  const double canonical_ceiling = doc->find("ceiling_hit_rate_canonical")->as_number().value;
  EXPECT_EQ(results[0].find("ceiling_hit_rate")->as_number().value, as_sent_ceiling);
  EXPECT_EQ(results[1].find("ceiling_hit_rate")->as_number().value, canonical_ceiling);
  EXPECT_GT(canonical_ceiling, as_sent_ceiling + 0.3) << text.str();
  // What canonicalization recovers shows up in the engines' own counts.
  EXPECT_GT(results[1].find("hit_rate")->as_number().value,
            results[0].find("hit_rate")->as_number().value + 0.3)
      << text.str();
}

json::Value read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  auto doc = json::parse(text.str());
  return doc.ok() ? *doc : json::Value();
}

double number_at(const json::Value& v, const char* key) {
  const json::Value* x = v.find(key);
  return x != nullptr && x->is_number() ? x->as_number().value : -1;
}

std::vector<std::string> soak_args(const std::string& json_path) {
  return {"soak",
          "--json",
          json_path,
          "--engine-bin",
          PREFIXGATE_ENGINE_BIN,
          "--gateway-bin",
          PREFIXGATE_GATEWAY_BIN,
          "--log-dir",
          log_dir()};
}

// soak end to end, short: 2 replicas, each killed once (at 8 s and 16 s) while it streams 1024
// tokens at the modelled speed (~8 s a request), samples every second. The tolerances are loose
// (20 s is all warm-up for memory); what must hold: every sample read every process, the
// restarts gave new processes that the gateway took back, the streams cut by a kill were counted
// as injected, and nothing else failed.
TEST(BenchCliTest, SoakSamplesEveryProcessRestartsReplicasAndCountsTheCutStreams) {
  const std::string json_path =
      ::testing::TempDir() + "prefixgate-bench-soak-" + std::to_string(getpid()) + ".json";
  std::vector<std::string> args = soak_args(json_path);
  for (
      const char* a :
      {"--duration",         "20s",         "--restart-every",   "8s",   "--sample-every",   "1s",
       "--lifetime-warmup",  "2s",          "--warmup",          "0.3",  "--replicas",       "2",
       "--policy",           "round_robin", "--sim-speedup",     "1",    "--rate",           "1.5",
       "--multi-turn-share", "0",           "--groups",          "2",    "--system-len",     "256",
       "--question-len",     "32",          "--output-len",      "1024", "--rss-tolerance",  "1",
       "--fd-slack",         "64",          "--bound-tolerance", "100",  "--gateway-warmup", "0"}) {
    args.push_back(a);
  }
  const Outcome o = run_bench(args, std::chrono::seconds(90));
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("verdict: PASS"), std::string::npos) << o.output;
  const json::Value doc = read_json(json_path);
  ASSERT_TRUE(doc.is_object()) << json_path;
  EXPECT_EQ(number_at(doc, "errors"), 0) << o.output;
  EXPECT_GE(number_at(doc, "injected_errors"), 1) << o.output;

  const json::Value* restarts = doc.find("restarts");
  ASSERT_TRUE(restarts != nullptr && restarts->is_array());
  ASSERT_EQ(restarts->as_array().size(), 2u) << o.output;
  double cut = 0;
  for (const json::Value& r : restarts->as_array()) {
    EXPECT_NE(number_at(r, "old_pid"), number_at(r, "new_pid"));
    EXPECT_GE(number_at(r, "healthy_after_s"), 0) << "the gateway never took it back";
    // Every stream the kill found on its replica failed, and was counted as injected.
    EXPECT_EQ(number_at(r, "in_flight_failed"), number_at(r, "in_flight"));
    cut += number_at(r, "in_flight");
  }
  EXPECT_EQ(cut, number_at(doc, "injected_errors"));

  const json::Value* samples = doc.find("samples");
  ASSERT_TRUE(samples != nullptr && samples->is_array());
  EXPECT_GE(samples->as_array().size(), 18u);
  const double first_kill = number_at(restarts->as_array()[0], "t_s");
  const double old_pid = number_at(restarts->as_array()[0], "old_pid");
  const double new_pid = number_at(restarts->as_array()[0], "new_pid");
  std::size_t stats_read = 0;
  for (const json::Value& s : samples->as_array()) {
    const json::Value* procs = s.find("processes");
    ASSERT_TRUE(procs != nullptr && procs->is_array());
    ASSERT_EQ(procs->as_array().size(), 3u);  // the gateway and 2 engines
    for (const json::Value& p : procs->as_array()) {
      EXPECT_GT(number_at(p, "rss_kb"), 1000) << number_at(s, "t_s");
      EXPECT_GT(number_at(p, "fds"), 2) << number_at(s, "t_s");
      // Established connections are some of the descriptors (each engine has the gateway's).
      EXPECT_GE(number_at(p, "connections"), 0) << number_at(s, "t_s");
      EXPECT_LE(number_at(p, "connections"), number_at(p, "fds")) << number_at(s, "t_s");
    }
    const json::Value& engine0 = procs->as_array()[1];
    EXPECT_EQ(number_at(engine0, "pid"), number_at(s, "t_s") < first_kill ? old_pid : new_pid);
    EXPECT_GE(number_at(s, "metrics_series"), 10);
    // /stats?since= the previous scrape, per 10 s of samples: none for the first scrape, nor when
    // the gateway took no sample in between (the test samples every second, as its ring does).
    const double stats_bytes = number_at(s, "stats_bytes");
    if (stats_bytes != -1) {
      EXPECT_GT(stats_bytes, 100) << number_at(s, "t_s");
      ++stats_read;
    }
  }
  EXPECT_GE(stats_read, samples->as_array().size() / 2);
  EXPECT_GT(number_at(samples->as_array().back(), "index_blocks"), 0);
  EXPECT_GT(number_at(samples->as_array().back(), "requests_done"), 10);

  const std::string stem = json_path.substr(0, json_path.size() - 5);
  std::ifstream csv(stem + ".csv");
  std::string line;
  std::size_t rows = 0;
  std::getline(csv, line);
  EXPECT_EQ(
      line.rfind("t_s,gateway_pid,gateway_rss_kb,gateway_fds,gateway_connections,engine-0_pid", 0),
      0u)
      << line;
  while (std::getline(csv, line)) ++rows;
  EXPECT_EQ(rows, samples->as_array().size());
  std::ifstream svg(stem + ".svg");
  std::getline(svg, line);
  EXPECT_EQ(line.rfind("<svg", 0), 0u);

  // The recording judged again, stricter: no memory growth at all allowed, no descriptor slack.
  const Outcome again =
      run_bench({"soak", "--from", json_path, "--json", stem + "-again.json", "--warmup", "0.3",
                 "--lifetime-warmup", "2s", "--gateway-warmup", "0", "--rss-tolerance", "0",
                 "--fd-slack", "0", "--fd-tolerance", "0", "--bound-tolerance", "100"});
  EXPECT_EQ(again.status, 3) << again.output;
  EXPECT_NE(again.output.find("FAIL"), std::string::npos) << again.output;
  EXPECT_EQ(read_json(stem + "-again.json").find("samples")->as_array().size(),
            samples->as_array().size());
}

// A run the verdict cannot judge (fewer judged samples than --min-samples) fails it: exit 3.
TEST(BenchCliTest, SoakExitsThreeWhenTheVerdictFails) {
  const std::string json_path =
      ::testing::TempDir() + "prefixgate-bench-soak-fail-" + std::to_string(getpid()) + ".json";
  std::vector<std::string> args = soak_args(json_path);
  for (const char* a : {"--duration", "4s", "--restart-every", "0", "--sample-every", "1s",
                        "--replicas", "1", "--sim-speedup", "inf", "--min-samples", "1000"}) {
    args.push_back(a);
  }
  const Outcome o = run_bench(args);
  EXPECT_EQ(o.status, 3) << o.output;
  EXPECT_NE(o.output.find("verdict: FAIL"), std::string::npos) << o.output;
  EXPECT_EQ(read_json(json_path).find("verdict")->as_string(), "fail");
}

}  // namespace
}  // namespace prefixgate::bench
