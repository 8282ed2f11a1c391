// find_volatile as a whole: rule and severity names, the negative list (what must never be
// reported), realistic system prompts, and properties over random mixes of fragments.
#include "prefixgate/canonicalize/volatile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/volatile_spans.h"

namespace prefixgate::canon {
namespace {

using test_support::describe;

// (kind, covered text) pairs, in order.
std::vector<std::pair<std::string, std::string>> found(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const VolatileSpan& s : find_volatile(text)) {
    out.emplace_back(s.kind, std::string(text.substr(s.begin, s.end - s.begin)));
  }
  return out;
}

TEST(VolatileTest, NamesRulesAndSeverities) {
  EXPECT_STREQ(rule_id(Rule::kTimestamp), "volatile-timestamp");
  EXPECT_STREQ(rule_id(Rule::kDate), "volatile-date");
  EXPECT_STREQ(rule_id(Rule::kId), "volatile-id");
  EXPECT_STREQ(severity_name(Severity::kInfo), "info");
  EXPECT_STREQ(severity_name(Severity::kWarning), "warning");
  EXPECT_STREQ(severity_name(Severity::kError), "error");
}

TEST(VolatileTest, ReportsNothingInOrdinaryTextAndNumbers) {
  for (std::string_view text : {
           "",
           "You are a helpful assistant. Answer in 3 steps; use 1 of 2 ways.",
           "Use v2.0.1 or 1.2.3 with Python 3.11 and GPT-4o, gpt-4-0613 or gpt-4o-mini.",
           "Returns 404 or HTTP 503; retry after 429.",
           "Costs $19.99, \xE2\x82\xAC"
           "1,299.00 or \xC2\xA3"
           "5; $1787236387 is a lot.",
           "Call +1 (555) 123-4567, 555-123-4567, +44 20 7946 0958 or +12125551234.",
           "Founded in 1999; now 2026. Years 2025-2026.",
           "We have 1234567 users, 42 items, 3.14159, 1e10, 100000 and 9999999999.",
           "Aspect ratios 16:9 and 4:3; odds 3:1.",
           "Servers 192.168.1.100, 10.0.0.1 and 255.255.255.0.",
           "Requires ^1.2.3 or >=2.0.0 <3.0.0 or ~1.4.",
           "Files of 1.5 GB, 512MB and 4KiB.",
           "Fixed in a1b2c3d (git short hash).",
           "See https://example.com/docs/api/v2/users?page=2&sort=name for details.",
           "POST https://api.openai.com/v1/chat/completions",
           "internationalization ThisIsCamelCaseIdentifierName",
           "INT_MAX is 2147483647; try 1234567890 as a sample number.",
           "https://github.com/nodejs/node/commit/1710016053",
       }) {
    const std::vector<VolatileSpan> spans = find_volatile(text);
    EXPECT_TRUE(spans.empty()) << "text: " << text << "\n" << describe(text, spans);
  }
}

TEST(VolatileTest, FindsEverythingVolatileInARealisticSystemPrompt) {
  const std::string prompt =
      "You are Acme Support, a helpful assistant (model gpt-4o-2024-08-06, v2.3.1).\n"
      "Current date: Thursday, August 20, 2026. Current time: 14:33 UTC.\n"
      "Session 550e8400-e29b-41d4-a716-446655440000 started at 2026-08-20T14:31:02.517Z.\n"
      "Request id: req_011CRu4wWYpDhUQsN3Eqh9hC; trace "
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01.\n"
      "Prices start at $19.99. Support hours are listed on the website. Call 555-123-4567.\n"
      "Cache key: 3f2a9b7c1d4e5f60718293a4b5c6d7e8\n";
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"date", "Thursday, August 20, 2026"},
      {"time-of-day", "14:33 UTC"},
      {"uuid", "550e8400-e29b-41d4-a716-446655440000"},
      {"rfc3339", "2026-08-20T14:31:02.517Z"},
      {"provider-id", "req_011CRu4wWYpDhUQsN3Eqh9hC"},
      {"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
      {"hex-nonce", "3f2a9b7c1d4e5f60718293a4b5c6d7e8"},
  };
  EXPECT_EQ(found(prompt), expected);
}

TEST(VolatileTest, FindsTimestampsInAJsonEncodedPromptAndALogExcerpt) {
  const std::string body =
      R"({"role":"system","content":"Today is 2026-08-20.\nNow: 2:33 PM\nLast login )"
      R"(Thu, 20 Aug 2026 14:33:07 GMT from 10.0.0.1"})";
  const std::vector<std::pair<std::string, std::string>> expected_body = {
      {"date", "2026-08-20"},
      {"time-of-day", "2:33 PM"},
      {"http-date", "Thu, 20 Aug 2026 14:33:07 GMT"},
  };
  EXPECT_EQ(found(body), expected_body);

  const std::string log =
      "Here are the logs:\n"
      "[2026-08-20 14:33:07,123] INFO served in 12ms\n"
      "Aug 20 14:33:08 web-1 sshd[4242]: Accepted publickey\n"
      "1787236389 worker done\n";
  const std::vector<std::pair<std::string, std::string>> expected_log = {
      {"iso8601", "2026-08-20 14:33:07,123"},
      {"time-of-day", "14:33:08"},
      {"epoch-seconds", "1787236389"},
  };
  EXPECT_EQ(found(log), expected_log);
}

TEST(VolatileTest, LongestOverlappingMatchWins) {
  // The date, the time and the whole RFC 2822 timestamp all match; only the longest is kept.
  EXPECT_EQ(found("Date: Thu, 20 Aug 2026 14:33:07 +0000\n"),
            (std::vector<std::pair<std::string, std::string>>{
                {"rfc2822", "Thu, 20 Aug 2026 14:33:07 +0000"}}));
  // A JWT's segments are base64 nonces on their own; the JWT covers them.
  const std::string jwt =
      "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_"
      "XgL0n3I9PlFUP0THsR8U";
  EXPECT_EQ(found(jwt), (std::vector<std::pair<std::string, std::string>>{{"jwt", jwt}}));
}

// Fragments with the one span each must produce, whatever surrounds them.
struct Fragment {
  std::string_view text;
  std::string_view span;  // empty: nothing may be found
  std::string_view kind;
};

constexpr Fragment kFragments[] = {
    {"at 2026-08-20T14:33:07Z", "2026-08-20T14:33:07Z", "rfc3339"},
    {"Thu, 20 Aug 2026 14:33:07 +0000", "Thu, 20 Aug 2026 14:33:07 +0000", "rfc2822"},
    {"Thursday, August 20, 2026 at 2:33 PM", "Thursday, August 20, 2026 at 2:33 PM", "long-date"},
    {"20/08/2026 14:33", "20/08/2026 14:33", "numeric-datetime"},
    {"it is 2:33 PM", "2:33 PM", "time-of-day"},
    {"ts 1787236387", "1787236387", "epoch-seconds"},
    {"on 20 August 2026", "20 August 2026", "date"},
    {"id 550e8400-e29b-41d4-a716-446655440000", "550e8400-e29b-41d4-a716-446655440000", "uuid"},
    {"msg_01XFDUDYJgAACzvnptvVoYEL", "msg_01XFDUDYJgAACzvnptvVoYEL", "provider-id"},
    {"key Zx8pQ2mN7vK4rT9wLs3B", "Zx8pQ2mN7vK4rT9wLs3B", "base64-nonce"},
    {"sha 9fceb02d0ae598e95dc970b74767f19372d61af8", "9fceb02d0ae598e95dc970b74767f19372d61af8",
     "hex-nonce"},
    {"Python 3.11 and v2.0.1", "", ""},
    {"ratio 16:9", "", ""},
    {"call +1 (555) 123-4567", "", ""},
    {"price $19.99", "", ""},
    {"HTTP 503", "", ""},
    {"in 1999", "", ""},
    {"ThisIsCamelCaseIdentifierName", "", ""},
};

TEST(VolatileTest, FragmentsAreFoundAloneWhateverSurroundsThem) {
  constexpr std::string_view kSeparators[] = {" | ", "\n", " ; ", "\t", ". ", " (", ") "};
  std::mt19937 rng(20260820);
  for (int round = 0; round < 300; ++round) {
    std::string text;
    std::vector<std::pair<std::string, std::string>> expected;
    const int count = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < count; ++k) {
      const Fragment& f = kFragments[rng() % std::size(kFragments)];
      text += kSeparators[rng() % std::size(kSeparators)];
      text += f.text;
      if (!f.span.empty()) expected.emplace_back(f.kind, f.span);
    }
    text += kSeparators[rng() % std::size(kSeparators)];
    ASSERT_EQ(found(text), expected) << "text: " << text;
  }
}

TEST(VolatileTest, SpansAreSortedDisjointAndInBoundsForEveryPrefix) {
  // Every prefix cuts some format mid-way; detectors must never read past the end.
  const std::string text =
      "Thu, 20 Aug 2026 14:33:07 +0000 | 2026-08-20T14:33:07.123+02:00 | 20260820T143307Z | "
      "Thursday, 20-Aug-26 14:33:07 GMT | Thu Aug  6 14:33:07 2026 | 08/20/2026 2:33 p.m. | "
      "1787236387123 | eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0. | "
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 | dGhpcyBpcyBhIHNlY3JldA== | "
      "Thu Aug 20 2026 14:33:07 GMT+0200 (Central European Summer Time) | at 9 a.m";
  for (std::size_t len = 0; len <= text.size(); ++len) {
    const std::string_view prefix(text.data(), len);
    const std::vector<VolatileSpan> spans = find_volatile(prefix);
    for (std::size_t k = 0; k < spans.size(); ++k) {
      ASSERT_LT(spans[k].begin, spans[k].end) << "prefix length " << len;
      ASSERT_LE(spans[k].end, len) << "prefix length " << len;
      if (k > 0) {
        ASSERT_LE(spans[k - 1].end, spans[k].begin) << "prefix length " << len;
      }
    }
  }
}

TEST(VolatileTest, SurvivesArbitraryBytes) {
  std::mt19937 rng(7);
  const std::string alphabet = "0123456789:-/.,+ TZaAmMpPeyJ_x\xE2\x80\xAF\xC2\xA0\\n";
  for (int round = 0; round < 2000; ++round) {
    std::string text(static_cast<std::size_t>(rng() % 64), ' ');
    for (char& c : text) c = alphabet[rng() % alphabet.size()];
    const std::vector<VolatileSpan> spans = find_volatile(text);
    for (std::size_t k = 0; k < spans.size(); ++k) {
      ASSERT_LE(spans[k].end, text.size());
      if (k > 0) {
        ASSERT_LE(spans[k - 1].end, spans[k].begin);
      }
    }
  }
}

}  // namespace
}  // namespace prefixgate::canon

namespace prefixgate::canon {
namespace {

// Long texts are memoized per thread by content hash: a repeated text must give exactly the
// spans of a fresh scan, a one-byte change must be seen, and texts evicted and scanned again
// must come back right.
TEST(VolatileTest, RepeatedLongTextsGiveTheSpansOfAFreshScan) {
  std::string filler;
  while (filler.size() < 600) filler += "Answer politely and cite the policy section you used. ";
  const auto two = [](int v) { return (v < 10 ? "0" : "") + std::to_string(v); };
  const auto text_at = [&](int i) {  // i < 3600: a distinct time each
    return filler + "Current time: 2026-08-20 14:" + two(i % 60) + ":" + two(i / 60) + " UTC. " +
           filler;
  };
  const std::string a = text_at(33);
  ASSERT_FALSE(find_volatile(a).empty());
  const std::string first = describe(a, find_volatile(a));
  EXPECT_EQ(describe(a, find_volatile(a)), first);
  // Same length, one digit different: a different, still correct, answer.
  const std::string b = text_at(0);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_NE(describe(b, find_volatile(b)), first);
  // Far more distinct texts than the memo holds: every answer equals the first one for it.
  constexpr int kTexts = 300;
  std::vector<std::string> expected;
  for (int i = 0; i < kTexts; ++i)
    expected.push_back(describe(text_at(i), find_volatile(text_at(i))));
  for (int round = 0; round < 2; ++round) {
    for (int i = kTexts - 1; i >= 0; --i) {
      const std::string t = text_at(i);
      EXPECT_EQ(describe(t, find_volatile(t)), expected[static_cast<std::size_t>(i)]) << i;
    }
  }
  EXPECT_EQ(describe(a, find_volatile(a)), first);
}

}  // namespace
}  // namespace prefixgate::canon
