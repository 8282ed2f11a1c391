// The gateway (a real prefixgate process) in front of vLLM and SGLang test doubles
// (fake_vllm.h): KV events learned in both encodings and both hash forms and at other block
// sizes, removals and clears applied, gaps replayed or lost, restarts and late starts handled,
// data-parallel ranks merged, load read from /metrics, malformed input counted and skipped, and
// a replica whose events cannot be reached still routed.
#include <gtest/gtest.h>

#include <optional>

#include "gateway_server/fake_vllm.h"
#include "gateway_server/processes.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::gateway::testing {
namespace {

std::vector<std::uint32_t> tokens_of(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint32_t> t(n);
  for (std::size_t i = 0; i < n; ++i) t[i] = seed * 100 + static_cast<std::uint32_t>(i % 97);
  return t;
}

// A completion body with these token ids as its prompt (the gateway hashes them as they are).
std::string prompt_body(const std::vector<std::uint32_t>& tokens, const std::string& salt = "") {
  std::string body = R"({"model":"fake","max_tokens":1,"prompt":[)";
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    body += (i ? "," : "") + std::to_string(tokens[i]);
  }
  body += "]";
  if (!salt.empty()) body += R"(,"cache_salt":")" + salt + "\"";
  return body + "}";
}

struct Held {
  double cached = -1, offloaded = -1;
};

// What the gateway's index holds of a prompt on the replica at `url` (explain: nothing sent).
Held held(std::uint16_t gw, const std::string& url, const std::vector<std::uint32_t>& tokens,
          const std::string& salt = "") {
  const Reply r = post(gw, "/prefixgate/explain/completions", prompt_body(tokens, salt));
  auto doc = json::parse(r.body);
  if (r.status != 200 || !doc || !doc->is_object()) return {};
  const json::Value* replicas = doc->find("replicas");
  if (replicas == nullptr || !replicas->is_array()) return {};
  for (const json::Value& v : replicas->as_array()) {
    const json::Value* name = v.find("replica");
    if (name == nullptr || !name->is_string() || name->as_string() != url) continue;
    return {v.find("cached_tokens")->as_number().value,
            v.find("offloaded_tokens")->as_number().value};
  }
  return {};
}

bool eventually(const std::function<bool()>& pred,
                std::chrono::milliseconds timeout = std::chrono::milliseconds(15000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling, not synchronizing
  }
  return pred();
}

bool eventually_held(std::uint16_t gw, const std::string& url,
                     const std::vector<std::uint32_t>& tokens, double cached,
                     const std::string& salt = "") {
  return eventually([&] { return held(gw, url, tokens, salt).cached == cached; });
}

// The value of the series `series` (name and labels as /metrics writes them), or nullopt.
std::optional<double> metric(std::uint16_t gw, const std::string& series) {
  const double value = metric_value(get(gw, "/metrics").body, series);
  if (value < 0) return std::nullopt;  // the gateway's series are counters and gauges >= 0
  return value;
}

bool eventually_metric_at_least(std::uint16_t gw, const std::string& series, double v) {
  return eventually([&] {
    const auto m = metric(gw, series);
    return m && *m >= v;
  });
}

// A gateway over `replicas` that has seen each healthy and connected to its events.
struct Gateway {
  std::uint16_t port = 0;
  std::unique_ptr<Process> process;
  explicit Gateway(const std::vector<std::string>& specs, std::vector<std::string> extra = {}) {
    std::vector<std::string> args;
    for (const std::string& s : specs) args.insert(args.end(), {"--upstream", s});
    args.insert(args.end(), extra.begin(), extra.end());
    process = start_gateway(port, args);
    EXPECT_NE(port, 0);
    EXPECT_TRUE(wait_healthy(port, specs.size()));
  }
  bool connected(const std::string& url) {
    return eventually_metric_at_least(
        port, "prefixgate_kv_events_connected{replica=\"" + url + "\",kind=\"vllm\"}", 1);
  }
};

std::string series(const std::string& name, const std::string& url, const std::string& more = "") {
  return name + "{replica=\"" + url + "\"" + more + "}";
}

struct Encoding {
  vllm_wire::Form form;
  vllm_wire::Hashes hashes;
};

class VllmEncodingTest : public ::testing::TestWithParam<Encoding> {};

TEST_P(VllmEncodingTest, StoredBlocksAreLearnedAndRemovalsAndClearsApplied) {
  FakeVllm vllm({.form = GetParam().form, .hashes = GetParam().hashes});
  Gateway gw({vllm.upstream_spec()});
  ASSERT_TRUE(gw.connected(vllm.url()));
  const auto a = tokens_of(16 * 4 + 5, 1);
  vllm.store(a);
  ASSERT_TRUE(eventually_held(gw.port, vllm.url(), a, 64));
  vllm.remove(a, {2, 3});
  ASSERT_TRUE(eventually_held(gw.port, vllm.url(), a, 32));
  vllm.store(a, 2);  // stored again, continuing the chain from block 1
  ASSERT_TRUE(eventually_held(gw.port, vllm.url(), a, 64));
  vllm.clear();
  ASSERT_TRUE(eventually_held(gw.port, vllm.url(), a, 0));
  EXPECT_GE(metric(gw.port, series("prefixgate_kv_events_total", vllm.url(), ",type=\"stored\""))
                .value_or(0),
            2);
  EXPECT_EQ(metric(gw.port, series("prefixgate_kv_events_total", vllm.url(), ",type=\"cleared\"")),
            1);
}

INSTANTIATE_TEST_SUITE_P(
    Encodings, VllmEncodingTest,
    ::testing::Values(Encoding{vllm_wire::Form::kMap, vllm_wire::Hashes::kInteger},
                      Encoding{vllm_wire::Form::kMap, vllm_wire::Hashes::kBytes},
                      Encoding{vllm_wire::Form::kArray, vllm_wire::Hashes::kInteger},
                      Encoding{vllm_wire::Form::kArray, vllm_wire::Hashes::kBytes}),
    [](const auto& p) {
      return std::string(p.param.form == vllm_wire::Form::kMap ? "Map" : "Array") +
             (p.param.hashes == vllm_wire::Hashes::kInteger ? "IntegerHashes" : "DigestHashes");
    });

TEST(VllmUpstreamTest, AGapIsFilledFromTheReplaySocket) {
  FakeVllm vllm;
  Gateway gw({vllm.upstream_spec()});
  ASSERT_TRUE(gw.connected(vllm.url()));
  const auto a = tokens_of(48, 1), b = tokens_of(48, 2), c = tokens_of(48, 3);
  vllm.store(a);
  ASSERT_TRUE(eventually_held(gw.port, vllm.url(), a, 48));
  vllm.drop_next(2);
  vllm.store(b);        // lost on the way
  vllm.remove(a, {2});  // lost on the way
  vllm.store(c);        // reveals the gap
  ASSERT_TRUE(eventually_held(gw.port, vllm.url(), c, 48));
  EXPECT_EQ(held(gw.port, vllm.url(), b).cached, 48);  // replayed
  EXPECT_EQ(held(gw.port, vllm.url(), a).cached, 32);  // the removal too
  EXPECT_TRUE(eventually_metric_at_least(
      gw.port, series("prefixgate_kv_events_gaps_total", vllm.url(), ",outcome=\"replayed\""), 1));
  EXPECT_EQ(
      metric(gw.port, series("prefixgate_kv_events_gaps_total", vllm.url(), ",outcome=\"lost\"")),
      0);
  EXPECT_GE(metric(gw.port, series("prefixgate_kv_events_replays_total", vllm.url())).value_or(0),
            2);  // at start-up, and for the gap
}

TEST(VllmUpstreamTest, WhatReplayCannotFillMakesTheReplicasBlocksUnknown) {
  FakeVllm vllm;
  Gateway gw({vllm.upstream_spec()});
  ASSERT_TRUE(gw.connected(vllm.url()));
  const auto a = tokens_of(48, 1), b = tokens_of(48, 2), c = tokens_of(48, 3);
  vllm.store(a);
  ASSERT_TRUE(eventually_held(gw.port, vllm.url(), a, 48));
  vllm.drop_next(1);
  vllm.store(b);
  vllm.forget_replay_buffer();  // the engine's buffer moved on
  vllm.store(c);
  ASSERT_TRUE(eventually_held(gw.port, vllm.url(), c, 48));
  // What the gap hid cannot be known: a's blocks are unknown until stored again.
  EXPECT_EQ(held(gw.port, vllm.url(), a).cached, 0);
  EXPECT_EQ(held(gw.port, vllm.url(), b).cached, 0);
  EXPECT_TRUE(eventually_metric_at_least(
      gw.port, series("prefixgate_kv_events_gaps_total", vllm.url(), ",outcome=\"lost\""), 1));
  vllm.store(a);
  EXPECT_TRUE(eventually_held(gw.port, vllm.url(), a, 48));
}

TEST(VllmUpstreamTest, AnEngineRestartForgetsWhatItHeld) {
  FakeVllm vllm;
  Gateway gw({vllm.upstream_spec()});
  ASSERT_TRUE(gw.connected(vllm.url()));
  const auto a = tokens_of(48, 1), b = tokens_of(32, 2);
  for (int i = 0; i < 3; ++i) vllm.store(a);
  ASSERT_TRUE(eventually_held(gw.port, vllm.url(), a, 48));
  vllm.restart();
  vllm.store(b);  // sequence 0 again
  ASSERT_TRUE(eventually_held(gw.port, vllm.url(), b, 32));
  EXPECT_EQ(held(gw.port, vllm.url(), a).cached, 0);
  EXPECT_EQ(metric(gw.port, series("prefixgate_kv_events_resets_total", vllm.url())), 1);
}

TEST(VllmUpstreamTest, AGatewayStartingLateLearnsWhatTheEngineStillBuffers) {
  FakeVllm vllm;
  const auto a = tokens_of(64, 1), b = tokens_of(64, 2);
  vllm.store(a);
  vllm.store(b);
  vllm.remove(b, {3});
  Gateway gw({vllm.upstream_spec()});  // nobody was listening to those batches
  ASSERT_TRUE(eventually_held(gw.port, vllm.url(), a, 64));
  EXPECT_TRUE(eventually_held(gw.port, vllm.url(), b, 48));
}

TEST(VllmUpstreamTest, EngineBlockSizesOtherThanOursAreTranslated) {
  for (std::size_t engine_block : {8, 32, 48}) {
    FakeVllm vllm({.block_size = engine_block});
    Gateway gw({vllm.upstream_spec()});
    ASSERT_TRUE(gw.connected(vllm.url()));
    const auto a = tokens_of(96 + 3, static_cast<std::uint32_t>(engine_block));
    vllm.store(a);
    ASSERT_TRUE(eventually_held(gw.port, vllm.url(), a, 96)) << engine_block;
    // The engine evicts its last block: our blocks holding any of its tokens go.
    vllm.remove(a, {96 / engine_block - 1});
    const double kept = static_cast<double>((96 - engine_block) / 16 * 16);
    EXPECT_TRUE(eventually_held(gw.port, vllm.url(), a, kept)) << engine_block;
  }
}

TEST(VllmUpstreamTest, DataParallelRanksAreFollowedAndMerged) {
  FakeVllm vllm({.ranks = 2});
  Gateway gw({vllm.upstream_spec()});
  ASSERT_TRUE(gw.connected(vllm.url()));
  const auto a = tokens_of(48, 1);
  vllm.store(a, 0, /*rank=*/1);
  ASSERT_TRUE(eventually_held(gw.port, vllm.url(), a, 48));
  vllm.store(a, 0, /*rank=*/0);
  vllm.remove(a, {0, 1, 2}, /*rank=*/1);
  const auto b = tokens_of(32, 2);
  vllm.store(b, 0, /*rank=*/1);  // a marker: rank 1's removal has been applied once b shows
  ASSERT_TRUE(eventually_held(gw.port, vllm.url(), b, 32));
  EXPECT_EQ(held(gw.port, vllm.url(), a).cached, 48);  // rank 0 still holds it
}

TEST(VllmUpstreamTest, OffloadedBlocksAreHeldOnTheLowerTier) {
  FakeVllm vllm;
  Gateway gw({vllm.upstream_spec()});
  ASSERT_TRUE(gw.connected(vllm.url()));
  const auto a = tokens_of(48, 1);
  vllm.store(a);
  vllm.store(a, 0, 0, "CPU");
  vllm.remove(a, {1, 2}, 0, "GPU");
  ASSERT_TRUE(eventually([&] { return held(gw.port, vllm.url(), a).offloaded == 32; }));
  EXPECT_EQ(held(gw.port, vllm.url(), a).cached, 48);
}

TEST(VllmUpstreamTest, RoutesToTheReplicaHoldingThePrefix) {
  FakeVllm a, b;
  Gateway gw({a.upstream_spec(), b.upstream_spec()});
  ASSERT_TRUE(gw.connected(a.url()) && gw.connected(b.url()));
  const auto prefix = tokens_of(16 * 8, 5);
  b.store(prefix);
  ASSERT_TRUE(eventually_held(gw.port, b.url(), prefix, 128));
  auto prompt = prefix;
  for (std::uint32_t i = 0; i < 20; ++i) prompt.push_back(9000 + i);
  const Reply r = post(gw.port, "/v1/completions", prompt_body(prompt));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-prefixgate-replica"), b.url());
  EXPECT_EQ(r.header("x-prefixgate-route-reason"), "cache_hit");
  EXPECT_EQ(r.header("x-prefixgate-predicted-cached-tokens"), "128");
}

// Events of several replicas that reach the follower in the same poll turn go each to its own
// replica (they were all applied to the first one's: replica b's blocks showed on a).
TEST(VllmUpstreamTest, EventsArrivingTogetherAreCreditedToTheirOwnReplica) {
  FakeVllm a, b;
  Gateway gw({a.upstream_spec(), b.upstream_spec()});
  ASSERT_TRUE(gw.connected(a.url()) && gw.connected(b.url()));
  constexpr std::uint32_t kPrompts = 40;
  std::vector<std::vector<std::uint32_t>> on_a, on_b;
  for (std::uint32_t i = 0; i < kPrompts; ++i) {
    on_a.push_back(tokens_of(16 * 4, 100 + i));
    on_b.push_back(tokens_of(16 * 4, 200 + i));
  }
  // Both replicas' batches back to back, so the follower finds both sockets ready at once.
  for (std::uint32_t i = 0; i < kPrompts; ++i) {
    a.store(on_a[i]);
    b.store(on_b[i]);
  }
  const double blocks = 4.0 * kPrompts;
  EXPECT_TRUE(eventually([&] {
    return metric(gw.port, series("prefixgate_index_blocks", a.url())) == blocks &&
           metric(gw.port, series("prefixgate_index_blocks", b.url())) == blocks;
  })) << metric(gw.port, series("prefixgate_index_blocks", a.url())).value_or(-1)
      << " on a, " << metric(gw.port, series("prefixgate_index_blocks", b.url())).value_or(-1)
      << " on b";
  for (std::uint32_t i = 0; i < kPrompts; ++i) {
    EXPECT_EQ(held(gw.port, a.url(), on_a[i]).cached, 64) << i;
    EXPECT_EQ(held(gw.port, b.url(), on_b[i]).cached, 64) << i;
    EXPECT_EQ(held(gw.port, a.url(), on_b[i]).cached, 0) << i;
    EXPECT_EQ(held(gw.port, b.url(), on_a[i]).cached, 0) << i;
  }
}

TEST(VllmUpstreamTest, LoadIsReadFromVllmAndSglangMetrics) {
  FakeVllm vllm;
  FakeVllm sglang({.kind = "sglang", .form = vllm_wire::Form::kArray, .sglang_layout = true});
  vllm.set_load(5, 3, 0.5);
  sglang.set_load(7, 1, 0.25);
  Gateway gw({vllm.upstream_spec(), sglang.upstream_spec()});
  EXPECT_TRUE(eventually_metric_at_least(
      gw.port, series("prefixgate_upstream_running_sequences", vllm.url()), 5));
  EXPECT_EQ(metric(gw.port, series("prefixgate_upstream_waiting_sequences", vllm.url())), 3);
  EXPECT_EQ(metric(gw.port, series("prefixgate_upstream_kv_usage_ratio", vllm.url())), 0.5);
  EXPECT_TRUE(eventually_metric_at_least(
      gw.port, series("prefixgate_upstream_running_sequences", sglang.url()), 7));
  EXPECT_EQ(metric(gw.port, series("prefixgate_upstream_kv_usage_ratio", sglang.url())), 0.25);
  // And the load moves the routing: an idle replica over a busy one for a cold prompt.
  vllm.set_load(0, 0, 0);
  sglang.set_load(200, 50, 0.9);
  ASSERT_TRUE(eventually([&] {
    return metric(gw.port, series("prefixgate_upstream_running_sequences", sglang.url())) == 200;
  }));
  const Reply r = post(gw.port, "/v1/completions", prompt_body(tokens_of(40, 8)));
  EXPECT_EQ(r.header("x-prefixgate-replica"), vllm.url());
}

TEST(VllmUpstreamTest, SglangEventsWithASaltAreKeyedUnderThatSalt) {
  FakeVllm sglang({.kind = "sglang", .form = vllm_wire::Form::kArray, .sglang_layout = true});
  Gateway gw({sglang.upstream_spec()});
  ASSERT_TRUE(eventually_metric_at_least(
      gw.port, "prefixgate_kv_events_connected{replica=\"" + sglang.url() + "\",kind=\"sglang\"}",
      1));
  const auto a = tokens_of(32, 1);
  sglang.store(a, 0, 0, "GPU", "tenant-7");
  ASSERT_TRUE(eventually_held(gw.port, sglang.url(), a, 32, "tenant-7"));
  EXPECT_EQ(held(gw.port, sglang.url(), a).cached, 0);  // unsalted: other keys
}

TEST(VllmUpstreamTest, MalformedFramesAndPayloadsAreCountedAndSkipped) {
  FakeVllm vllm;
  Gateway gw({vllm.upstream_spec()});
  ASSERT_TRUE(gw.connected(vllm.url()));
  const auto a = tokens_of(32, 1);
  vllm.send_frames({"only one frame"});
  vllm.send_frames({"", "seven b", "x"});  // a sequence frame that is not 8 bytes
  vllm.send_payload("\xc1 is no msgpack");
  vllm.send_payload(std::string("\x92\x01\xdd\xff\xff\xff\xff", 7));  // claims 4G events
  vllm.store(a);
  ASSERT_TRUE(eventually_held(gw.port, vllm.url(), a, 32));
  EXPECT_EQ(metric(gw.port, series("prefixgate_kv_events_skipped_total", vllm.url(),
                                   ",reason=\"malformed_frame\"")),
            2);
  EXPECT_EQ(metric(gw.port, series("prefixgate_kv_events_skipped_total", vllm.url(),
                                   ",reason=\"malformed_payload\"")),
            2);
  EXPECT_EQ(get(gw.port, "/health").status, 200);
  EXPECT_TRUE(gw.process->running());
}

TEST(VllmUpstreamTest, AReplicaWhoseEventsCannotBeReachedIsStillRoutedAndSaysSo) {
  FakeVllm vllm;
  // Events from a port nothing listens on (the engine's own is left unused).
  const std::string spec = vllm.url() + ";kind=vllm;kv_events=tcp://127.0.0.1:1";
  Gateway gw({spec});
  const Reply r = post(gw.port, "/v1/completions", prompt_body(tokens_of(40, 3)));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("x-prefixgate-replica"), vllm.url());
  EXPECT_EQ(metric(gw.port,
                   "prefixgate_kv_events_connected{replica=\"" + vllm.url() + "\",kind=\"vllm\"}"),
            0);
  // Its predictions stand in for events (they do not expire while events are down).
  EXPECT_EQ(held(gw.port, vllm.url(), tokens_of(40, 3)).cached, 32);
  ASSERT_TRUE(eventually([&] {
    return get(gw.port, "/stats").body.find("\"events\":\"down\"") != std::string::npos;
  }));
  EXPECT_NE(get(gw.port, "/stats").body.find("\"kind\":\"vllm\""), std::string::npos);
}

}  // namespace
}  // namespace prefixgate::gateway::testing
