// Lint with the client's cache breakpoints (Anthropic's cache_control): volatile content in the
// prefix a request declares stable is an error, wherever it sits, and only there.
#include <gtest/gtest.h>

#include "prefixgate/canonicalize/anthropic.h"
#include "prefixgate/canonicalize/lint.h"

namespace prefixgate::canon {
namespace {

struct Linted {
  PromptLint lint;
  AnalyzedPrompt prompt;
};

Linted lint_messages(std::string_view body, bool volatile_tail = true) {
  auto m = parse_messages_request(body);
  EXPECT_TRUE(m) << m.error().message;
  auto chat = parse_request_value(m->chat.body, Endpoint::kChatCompletions);
  EXPECT_TRUE(chat);
  static const std::unique_ptr<Tokenizer> tokenizer = make_byte_tokenizer();
  const PromptModel model{ChatTemplate::kLlama3, tokenizer.get(), 16, "builtin:tiny"};
  auto prompt = analyze_prompt(*chat, model);
  EXPECT_TRUE(prompt);
  LintOptions options;
  options.breakpoints = breakpoint_bytes(m->chat, *chat, prompt->rendered);
  options.volatile_tail = volatile_tail;
  return Linted{lint_request(*chat, model, *prompt, options), std::move(*prompt)};
}

TEST(LintBreakpointTest, VolatileContentBeforeABreakpointIsAnError) {
  // A date alone is `info`; the breakpoint after it makes it an error. The time in the final
  // user message, after the breakpoint, stays info.
  const Linted l = lint_messages(R"({"max_tokens": 8,
      "system": [{"type": "text", "text": "Today is 2026-08-20.", "cache_control": {"type": "ephemeral"}}],
      "messages": [{"role": "user", "content": "Remind me at 2026-08-20T17:00:00Z"}]})");
  ASSERT_EQ(l.lint.findings.size(), 2u);
  const Finding& date = l.lint.findings[0];
  EXPECT_EQ(date.rule, Rule::kDate);
  EXPECT_TRUE(date.before_breakpoint);
  EXPECT_EQ(date.severity, Severity::kError);
  EXPECT_NE(date.message.find("cache_control"), std::string::npos);
  const Finding& tail = l.lint.findings[1];
  EXPECT_FALSE(tail.before_breakpoint);
  EXPECT_EQ(tail.severity, Severity::kInfo);
  EXPECT_EQ(l.lint.stable_prefix_tokens, date.token_offset);
}

TEST(LintBreakpointTest, ABreakpointOnTheLastTurnCoversTheVolatileTail) {
  // Agents mark the newest turn so that the next step reads it from cache: an id there breaks
  // the next step's prefix.
  const Linted l = lint_messages(R"({"max_tokens": 8, "system": "Stable.",
      "messages": [{"role": "user", "content": [{"type": "text",
        "text": "trace 123e4567-e89b-12d3-a456-426614174000", "cache_control": {"type": "ephemeral"}}]}]})");
  ASSERT_EQ(l.lint.findings.size(), 1u);
  EXPECT_TRUE(l.lint.findings[0].in_volatile_tail);
  EXPECT_TRUE(l.lint.findings[0].before_breakpoint);
  EXPECT_EQ(l.lint.findings[0].severity, Severity::kError);
}

// Without the volatile tail (the gateway's lint): the final user message is not looked into,
// except up to a breakpoint declared in it; what is found before it, and the stable prefix, stay.
TEST(LintBreakpointTest, WithoutTheVolatileTailOnlyWhatCanBreakThePrefixIsFound) {
  const std::string_view after_breakpoint = R"({"max_tokens": 8,
      "system": [{"type": "text", "text": "Today is 2026-08-20.", "cache_control": {"type": "ephemeral"}}],
      "messages": [{"role": "user", "content": "Remind me at 2026-08-20T17:00:00Z"}]})";
  const Linted all = lint_messages(after_breakpoint);
  const Linted head = lint_messages(after_breakpoint, false);
  ASSERT_EQ(all.lint.findings.size(), 2u);
  ASSERT_EQ(head.lint.findings.size(), 1u);
  EXPECT_EQ(head.lint.findings[0].rule, Rule::kDate);
  EXPECT_EQ(head.lint.findings[0].severity, Severity::kError);
  EXPECT_EQ(head.lint.stable_prefix_tokens, all.lint.stable_prefix_tokens);

  const Linted on_last_turn = lint_messages(R"({"max_tokens": 8, "system": "Stable.",
      "messages": [{"role": "user", "content": [{"type": "text",
        "text": "trace 123e4567-e89b-12d3-a456-426614174000", "cache_control": {"type": "ephemeral"}}]}]})",
                                            false);
  ASSERT_EQ(on_last_turn.lint.findings.size(), 1u);
  EXPECT_TRUE(on_last_turn.lint.findings[0].before_breakpoint);

  const Linted plain = lint_messages(R"({"max_tokens": 8, "system": "Stable.",
      "messages": [{"role": "user", "content": "my order 123e4567-e89b-12d3-a456-426614174000"}]})",
                                     false);
  EXPECT_TRUE(plain.lint.findings.empty());
  EXPECT_EQ(plain.lint.stable_prefix_tokens, lint_messages(R"({"max_tokens": 8, "system": "Stable.",
      "messages": [{"role": "user", "content": "my order 123e4567-e89b-12d3-a456-426614174000"}]})")
                                                 .lint.stable_prefix_tokens);
}

TEST(LintBreakpointTest, WithoutBreakpointsSeveritiesAreTheDetectors) {
  const Linted l = lint_messages(R"({"max_tokens": 8, "system": "Today is 2026-08-20.",
      "messages": [{"role": "user", "content": "hi"}]})");
  ASSERT_EQ(l.lint.findings.size(), 1u);
  EXPECT_FALSE(l.lint.findings[0].before_breakpoint);
  EXPECT_EQ(l.lint.findings[0].severity, Severity::kInfo);
}

}  // namespace
}  // namespace prefixgate::canon
