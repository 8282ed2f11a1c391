#include "prefixgate/canonicalize/divergence.h"

#include <gtest/gtest.h>

namespace prefixgate::canon {
namespace {

class DivergenceTest : public ::testing::Test {
 protected:
  Divergence diff(std::string_view old_body, std::string_view new_body) {
    auto a = parse_request(old_body, Endpoint::kChatCompletions);
    auto b = parse_request(new_body, Endpoint::kChatCompletions);
    EXPECT_TRUE(a) << a.error().message;
    EXPECT_TRUE(b) << b.error().message;
    auto d = compare_prompts(*a, *b, model_, CanonicalizationPolicy{});
    EXPECT_TRUE(d) << d.error().message;
    return d ? *d : Divergence{};
  }

  std::unique_ptr<Tokenizer> tokenizer_ = make_byte_tokenizer();
  PromptModel model_{ChatTemplate::kLlama3, tokenizer_.get(), 16, "builtin:tiny"};
};

std::string sys(std::string_view system, std::string_view tools = "") {
  std::string body = R"({"messages":[{"role":"system","content":")" + std::string(system) +
                     R"("},{"role":"user","content":"question"}])";
  if (!tools.empty()) body += R"(,"tools":)" + std::string(tools);
  return body + "}";
}

TEST_F(DivergenceTest, IdenticalPromptsDoNotDiverge) {
  const Divergence d = diff(sys("Be brief."), sys("Be brief."));
  EXPECT_FALSE(d.diverged);
  EXPECT_EQ(d.cause, DivergenceCause::kNone);
  EXPECT_EQ(d.prefix_tokens_lost, 0u);
}

TEST_F(DivergenceTest, TimestampChangeIsFoundAndCanonicalizationKeepsThePrefix) {
  const Divergence d = diff(sys("Now 2026-08-20T14:33:07Z. Be brief and exact in every answer."),
                            sys("Now 2026-08-20T14:47:52Z. Be brief and exact in every answer."));
  ASSERT_TRUE(d.diverged);
  EXPECT_EQ(d.cause, DivergenceCause::kTimestamp);
  EXPECT_EQ(d.field, "messages[0].content");
  EXPECT_EQ(d.old_excerpt.substr(0, 3), "33:");
  EXPECT_EQ(d.new_excerpt.substr(0, 3), "47:");
  EXPECT_EQ(d.block_index, d.token_index / 16);
  EXPECT_GT(d.prefix_tokens_lost, 0u);
  EXPECT_TRUE(d.canonicalization_keeps_prefix);
  EXPECT_GT(d.canonical_common_prefix_tokens, d.common_prefix_tokens);
}

TEST_F(DivergenceTest, IdChangeIsAnIdThatCanonicalizationCannotFix) {
  const Divergence d = diff(sys("Session 123e4567-e89b-12d3-a456-426614174000. Be brief."),
                            sys("Session 9b2f1c3e-0d4a-4e5b-8c6d-7e8f9a0b1c2d. Be brief."));
  ASSERT_TRUE(d.diverged);
  EXPECT_EQ(d.cause, DivergenceCause::kId);
  EXPECT_FALSE(d.canonicalization_keeps_prefix);
}

TEST_F(DivergenceTest, KeyOrderAndToolOrderAreTold) {
  const std::string f = R"({"type":"function","function":{"name":"f","parameters":{"a":1,"b":2}}})";
  const std::string f_reordered =
      R"({"type":"function","function":{"parameters":{"b":2,"a":1},"name":"f"}})";
  const std::string g = R"({"type":"function","function":{"name":"g"}})";
  Divergence keys =
      diff(sys("S", "[" + f + "," + g + "]"), sys("S", "[" + f_reordered + "," + g + "]"));
  ASSERT_TRUE(keys.diverged);
  EXPECT_EQ(keys.cause, DivergenceCause::kKeyOrder);
  EXPECT_EQ(keys.field, "tools[0]");
  EXPECT_TRUE(keys.canonicalization_keeps_prefix);

  Divergence order = diff(sys("S", "[" + f + "," + g + "]"), sys("S", "[" + g + "," + f + "]"));
  ASSERT_TRUE(order.diverged);
  EXPECT_EQ(order.cause, DivergenceCause::kToolOrder);
  EXPECT_TRUE(order.canonicalization_keeps_prefix);
}

TEST_F(DivergenceTest, WhitespaceAndEditsAreTold) {
  Divergence ws = diff(sys("Be brief. Be kind."), sys("Be brief.  Be kind."));
  ASSERT_TRUE(ws.diverged);
  EXPECT_EQ(ws.cause, DivergenceCause::kWhitespace);

  Divergence edit = diff(sys("Be brief. Be kind."), sys("Be brief. Be exact."));
  ASSERT_TRUE(edit.diverged);
  EXPECT_EQ(edit.cause, DivergenceCause::kEdit);
  EXPECT_FALSE(edit.canonicalization_keeps_prefix);
}

TEST_F(DivergenceTest, AnAppendedTurnExtendsThePromptWithoutDiverging) {
  const Divergence d =
      diff(R"({"messages":[{"role":"system","content":"S"},{"role":"user","content":"q1"}]})",
           R"({"messages":[{"role":"system","content":"S"},{"role":"user","content":"q1"},)"
           R"({"role":"assistant","content":"a1"},{"role":"user","content":"q2"}]})");
  EXPECT_FALSE(d.diverged);
  EXPECT_EQ(d.prefix_tokens_lost, 0u);
}

}  // namespace
}  // namespace prefixgate::canon
