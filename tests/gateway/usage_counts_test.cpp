// The counts read from an upstream's usage in each API's shape, from a parsed usage object and
// from the answer's text (the path every non-streamed answer takes): both give the same. And the
// filter that picks the streamed chunks worth parsing for usage.
#include "server/usage_counts.h"

#include <gtest/gtest.h>

#include <string>

namespace prefixgate::gateway::server {
namespace {

struct Case {
  const char* usage;
  UsageCounts expected;
};

const Case kCases[] = {
    // Chat: the prompt includes its cached part.
    {R"({"prompt_tokens":3177,"completion_tokens":4,"total_tokens":3181,)"
     R"("prompt_tokens_details":{"cached_tokens":3072}})",
     {3177, 3072, 4}},
    {R"({"prompt_tokens":10,"completion_tokens":2})", {10, 0, 2}},
    // Messages: the input tokens are the part neither read from nor written to the cache.
    {R"({"input_tokens":5,"cache_read_input_tokens":100,"cache_creation_input_tokens":7,)"
     R"("output_tokens":9})",
     {112, 100, 9}},
    // The Anthropic SDK's nullable cache fields still mark a Messages usage.
    {R"({"input_tokens":5,"cache_read_input_tokens":null,"output_tokens":9})", {5, 0, 9}},
    // Responses.
    {R"({"input_tokens":40,"input_tokens_details":{"cached_tokens":32},"output_tokens":3,)"
     R"("output_tokens_details":{"reasoning_tokens":0},"total_tokens":43})",
     {40, 32, 3}},
    // What is not a positive number counts none; a details member that is not an object is
    // not read.
    {R"({"prompt_tokens":-3,"completion_tokens":"7","prompt_tokens_details":null,)"
     R"("input_tokens_details":{"cached_tokens":2.9}})",
     {0, 2, 0}},
    {R"({"prompt_tokens":12.7,"prompt_tokens_details":[{"cached_tokens":8}]})", {12, 0, 0}},
    {"{}", {0, 0, 0}},
    // A number past any real count is held at 1e15 (converting 1e300 would be undefined).
    {R"({"prompt_tokens":1e300,"completion_tokens":2e15})",
     {1'000'000'000'000'000, 0, 1'000'000'000'000'000}},
};

void expect_counts(const UsageCounts& got, const UsageCounts& want, const std::string& what) {
  EXPECT_EQ(got.prompt, want.prompt) << what;
  EXPECT_EQ(got.cached, want.cached) << what;
  EXPECT_EQ(got.completion, want.completion) << what;
}

TEST(UsageCounts, ReadsEachApisShapeFromTheTreeAndFromTheText) {
  for (const Case& c : kCases) {
    auto usage = json::parse(c.usage);
    ASSERT_TRUE(usage.ok()) << c.usage;
    const auto from_tree = usage_counts(*usage);
    ASSERT_TRUE(from_tree.has_value()) << c.usage;
    expect_counts(*from_tree, c.expected, c.usage);
    const std::string answer =
        R"({"id":"chatcmpl-1","choices":[{"message":{"content":"\"usage\":{}"}}],"usage":)" +
        std::string(c.usage) + "}";
    const auto from_text = answer_usage_counts(answer);
    ASSERT_TRUE(from_text.has_value()) << answer;
    expect_counts(*from_text, c.expected, answer);
  }
}

TEST(UsageCounts, NothingWithoutAUsageObject) {
  EXPECT_FALSE(usage_counts(json::Value(3)).has_value());
  EXPECT_FALSE(answer_usage_counts(R"({"id":"x"})").has_value());
  EXPECT_FALSE(answer_usage_counts(R"({"usage":null})").has_value());
  EXPECT_FALSE(answer_usage_counts(R"({"usage":{"prompt_tokens":)").has_value());
}

TEST(UsageCounts, AStreamedChunkMayCarryUsageWheneverItsUsageIsAnObject) {
  // Every chunk that holds a usage object passes, however the upstream spaces its JSON.
  for (const char* chunk : {
           R"(data: {"id":"c","choices":[],"usage":{"prompt_tokens":3}})",
           R"(data: {"id":"c","choices":[],"usage" : { "prompt_tokens":3}})",
           "data: {\"choices\": [],\n \"usage\":\r\n\t{\"prompt_tokens\": 3}}",
           R"(data: {"usage":{},"choices":[{"delta":{"content":"x"}}]})",
       }) {
    EXPECT_TRUE(event_may_carry_usage(chunk)) << chunk;
  }
  // Chunks without one: content only, a null usage, the key as a value, and content quoting the
  // key (its quotes escaped there, so never the key's bytes).
  for (const char* chunk : {
           R"(data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hello {x}"}}]})",
           R"(data: {"id":"c","choices":[{"delta":{"content":"L"}}],"usage":null})",
           R"(data: {"id":"c","note":"usage","choices":[{"delta":{}}]})",
           R"(data: {"choices":[{"delta":{"content":"\"usage\": 3 {"}}]})",
           R"(data: {"choices":[{"delta":{"content":"\"usage\":{"}}]})",
           "{",
           "",
       }) {
    EXPECT_FALSE(event_may_carry_usage(chunk)) << chunk;
  }
}

}  // namespace
}  // namespace prefixgate::gateway::server
