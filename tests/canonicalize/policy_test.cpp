#include "prefixgate/canonicalize/policy.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "prefixgate/canonicalize/render.h"
#include "support/requests.h"

namespace prefixgate::canon {
namespace {

using test_support::chat;

std::vector<std::string> rules_of(const CanonicalizeOutcome& out) {
  std::vector<std::string> rules;
  for (const Change& c : out.changes) rules.push_back(c.rule);
  return rules;
}

// Two serializations of the same tools, as two JSON libraries (or two hash maps) produce them.
constexpr std::string_view kToolsA = R"({"messages":[{"role":"user","content":"hi"}],"tools":[
  {"type":"function","function":{"name":"search","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}},
  {"type":"function","function":{"name":"add","parameters":{"properties":{"a":{"type":"number","minimum":1.0}},"type":"object"}}}]})";
constexpr std::string_view kToolsB = R"({"messages":[{"role":"user","content":"hi"}],"tools":[
  {"function":{"parameters":{"type":"object","properties":{"a":{"minimum":1,"type":"number"}}},"name":"add"},"type":"function"},
  {"type":"function","function":{"parameters":{"properties":{"q":{"type":"string"}},"type":"object"},"name":"search"}}]})";

TEST(PolicyTest, ToolKeyOrderAndToolOrderNoLongerChangeThePrompt) {
  const auto a = canonicalize(chat(kToolsA), {});
  const auto b = canonicalize(chat(kToolsB), {});
  EXPECT_EQ(json::to_json(a.body), json::to_json(b.body));
  EXPECT_EQ(rules_of(a), (std::vector<std::string>{"tool-json", "tool-order"}));
  // And without the policy they differ, which is the problem being solved.
  EXPECT_NE(json::to_json(canonicalize(chat(kToolsA), CanonicalizationPolicy::none()).body),
            json::to_json(canonicalize(chat(kToolsB), CanonicalizationPolicy::none()).body));
}

TEST(PolicyTest, CanonicalRequestReportsNoChangesAndIsIdempotent) {
  const auto once = canonicalize(chat(kToolsA), {});
  auto again_req = parse_request_value(once.body, Endpoint::kChatCompletions);
  ASSERT_TRUE(again_req);
  const auto twice = canonicalize(*again_req, {});
  EXPECT_TRUE(twice.changes.empty());
  EXPECT_EQ(json::to_json(twice.body), json::to_json(once.body));
}

TEST(PolicyTest, EachRuleCanBeSwitchedOff) {
  CanonicalizationPolicy only_order = CanonicalizationPolicy::none();
  only_order.tool_order = true;
  const auto out = canonicalize(chat(kToolsA), only_order);
  EXPECT_EQ(rules_of(out), (std::vector<std::string>{"tool-order"}));
  // Sorted, but each definition kept its own key order.
  EXPECT_NE(json::to_json(out.body).find(R"({"properties":{"a")"), std::string::npos);
}

TEST(PolicyTest, TimestampsInSystemMessagesAreRoundedButUserTextIsNot) {
  const auto out = canonicalize(chat(R"({"messages":[
      {"role":"system","content":"Now: 2026-08-20T14:33:07Z."},
      {"role":"user","content":"It is 2026-08-20T14:33:07Z here."}]})"),
                                {});
  const json::Array& msgs = out.body.find("messages")->as_array();
  EXPECT_EQ(msgs[0].find("content")->as_string(), "Now: 2026-08-20T14:00:00Z.");
  EXPECT_EQ(msgs[1].find("content")->as_string(), "It is 2026-08-20T14:33:07Z here.");
  ASSERT_EQ(out.changes.size(), 1u);
  EXPECT_EQ(out.changes[0].rule, "timestamp");
  EXPECT_EQ(out.changes[0].path, "messages[0].content");
}

TEST(PolicyTest, TimestampGranularityIsConfigurable) {
  CanonicalizationPolicy p;
  p.timestamp_granularity = std::chrono::minutes(15);
  const auto out = canonicalize(
      chat(
          R"({"messages":[{"role":"developer","content":[{"type":"text","text":"at 2026-08-20 14:33"}]}]})"),
      p);
  EXPECT_EQ(out.body.find("messages")
                ->as_array()[0]
                .find("content")
                ->as_array()[0]
                .find("text")
                ->as_string(),
            "at 2026-08-20 14:30");
  EXPECT_EQ(out.changes.at(0).path, "messages[0].content[0].text");
}

TEST(PolicyTest, TimestampsInToolDescriptionsAreRounded) {
  const auto out = canonicalize(chat(R"({"messages":[{"role":"user","content":"x"}],"tools":[
      {"type":"function","function":{"name":"f","description":"Data as of 2026-08-20T14:33:07Z",
       "parameters":{"type":"object","properties":{"d":{"type":"string","description":"after 2026-08-20 09:59:59"}}}}}]})"),
                                {});
  const std::string body = json::to_json(out.body);
  EXPECT_NE(body.find("Data as of 2026-08-20T14:00:00Z"), std::string::npos);
  EXPECT_NE(body.find("after 2026-08-20 09:00:00"), std::string::npos);
}

TEST(PolicyTest, WhitespaceNormalizationIsOffByDefault) {
  const std::string_view body = R"({"messages":[{"role":"system","content":"a  \r\nb\t\r\n"}]})";
  EXPECT_TRUE(canonicalize(chat(body), {}).changes.empty());
  CanonicalizationPolicy p;
  p.whitespace = true;
  const auto out = canonicalize(chat(body), p);
  EXPECT_EQ(out.body.find("messages")->as_array()[0].find("content")->as_string(), "a\nb\n");
  EXPECT_EQ(rules_of(out), (std::vector<std::string>{"whitespace"}));
}

TEST(PolicyTest, ResponseFormatSchemaBecomesCanonical) {
  const auto out = canonicalize(chat(R"({"messages":[{"role":"user","content":"x"}],
      "response_format":{"type":"json_schema","json_schema":{"schema":{"type":"object"},"name":"r"}}})"),
                                {});
  EXPECT_EQ(json::to_json(*out.body.find("response_format")),
            R"({"type":"json_schema","json_schema":{"name":"r","schema":{"type":"object"}}})");
  EXPECT_EQ(rules_of(out), (std::vector<std::string>{"response-format"}));
}

TEST(PolicyTest, CanonicalizationRestoresTheSharedTokenPrefix) {
  auto tok = make_byte_tokenizer();
  const auto tokens_of = [&](const json::Value& body) {
    auto req = parse_request_value(body, Endpoint::kChatCompletions);
    EXPECT_TRUE(req);
    return tokenize_prompt(render_prompt(*req, ChatTemplate::kLlama3), *tok).tokens;
  };
  EXPECT_EQ(tokens_of(canonicalize(chat(kToolsA), {}).body),
            tokens_of(canonicalize(chat(kToolsB), {}).body));
}

// The gateway's path: one pass over a request it owns, rewrite rules applied to the body,
// observe rules only reported, with the same changes canonicalize() finds.
TEST(PolicyTest, InPlaceAppliesRewriteRulesAndOnlyReportsObservedOnes) {
  CanonicalizationPolicy rewrite = CanonicalizationPolicy::none();
  rewrite.tool_json = rewrite.tool_order = true;
  CanonicalizationPolicy observe = CanonicalizationPolicy::none();
  observe.timestamp = true;
  const std::string body = R"({"messages":[
      {"role":"system","content":"Now: 2026-08-20T14:33:07Z."},{"role":"user","content":"hi"}],)" +
                           std::string(kToolsA.substr(kToolsA.find("\"tools\"")));
  ParsedRequest req = chat(body);
  const std::vector<Change> changes = canonicalize_in_place(req, rewrite, observe);
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0].rule, "tool-json");
  EXPECT_TRUE(changes[0].applied);
  EXPECT_EQ(changes[1].rule, "tool-order");
  EXPECT_TRUE(changes[1].applied);
  EXPECT_EQ(changes[2].rule, "timestamp");
  EXPECT_EQ(changes[2].path, "messages[0].content");
  EXPECT_FALSE(changes[2].applied);
  // Tools rewritten exactly as canonicalize() rewrites them; the system prompt left as sent.
  EXPECT_EQ(json::to_json(*req.body.find("tools")),
            json::to_json(*canonicalize(chat(kToolsB), {}).body.find("tools")));
  EXPECT_EQ(req.body.find("messages")->as_array()[0].find("content")->as_string(),
            "Now: 2026-08-20T14:33:07Z.");
  // A rule in both policies is rewritten.
  ParsedRequest again = chat(body);
  const auto both =
      canonicalize_in_place(again, CanonicalizationPolicy{}, CanonicalizationPolicy{});
  ASSERT_EQ(both.size(), 3u);
  EXPECT_TRUE(both[2].applied);
  EXPECT_EQ(again.body.find("messages")->as_array()[0].find("content")->as_string(),
            "Now: 2026-08-20T14:00:00Z.");
}

// After an in-place pass the parsed fields equal what parsing the new body gives, so the
// gateway renders and hashes the canonical request without parsing it again.
TEST(PolicyTest, InPlaceKeepsParsedFieldsInStepWithTheBody) {
  CanonicalizationPolicy all;
  all.whitespace = true;
  ParsedRequest req = chat(R"({"messages":[
      {"role":"system","content":"Now: 2026-08-20T14:33:07Z.  \r\nBe brief."},
      {"role":"developer","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"u"}},
                                     {"type":"text","text":"At 2026-08-20 09:15:00 UTC.\t"}]},
      {"role":"user","content":"hi"}],
    "tools":[{"type":"function","function":{"name":"zeta","parameters":{"type":"object"}}},
             {"type":"custom","name":"alpha"},
             {"type":"function","function":{"name":"beta"}}],
    "functions":[{"name":"g2"},{"name":"g1"}]})");
  const auto changes = canonicalize_in_place(req, all, CanonicalizationPolicy::none());
  EXPECT_GE(changes.size(), 5u);
  auto fresh = parse_request_value(req.body, Endpoint::kChatCompletions);
  ASSERT_TRUE(fresh) << fresh.error().message;
  ASSERT_EQ(req.tools.size(), fresh->tools.size());
  for (std::size_t i = 0; i < req.tools.size(); ++i) {
    EXPECT_EQ(req.tools[i].name, fresh->tools[i].name) << i;
    EXPECT_EQ(req.tools[i].path, fresh->tools[i].path) << i;
  }
  EXPECT_EQ(req.tools[0].name, "alpha");
  ASSERT_EQ(req.messages.size(), fresh->messages.size());
  for (std::size_t m = 0; m < req.messages.size(); ++m) {
    ASSERT_EQ(req.messages[m].parts.size(), fresh->messages[m].parts.size());
    for (std::size_t p = 0; p < req.messages[m].parts.size(); ++p) {
      EXPECT_EQ(req.messages[m].parts[p].text, fresh->messages[m].parts[p].text) << m << "/" << p;
      EXPECT_EQ(req.messages[m].parts[p].value, fresh->messages[m].parts[p].value) << m << "/" << p;
    }
  }
  EXPECT_EQ(req.messages[0].text(), "Now: 2026-08-20T14:00:00Z.\nBe brief.");
}

// A system prompt the parser shares (the gateway's parse, whose earlier turns come back as the
// trees it built before) is looked up, not scanned again, by the observed timestamp rule: what
// it reports equals a fresh scan of an unshared parse, request after request, whatever changes
// (the prompt's timestamps, its parts, the granularity).
TEST(PolicyTest, ObservedTimestampsOfASharedPromptAreWhatAFreshScanFinds) {
  CanonicalizationPolicy observe = CanonicalizationPolicy::none();
  observe.timestamp = true;
  const std::vector<std::string> systems = {
      R"("Now: 2026-08-20T14:33:07Z.")",
      R"("No time here.")",
      R"("At 2026-08-20 09:15:00 UTC and 2026-08-20T10:00:01Z.")",
      R"([{"type":"text","text":"x"},{"type":"text","text":"At 2026-08-20 09:15:00 UTC."}])",
      R"([{"type":"text","text":"Now: 2026-08-20T14:33:07Z."},{"type":"text","text":"y"}])",
  };
  std::mt19937 rng(7);
  int shared_seen = 0;
  for (int step = 0; step < 200; ++step) {
    // The system prompt long enough for the parser's element memo (json_element_memo.h).
    std::string system = systems[rng() % systems.size()];
    const std::string filler(200, 'p');
    if (system.front() == '"') {
      system.insert(1, filler + " ");
    } else {
      system.insert(1, R"({"type":"text","text":")" + filler + R"("},)");
    }
    const std::string body = R"({"messages":[{"role":"system","content":)" + system +
                             R"(},{"role":"user","content":"hi )" + std::to_string(step) +
                             R"("}]})";
    observe.timestamp_granularity = std::chrono::seconds(rng() % 2 == 0 ? 3600 : 60);
    std::vector<json::SourceMember> source;
    auto shared = parse_request(body, Endpoint::kChatCompletions, RequestLimits{}, source);
    ASSERT_TRUE(shared) << shared.error().message;
    ParsedRequest fresh = chat(body);
    shared_seen += std::as_const(shared->body).find("messages")->as_array()[0].is_shared() ? 1 : 0;
    const auto seen =
        canonicalize_in_place(*shared, CanonicalizationPolicy::none(), observe, source);
    const auto expected = canonicalize_in_place(fresh, CanonicalizationPolicy::none(), observe);
    ASSERT_EQ(seen.size(), expected.size()) << body;
    for (std::size_t i = 0; i < seen.size(); ++i) {
      EXPECT_EQ(seen[i].rule, expected[i].rule) << body;
      EXPECT_EQ(seen[i].path, expected[i].path) << body;
      EXPECT_EQ(seen[i].detail, expected[i].detail) << body;
      EXPECT_EQ(seen[i].applied, expected[i].applied) << body;
    }
  }
  // The parser shared the system prompt with an earlier request: the lookup was made.
  EXPECT_GT(shared_seen, 100);
}

}  // namespace
}  // namespace prefixgate::canon
