#include "prefixgate/canonicalize/lint.h"

#include <gtest/gtest.h>

#include "prefixgate/canonicalize/chat_format.h"

namespace prefixgate::canon {
namespace {

struct Fixture {
  std::unique_ptr<Tokenizer> tokenizer = make_byte_tokenizer();
  PromptModel model{ChatTemplate::kLlama3, tokenizer.get(), 16, "builtin:tiny"};

  PromptLint lint(std::string_view body) {
    auto r = parse_request(body, Endpoint::kChatCompletions);
    EXPECT_TRUE(r) << r.error().message;
    auto p = analyze_prompt(*r, model);
    EXPECT_TRUE(p) << p.error().message;
    if (p) prompt = std::move(*p);
    return lint_prompt(prompt);
  }
  AnalyzedPrompt prompt;
};

TEST(LintTest, TimestampInSystemPromptIsAnErrorAtItsFieldAndToken) {
  Fixture fx;
  PromptLint l = fx.lint(R"({"messages":[
      {"role":"system","content":"You help. Now: 2026-08-20T14:33:07Z."},
      {"role":"user","content":"hi"}]})");
  ASSERT_EQ(l.findings.size(), 1u);
  const Finding& f = l.findings[0];
  EXPECT_EQ(f.rule, Rule::kTimestamp);
  EXPECT_EQ(f.severity, Severity::kError);
  EXPECT_EQ(f.field, "messages[0].content");
  EXPECT_EQ(f.excerpt, "2026-08-20T14:33:07Z");
  EXPECT_FALSE(f.in_volatile_tail);
  EXPECT_EQ(fx.prompt.rendered.text.substr(f.prompt_begin, f.prompt_end - f.prompt_begin),
            f.excerpt);
  // Byte tokenizer: the token index is the byte's, shifted by the specials before it.
  EXPECT_EQ(fx.prompt.tokens.tokens[f.token_offset], static_cast<TokenId>('2'));
  EXPECT_EQ(l.stable_prefix_tokens, f.token_offset);
  EXPECT_FALSE(f.message.empty());
  EXPECT_FALSE(f.hint.empty());
}

TEST(LintTest, ContentOfTheFinalUserMessageIsInfoAtMost) {
  Fixture fx;
  PromptLint l = fx.lint(R"({"messages":[
      {"role":"system","content":"Stable instructions."},
      {"role":"user","content":"Book it for 2026-08-20T14:33:07Z, ref 123e4567-e89b-12d3-a456-426614174000"}]})");
  ASSERT_EQ(l.findings.size(), 2u);
  for (const Finding& f : l.findings) {
    EXPECT_EQ(f.severity, Severity::kInfo);
    EXPECT_TRUE(f.in_volatile_tail);
  }
  EXPECT_EQ(l.stable_prefix_tokens, fx.prompt.stable_prefix_tokens());
}

TEST(LintTest, EarlierUserTurnsAreStillPrefix) {
  Fixture fx;
  PromptLint l = fx.lint(R"({"messages":[
      {"role":"user","content":"session 123e4567-e89b-12d3-a456-426614174000"},
      {"role":"assistant","content":"ok"},
      {"role":"user","content":"next"}]})");
  ASSERT_EQ(l.findings.size(), 1u);
  EXPECT_EQ(l.findings[0].rule, Rule::kId);
  EXPECT_EQ(l.findings[0].severity, Severity::kError);
}

TEST(LintTest, DateAloneIsInfoAndDoesNotShortenTheStablePrefix) {
  Fixture fx;
  PromptLint l = fx.lint(R"({"messages":[
      {"role":"system","content":"Today is 2026-08-20."},{"role":"user","content":"hi"}]})");
  ASSERT_EQ(l.findings.size(), 1u);
  EXPECT_EQ(l.findings[0].rule, Rule::kDate);
  EXPECT_EQ(l.findings[0].severity, Severity::kInfo);
  EXPECT_EQ(l.stable_prefix_tokens, fx.prompt.stable_prefix_tokens());
}

TEST(LintTest, CleanPromptHasNoFindings) {
  Fixture fx;
  PromptLint l = fx.lint(R"({"messages":[
      {"role":"system","content":"Support for v2.0.1 on Python 3.11. Plans cost $19.99. Call +1 (555) 123-4567. Since 2026. Errors: 404, 503."},
      {"role":"user","content":"hi"}]})");
  EXPECT_TRUE(l.findings.empty()) << l.findings[0].excerpt;
}

// Without explanations the findings are the same, only their message and hint are left empty.
TEST(LintTest, WithoutExplanationsFindsTheSameSpans) {
  Fixture fx;
  const PromptLint full = fx.lint(R"({"messages":[
      {"role":"system","content":"Now: 2026-08-20T14:33:07Z, request 3f2b8c1e-6a4d-4f3a-9b2e-1c0d5e7f8a9b."},
      {"role":"user","content":"hi at 09:15:02"}]})");
  const PromptLint bare = lint_prompt(fx.prompt, {.explain = false});
  ASSERT_EQ(full.findings.size(), 3u);
  ASSERT_EQ(bare.findings.size(), full.findings.size());
  EXPECT_EQ(bare.stable_prefix_tokens, full.stable_prefix_tokens);
  for (std::size_t i = 0; i < full.findings.size(); ++i) {
    EXPECT_EQ(bare.findings[i].rule, full.findings[i].rule);
    EXPECT_EQ(bare.findings[i].severity, full.findings[i].severity);
    EXPECT_EQ(bare.findings[i].prompt_begin, full.findings[i].prompt_begin);
    EXPECT_EQ(bare.findings[i].token_offset, full.findings[i].token_offset);
    EXPECT_EQ(bare.findings[i].field, full.findings[i].field);
    EXPECT_EQ(bare.findings[i].excerpt, full.findings[i].excerpt);
    EXPECT_FALSE(full.findings[i].message.empty());
    EXPECT_TRUE(bare.findings[i].message.empty());
    EXPECT_TRUE(bare.findings[i].hint.empty());
  }
}

// A template that writes today's date unless the request passes one, as Llama 3.x's do.
TEST(LintTest, ATemplatesStrftimeNowIsAVolatileDateUnlessTheRequestSetsTheDate) {
  auto templates = load_chat_templates(R"({"chat_template":
      "{%- if not date_string is defined %}{%- set date_string = strftime_now('%d %b %Y') %}{%- endif %}System. Today: {{ date_string }}.\n{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"})");
  ASSERT_TRUE(templates.ok()) << templates.error().message;
  auto tokenizer = make_byte_tokenizer();
  const PromptModel model{ChatFormat(std::make_shared<ModelChatTemplates>(std::move(*templates))),
                          tokenizer.get(), 16, "builtin:tiny"};
  ASSERT_TRUE(model.chat_format.uses_strftime_now());
  const auto lint = [&](std::string_view body) {
    auto r = parse_request(body, Endpoint::kChatCompletions);
    EXPECT_TRUE(r.ok());
    ChatRenderOptions today;
    today.now = jinja::CivilTime{2026, 12, 1, 9, 30, 0};
    auto p = analyze_prompt(*r, model, today);
    EXPECT_TRUE(p.ok()) << p.error().message;
    return std::pair{lint_request(*r, model, *p), p->rendered.text};
  };
  const auto [dated, text] = lint(R"({"messages":[{"role":"system","content":"Be brief."},
      {"role":"user","content":"hi"}]})");
  ASSERT_EQ(dated.findings.size(), 1u);
  const Finding& f = dated.findings[0];
  EXPECT_EQ(f.rule, Rule::kDate);
  EXPECT_EQ(f.kind, "strftime_now");
  EXPECT_EQ(f.field, "chat_template");
  EXPECT_EQ(f.severity, Severity::kError);
  EXPECT_EQ(f.excerpt, "01 Dec 2026");
  EXPECT_EQ(text.substr(f.prompt_begin, f.prompt_end - f.prompt_begin), "01 Dec 2026");
  EXPECT_EQ(dated.stable_prefix_tokens, std::string("System. Today: ").size());
  EXPECT_FALSE(f.message.empty());

  const auto [fixed, unused] = lint(R"({"messages":[{"role":"user","content":"hi"}],
      "chat_template_kwargs":{"date_string":"26 Jul 2024"}})");
  EXPECT_TRUE(fixed.findings.empty());
  (void)unused;
}

}  // namespace
}  // namespace prefixgate::canon
