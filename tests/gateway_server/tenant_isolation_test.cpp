// Isolated tenants cannot learn from each other's cache: neither the cached_tokens a reply
// reports nor its time to first token tells tenant B whether tenant A sent a prefix. Real
// gateway and engine processes, one replica (so both tenants share one KV cache: the hardest
// case), and a sim device that sleeps the modelled time of each step (engine/SIM.md), so a
// cache hit is measurably faster exactly when the engine's cache really saved the prefill.
//
// The probe: A sends prefixes; B then sends A's prefixes and fresh ones of the same length. If
// A's cache leaked to B, B's probes would report cached tokens and come back as fast as A's own
// repeats. A control with two shared (non-isolated) tenants shows that this test sees such a
// leak when there is one.
//
// TTFT here is the response time of a one-token completion: the prefill and one sampled token,
// what a prober would measure.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <random>

#include "gateway_server/processes.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::gateway::testing {
namespace {

// A system prompt of about 1,200 bytes (tokens, with the byte tokenizer), unique to `seed` from
// its first bytes on: its first KV block (the template's header and these bytes) is its own, so
// a fresh prompt shares no block with anything sent before.
std::string prefix(unsigned seed) {
  std::mt19937 rng(seed);
  std::string s;
  static constexpr char kLetters[] = "abcdefghijklmnopqrstuvwxyz";
  while (s.size() < 1200) {
    for (int i = 0; i < 7; ++i) s += kLetters[rng() % 26];
    s += ' ';
  }
  return s;
}

std::string summarize_chat(const std::string& system) {
  return json::to_json(json::Object{
      {"model", "builtin:tiny"},
      {"messages", json::Array{json::Object{{"role", "system"}, {"content", system}},
                               json::Object{{"role", "user"}, {"content", "Summarize."}}}},
      {"max_tokens", 1},
      {"temperature", 0}});
}

struct Sample {
  std::size_t cached_tokens = 0;
  std::size_t prompt_tokens = 0;
  std::string predicted;  // x-prefixgate-predicted-cached-tokens
  double ttft_ms = 0;
};

Sample send(std::uint16_t port, const std::string& key, const std::string& system) {
  const auto start = std::chrono::steady_clock::now();
  const Reply r = post(port, "/v1/chat/completions", summarize_chat(system),
                       {{"authorization", "Bearer " + key}});
  const auto end = std::chrono::steady_clock::now();
  EXPECT_EQ(r.status, 200) << r.body;
  Sample s;
  s.ttft_ms = std::chrono::duration<double, std::milli>(end - start).count();
  s.predicted = r.header("x-prefixgate-predicted-cached-tokens");
  auto doc = json::parse(r.body);
  const json::Value* usage = doc ? doc->find("usage") : nullptr;
  const json::Value* details = usage ? usage->find("prompt_tokens_details") : nullptr;
  const json::Value* cached = details ? details->find("cached_tokens") : nullptr;
  const json::Value* prompt = usage ? usage->find("prompt_tokens") : nullptr;
  EXPECT_TRUE(cached && cached->is_number() && prompt && prompt->is_number()) << r.body;
  if (cached && cached->is_number()) {
    s.cached_tokens = static_cast<std::size_t>(cached->as_number().value);
  }
  if (prompt && prompt->is_number()) {
    s.prompt_tokens = static_cast<std::size_t>(prompt->as_number().value);
  }
  return s;
}

double max_of(const std::vector<double>& v) {
  return *std::max_element(v.begin(), v.end());
}
double min_of(const std::vector<double>& v) {
  return *std::min_element(v.begin(), v.end());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string show(const std::vector<Sample>& v) {
  std::string out;
  for (const Sample& s : v) {
    out += std::to_string(static_cast<int>(s.ttft_ms)) + " ms/" + std::to_string(s.cached_tokens) +
           " cached; ";
  }
  return out;
}

std::vector<double> ttfts(const std::vector<Sample>& v) {
  std::vector<double> out;
  for (const Sample& s : v) out.push_back(s.ttft_ms);
  return out;
}

class TenantIsolationTest : public ::testing::Test {
 protected:
  static constexpr int kProbes = 5;

  void SetUp() override {
    // A modelled 8B model on an H100, slowed down 4x: a cold prefill of these prompts sleeps
    // about 130 ms, a cached one about 30 ms, well apart from a loaded host's noise.
    engine_ = std::make_unique<Process>(
        engine_bin(), std::vector<std::string>{"--device", "sim", "--model", "builtin:tiny",
                                               "--sim-profile", "h100:llama3-8b", "--sim-speedup",
                                               "0.25", "--port", "0", "--log-level", "warn"});
    engine_port_ = engine_->wait_listening();
    ASSERT_NE(engine_port_, 0) << engine_->output();
    const std::string config =
        write_config("isolation", "upstreams: [" + upstream(engine_port_) +
                                      "]\n"
                                      "api_keys:\n"
                                      "  - {key: sk-alice, tenant: alice, isolate: true}\n"
                                      "  - {key: sk-bob, tenant: bob, isolate: true}\n"
                                      "  - {key: sk-carol, tenant: carol}\n"
                                      "  - {key: sk-dave, tenant: dave}\n");
    gateway_ = start_gateway(port_, {"--config", config});
    ASSERT_NE(port_, 0) << gateway_->output();
    ASSERT_TRUE(wait_healthy(port_));
    // Warm up both processes (connections, allocators) on a prefix nobody probes.
    send(port_, "sk-bob", prefix(999));
  }

  // `owner` sends kProbes prefixes twice (cold, then its own cache hit); `prober` then sends
  // the owner's prefixes and as many fresh ones, alternating.
  void probe(const std::string& owner, const std::string& prober, unsigned seed) {
    for (int i = 0; i < kProbes; ++i) owner_cold_.push_back(send(port_, owner, prefix(seed + i)));
    for (int i = 0; i < kProbes; ++i) owner_warm_.push_back(send(port_, owner, prefix(seed + i)));
    for (int i = 0; i < kProbes; ++i) {
      probes_.push_back(send(port_, prober, prefix(seed + i)));
      fresh_.push_back(send(port_, prober, prefix(seed + 100 + i)));
    }
  }

  std::string report() const {
    return "\n owner cold: " + show(owner_cold_) + "\n owner warm: " + show(owner_warm_) +
           "\n probes:     " + show(probes_) + "\n fresh:      " + show(fresh_);
  }

  std::uint16_t engine_port_ = 0, port_ = 0;
  std::unique_ptr<Process> engine_, gateway_;
  std::vector<Sample> owner_cold_, owner_warm_, probes_, fresh_;
};

TEST_F(TenantIsolationTest, NeitherCachedTokensNorTtftRevealAnotherTenantsPrefix) {
  probe("sk-alice", "sk-bob", 1000);
  const std::vector<double> fresh = ttfts(fresh_);
  const double fresh_min = min_of(fresh);
  const double fresh_max = max_of(fresh);
  const double warm_max = max_of(ttfts(owner_warm_));
  const double warm_median = median(ttfts(owner_warm_));

  // The test can tell a hit from a miss: the owner's own repeats are cached and much faster.
  for (const Sample& s : owner_warm_) EXPECT_GT(s.cached_tokens, s.prompt_tokens / 2) << report();
  ASSERT_LT(warm_median * 2, median(fresh)) << "no timing signal to test with" << report();

  for (int i = 0; i < kProbes; ++i) {
    // Exactly what a never-seen prefix reports, in the body and in the routing headers.
    EXPECT_EQ(probes_[i].cached_tokens, fresh_[i].cached_tokens) << report();
    EXPECT_EQ(probes_[i].cached_tokens, 0u) << report();
    EXPECT_EQ(probes_[i].predicted, fresh_[i].predicted) << report();
    // Nowhere near a hit: slower than the slowest of the owner's hits by half the gap.
    EXPECT_GT(probes_[i].ttft_ms, warm_max + (fresh_min - warm_max) / 2) << report();
  }
  // And as a whole, where the fresh prefixes are: the median probe within their spread (10 %
  // either side for the host's noise).
  const double probe_median = median(ttfts(probes_));
  EXPECT_GE(probe_median, fresh_min * 0.9) << report();
  EXPECT_LE(probe_median, fresh_max * 1.1) << report();
  std::cout << "isolated tenants (ttft/cached tokens):" << report() << std::endl;
}

TEST_F(TenantIsolationTest, SharedTenantsDoSeeEachOthersCacheSoTheProbeWorks) {
  probe("sk-carol", "sk-dave", 2000);
  const double fresh_median = median(ttfts(fresh_));
  const double warm_max = max_of(ttfts(owner_warm_));
  for (int i = 0; i < kProbes; ++i) {
    EXPECT_EQ(fresh_[i].cached_tokens, 0u) << report();
    // The leak the isolated test rules out: cached tokens, and a hit's speed.
    EXPECT_GT(probes_[i].cached_tokens, probes_[i].prompt_tokens / 2) << report();
    EXPECT_LT(probes_[i].ttft_ms, warm_max + (fresh_median - warm_max) / 2) << report();
  }
  std::cout << "shared tenants (ttft/cached tokens):" << report() << std::endl;
}

}  // namespace
}  // namespace prefixgate::gateway::testing
