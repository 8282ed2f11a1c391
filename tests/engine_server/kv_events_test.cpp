// /v1/kv_events: snapshot, deltas as requests fill the cache, load reports, and reconnects.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "prefixgate/canonicalize/block_hash.h"
#include "test_client.h"
#include "test_server.h"

namespace prefixgate::engine::server::testing {
namespace {

std::string prompt_of(char c, int pages) {
  return R"({"prompt":")" + std::string(static_cast<std::size_t>(pages) * 16 + 3, c) +
         R"(","max_tokens":1})";
}

std::vector<json::Value> of_type(const std::vector<json::Value>& lines, const std::string& type) {
  std::vector<json::Value> out;
  for (const json::Value& v : lines) {
    if (str(v, "type") == type) out.push_back(v);
  }
  return out;
}

bool has_type(const std::string& body, const std::string& type) {
  return !of_type(parse_ndjson(body), type).empty();
}

TEST(KvEventsTest, SnapshotThenStoredDeltasThenLoad) {
  TestServer s;
  ASSERT_EQ(post(s.port(), "/v1/completions", prompt_of('a', 2)).status, 200);

  Client c(s.port());
  ASSERT_TRUE(c.send(http::verb::get, "/v1/kv_events"));
  ASSERT_TRUE(c.read_header());
  EXPECT_EQ(c.status(), 200);
  ASSERT_TRUE(c.read_until([](const std::string& b) { return has_type(b, "snapshot"); }));
  const json::Value snapshot = of_type(parse_ndjson(c.body()), "snapshot").at(0);
  EXPECT_EQ(str(snapshot, "model"), "test-model");
  EXPECT_EQ(num(snapshot, "block_size"), 16);
  const json::Array& blocks = at(snapshot, "blocks").as_array();
  ASSERT_EQ(blocks.size(), 2u);  // two full pages of the first prompt
  EXPECT_EQ(str(blocks[0], "hash").size(), 16u);
  EXPECT_EQ(str(blocks[1], "parent"), str(blocks[0], "hash"));
  const double snap_seq = num(snapshot, "seq");
  EXPECT_GE(snap_seq, 2);

  ASSERT_EQ(post(s.port(), "/v1/completions", prompt_of('b', 3)).status, 200);
  ASSERT_TRUE(c.read_until(
      [](const std::string& b) { return of_type(parse_ndjson(b), "stored").size() >= 3; }));
  const auto stored = of_type(parse_ndjson(c.body()), "stored");
  double prev = snap_seq;
  for (const json::Value& e : stored) {
    EXPECT_GT(num(e, "seq"), prev);  // in order, none from before the snapshot
    prev = num(e, "seq");
    EXPECT_EQ(str(e, "hash").size(), 16u);
  }
  // Load reports keep coming and follow the cache: 5 full pages are cached by now.
  ASSERT_TRUE(c.read_until([](const std::string& b) {
    const auto loads = of_type(parse_ndjson(b), "load");
    return !loads.empty() && num(loads.back(), "kv_pages_used") >= 5;
  }));
  const json::Value load = of_type(parse_ndjson(c.body()), "load").back();
  EXPECT_EQ(num(load, "kv_pages_total"), 256);
  EXPECT_GE(num(load, "running"), 0);
  EXPECT_GE(num(load, "tokens_queued_for_prefill"), 0);
  EXPECT_NE(load.find("preemptions_total"), nullptr);  // for the gateway's dashboard
}

TEST(KvEventsTest, ReconnectWithSinceGetsMissedDeltasWithoutSnapshot) {
  TestServer s;
  ASSERT_EQ(post(s.port(), "/v1/completions", prompt_of('a', 1)).status, 200);
  const std::uint64_t seen = s.engine().kv_events().last_seq();
  ASSERT_GE(seen, 1u);
  ASSERT_EQ(post(s.port(), "/v1/completions", prompt_of('c', 2)).status, 200);

  Client c(s.port());
  ASSERT_TRUE(c.send(http::verb::get, "/v1/kv_events?since=" + std::to_string(seen)));
  ASSERT_TRUE(c.read_header());
  ASSERT_TRUE(c.read_until([](const std::string& b) {
    return of_type(parse_ndjson(b), "stored").size() >= 2 && has_type(b, "load");
  }));
  const auto lines = parse_ndjson(c.body());
  EXPECT_TRUE(of_type(lines, "snapshot").empty());
  EXPECT_EQ(num(of_type(lines, "stored").front(), "seq"), static_cast<double>(seen + 1));
}

TEST(KvEventsTest, SinceBeyondTheLogGetsAFreshSnapshot) {
  TestServer s;
  ASSERT_EQ(post(s.port(), "/v1/completions", prompt_of('a', 1)).status, 200);
  // A seq this replica never reached (the reader knew an earlier incarnation).
  Client c(s.port());
  ASSERT_TRUE(c.send(http::verb::get, "/v1/kv_events?since=999999"));
  ASSERT_TRUE(c.read_header());
  ASSERT_TRUE(c.read_until([](const std::string& b) { return has_type(b, "snapshot"); }));
  const json::Value snapshot = of_type(parse_ndjson(c.body()), "snapshot").at(0);
  EXPECT_EQ(at(snapshot, "blocks").as_array().size(), 1u);
}

// since=0 on a log that still holds everything replays it all; a fresh connection's snapshot
// lists exactly the engine's cached blocks.
TEST(KvEventsTest, SinceZeroReplaysAndSnapshotMatchesTheEngine) {
  TestServer s;
  ASSERT_EQ(post(s.port(), "/v1/completions", prompt_of('z', 2)).status, 200);
  Client replay(s.port());
  ASSERT_TRUE(replay.send(http::verb::get, "/v1/kv_events?since=0"));
  ASSERT_TRUE(replay.read_header());
  ASSERT_TRUE(replay.read_until(
      [](const std::string& b) { return of_type(parse_ndjson(b), "stored").size() >= 2; }));
  EXPECT_TRUE(of_type(parse_ndjson(replay.body()), "snapshot").empty());

  const CacheSnapshot engine_snapshot = s.engine().cache_snapshot();
  Client fresh(s.port());
  ASSERT_TRUE(fresh.send(http::verb::get, "/v1/kv_events"));
  ASSERT_TRUE(fresh.read_header());
  ASSERT_TRUE(fresh.read_until([](const std::string& b) { return has_type(b, "snapshot"); }));
  const json::Value snapshot = of_type(parse_ndjson(fresh.body()), "snapshot").at(0);
  std::set<std::string> served, expected;
  for (const json::Value& b : at(snapshot, "blocks").as_array()) served.insert(str(b, "hash"));
  for (const CachedBlock& b : engine_snapshot.blocks)
    expected.insert(canon::hash_hex(b.block_hash));
  EXPECT_EQ(served, expected);
}

// Each block of `lines` as (type, seq, hash): a run's blocks one by one, from its first seq on.
std::vector<std::tuple<std::string, double, std::string>> blocks_of(
    const std::vector<json::Value>& lines) {
  std::vector<std::tuple<std::string, double, std::string>> out;
  for (const json::Value& v : lines) {
    const std::string type = str(v, "type");
    if (type != "stored" && type != "removed") continue;
    if (const json::Value* run = v.find("hashes")) {
      double seq = num(v, "seq");
      for (const json::Value& h : run->as_array()) out.emplace_back(type, seq++, h.as_string());
    } else {
      out.emplace_back(type, num(v, "seq"), str(v, "hash"));
    }
  }
  return out;
}

// ?batch=1: the same blocks in the same order under the same sequence numbers, a run of them
// (a prompt's stored pages, an eviction's removed ones) on one line, each stored block of a run
// the parent of the next.
TEST(KvEventsTest, BatchPutsARunOfBlocksOnOneLine) {
  TestServerConfig config;
  config.num_pages = 12;
  TestServer s(config);
  // 5 + 5 pages cached, then 5 more evict the first prompt's.
  for (const char c : {'a', 'b', 'c'}) {
    ASSERT_EQ(post(s.port(), "/v1/completions", prompt_of(c, 5)).status, 200);
  }
  const std::uint64_t last = s.engine().kv_events().last_seq();
  const auto read_all = [&](const std::string& target) {
    Client c(s.port());
    EXPECT_TRUE(c.send(http::verb::get, target));
    EXPECT_TRUE(c.read_header());
    EXPECT_TRUE(c.read_until([&](const std::string& b) {
      const auto blocks = blocks_of(parse_ndjson(b));
      return !blocks.empty() && std::get<1>(blocks.back()) >= static_cast<double>(last);
    }));
    return parse_ndjson(c.body());
  };
  const auto single = read_all("/v1/kv_events?since=0");
  const auto batched = read_all("/v1/kv_events?batch=1&since=0");
  EXPECT_EQ(blocks_of(batched), blocks_of(single));
  std::size_t stored_runs = 0;
  std::size_t removed_runs = 0;
  for (const json::Value& v : batched) {
    const json::Value* run = v.find("hashes");
    if (run == nullptr) continue;
    ASSERT_GE(run->as_array().size(), 2u);
    EXPECT_EQ(v.find("hash"), nullptr);
    if (str(v, "type") == "stored") ++stored_runs;
    if (str(v, "type") == "removed") ++removed_runs;
  }
  EXPECT_GE(stored_runs, 3u);  // a line per prompt, not per page
  EXPECT_GE(removed_runs, 1u);
  // Without batch=1 every line is one block, as readers that predate runs expect.
  for (const json::Value& v : single) EXPECT_EQ(v.find("hashes"), nullptr);
}

}  // namespace
}  // namespace prefixgate::engine::server::testing
