// Mooncake-format traces: parsing, replay as token-id prompts, and the ceiling.
#include "workloads/trace.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "ceiling.h"
#include "prefixgate/canonicalize/request.h"

namespace prefixgate::bench {
namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(TraceTest, ParsesMooncakeSyntheticTrace) {
  const std::string text =
      read(std::string(PREFIXGATE_DATA_DIR) + "/traces/mooncake_synthetic_trace.jsonl");
  ASSERT_FALSE(text.empty()) << "missing the trace under " << PREFIXGATE_DATA_DIR;
  auto trace = parse_trace(text);
  ASSERT_TRUE(trace.ok()) << trace.error().message;
  ASSERT_EQ(trace->size(), 3993u);
  const TraceRecord& first = trace->front();
  EXPECT_EQ(first.timestamp_ms, 0);
  EXPECT_EQ(first.input_length, 40160u);
  EXPECT_EQ(first.output_length, 6u);
  ASSERT_EQ(first.hash_ids.size(), 79u);  // ceil(40160 / 512)
  EXPECT_EQ(first.hash_ids[78], 78u);
}

TEST(TraceTest, MooncakeSyntheticCeilingIsItsPublishedSharing) {
  auto trace = parse_trace(
      read(std::string(PREFIXGATE_DATA_DIR) + "/traces/mooncake_synthetic_trace.jsonl"));
  ASSERT_TRUE(trace.ok());
  TraceOptions o;
  o.length_scale = 1.0 / 16;  // 32-token blocks: two engine pages per trace block
  const Workload w = make_trace_workload(*trace, o, 1);
  const auto tokenizer = canon::make_byte_tokenizer();
  CeilingModel m;
  m.tokenizer = tokenizer.get();
  auto c = compute_ceiling(w, m);
  ASSERT_TRUE(c.ok()) << c.error().message;
  // The trace's own block-level sharing is 64 %; over tokens (partial last blocks miss) a little
  // less.
  EXPECT_GT(c->hit_rate, 0.55);
  EXPECT_LT(c->hit_rate, 0.66);
}

TEST(TraceTest, RejectsBadLinesWithTheLineNumber) {
  auto bad = parse_trace(
      "{\"timestamp\":0,\"input_length\":10,\"output_length\":1,\"hash_ids\":[0]}\n"
      "{\"timestamp\":1,\"input_length\":10,\"output_length\":1,\"hash_ids\":[-1]}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("line 2"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("hash_ids"), std::string::npos);
  EXPECT_FALSE(parse_trace("not json\n").ok());
  EXPECT_FALSE(parse_trace("").ok());
  EXPECT_FALSE(parse_trace("{\"timestamp\":0,\"output_length\":1,\"hash_ids\":[]}").ok());
}

TEST(TraceTest, SharedHashIdsBecomeSharedTokenBlocks) {
  // Blocks of 16 tokens (512 * 1/32). a = [0,1] 32 tokens, b = [0,1,2] 40 tokens, c = [5] 16.
  auto trace = parse_trace(
      "{\"timestamp\":0,\"input_length\":1024,\"output_length\":4,\"hash_ids\":[0,1]}\n"
      "{\"timestamp\":500,\"input_length\":1280,\"output_length\":4,\"hash_ids\":[0,1,2]}\n"
      "{\"timestamp\":1000,\"input_length\":512,\"output_length\":4,\"hash_ids\":[5]}\n");
  ASSERT_TRUE(trace.ok()) << trace.error().message;
  TraceOptions o;
  o.length_scale = 1.0 / 32;
  o.time_scale = 0.5;
  ASSERT_EQ(scaled_block_tokens(o), 16u);
  const auto a = trace_prompt((*trace)[0], o, 1);
  const auto b = trace_prompt((*trace)[1], o, 1);
  const auto c = trace_prompt((*trace)[2], o, 1);
  ASSERT_EQ(a.size(), 32u);
  ASSERT_EQ(b.size(), 40u);
  ASSERT_EQ(c.size(), 16u);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin()));
  EXPECT_NE(std::vector<canon::TokenId>(c.begin(), c.end()),
            std::vector<canon::TokenId>(a.begin(), a.begin() + 16));
  for (canon::TokenId t : b) EXPECT_LT(t, 256u);

  const Workload w = make_trace_workload(*trace, o, 1);
  ASSERT_EQ(w.sessions.size(), 3u);
  EXPECT_DOUBLE_EQ(w.sessions[1].arrival_s, 0.25);
  auto req = canon::parse_request(w.sessions[1].turns[0].body, canon::Endpoint::kCompletions);
  ASSERT_TRUE(req.ok()) << req.error().message;
  ASSERT_TRUE(req->prompts[0].is_tokens);
  EXPECT_EQ(req->prompts[0].token_ids, b);

  // Known ceiling: a misses (32 tokens); b hits a's 2 blocks (32 of 40: (40-1)/16 = 2 blocks
  // may hit); c misses (16). 32 / 88.
  const auto tokenizer = canon::make_byte_tokenizer();
  CeilingModel m;
  m.tokenizer = tokenizer.get();
  auto ceiling = compute_ceiling(w, m);
  ASSERT_TRUE(ceiling.ok());
  EXPECT_EQ(ceiling->prompt_tokens, 88u);
  EXPECT_EQ(ceiling->hit_tokens, 32u);
  // Warm-up: a is cached but not counted.
  auto warm = compute_ceiling(w, m, /*warmup=*/1);
  ASSERT_TRUE(warm.ok());
  EXPECT_EQ(warm->prompt_tokens, 56u);
  EXPECT_EQ(warm->hit_tokens, 32u);
}

TEST(PrefixCeilingTest, TheLastTokenAlwaysRuns) {
  // An identical 32-token prompt can hit one block, not two: the engine recomputes the last
  // token (and so its whole page).
  PrefixCeiling c(16);
  const std::vector<std::uint64_t> h{1, 2};
  EXPECT_EQ(c.add(h, 32), 0u);
  EXPECT_EQ(c.add(h, 32), 16u);
  EXPECT_EQ(c.add(h, 33), 32u);
  EXPECT_EQ(c.prompt_tokens(), 97u);
  EXPECT_EQ(c.hit_tokens(), 48u);
}

}  // namespace
}  // namespace prefixgate::bench
