// parse() recording where each root member's value lies, and append_json_reusing() writing
// unchanged members as those bytes: what lets the gateway forward a body it only partly rewrote.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::json {
namespace {

std::vector<SourceMember> source_of(std::string_view text, Value* parsed = nullptr) {
  std::vector<MemberSpan> spans;
  auto doc = parse(text, ParseLimits{}, spans);
  EXPECT_TRUE(doc.ok()) << text;
  std::vector<SourceMember> out;
  if (!doc.ok() || !doc->is_object()) return out;
  EXPECT_EQ(spans.size(), doc->as_object().size()) << text;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    out.push_back(
        {doc->as_object()[i].key, text.substr(spans[i].begin, spans[i].end - spans[i].begin)});
  }
  if (parsed != nullptr) *parsed = std::move(*doc);
  return out;
}

TEST(JsonSource, SpansAreEachValuesExactText) {
  const std::string text =
      " { \"a\" : 1 , \"b\":\"x}, \\\"y\\\" {\" ,\"c\" :[ 1, {\"d\":[]} ]\n,\"e\":{ \"f\" : null }"
      ",\"g\":true,\"h\":-0.5e3 } ";
  const auto source = source_of(text);
  ASSERT_EQ(source.size(), 6u);
  EXPECT_EQ(source[0].text, "1");
  EXPECT_EQ(source[1].text, R"("x}, \"y\" {")");
  EXPECT_EQ(source[2].text, R"([ 1, {"d":[]} ])");
  EXPECT_EQ(source[3].text, R"({ "f" : null })");
  EXPECT_EQ(source[4].text, "true");
  EXPECT_EQ(source[5].text, "-0.5e3");  // the last member, before the closing brace
  EXPECT_EQ(source[5].key, "h");
}

TEST(JsonSource, NothingForOtherRoots) {
  std::vector<MemberSpan> spans{{1, 2}};
  ASSERT_TRUE(parse("[1,2]", ParseLimits{}, spans).ok());
  EXPECT_TRUE(spans.empty());
  ASSERT_TRUE(parse("{}", ParseLimits{}, spans).ok());
  EXPECT_TRUE(spans.empty());
  spans.push_back({0, 1});
  EXPECT_FALSE(parse(R"({"a":1,"a":2})", ParseLimits{}, spans).ok());
  EXPECT_TRUE(spans.empty());
}

TEST(JsonSource, ReusedMembersKeepTheClientsBytes) {
  const std::string text =
      R"({"messages" : [ {"role":"user","content":"hi"} ], "tools": [{"b":1,"a":2}]})";
  Value body;
  const auto source = source_of(text, &body);
  canonicalize_in_place(*body.find("tools"));
  body.set("stream_options", Object{{"include_usage", true}});
  std::string out;
  append_json_reusing(body, source, {"tools"}, out);
  EXPECT_EQ(out, R"({"messages":[ {"role":"user","content":"hi"} ],"tools":[{"a":2,"b":1}],)"
                 R"("stream_options":{"include_usage":true}})");
  // Without the rewritten name the stale bytes would be sent: the caller must name it.
  std::string stale;
  append_json_reusing(body, source, {}, stale);
  EXPECT_NE(stale, to_json(body));
}

// Random documents: every member reused, or a random subset rewritten, gives a body that parses
// to the same value as writing it all again.
TEST(JsonSource, RandomDocumentsRoundTrip) {
  std::mt19937 rng(11);
  const std::vector<std::string> values = {
      "1",    "-2.50", "1e3",          "\"s\"", "\"a\\u00e9\\n}\"",        "true",
      "null", "[]",    "[1, [2, {}]]", "{ }",   "{\"k\" : [ \"v\" , 3 ]}", "\"\\\"{\""};
  const std::vector<std::string> spaces = {"", " ", "\n  ", "\t"};
  for (int i = 0; i < 400; ++i) {
    std::string text = spaces[rng() % 4] + "{";
    const int n = 1 + static_cast<int>(rng() % 6);
    for (int m = 0; m < n; ++m) {
      if (m > 0) text += spaces[rng() % 4] + "," + spaces[rng() % 4];
      text += "\"k" + std::to_string(m) + "\"" + spaces[rng() % 4] + ":" + spaces[rng() % 4];
      text += values[rng() % values.size()];
    }
    text += spaces[rng() % 4] + "}" + spaces[rng() % 4];
    Value body;
    const auto source = source_of(text, &body);
    ASSERT_EQ(source.size(), static_cast<std::size_t>(n)) << text;
    std::vector<std::string> names;
    for (int m = 0; m < n; ++m) {
      if (rng() % 3 == 0) {
        body.set("k" + std::to_string(m), Value(std::string("rewritten")));
        names.push_back("k" + std::to_string(m));
      }
    }
    const std::vector<std::string_view> rewritten(names.begin(), names.end());
    std::string out;
    append_json_reusing(body, source, rewritten, out);
    auto reparsed = parse(out);
    ASSERT_TRUE(reparsed.ok()) << text << " -> " << out;
    EXPECT_EQ(to_json(*reparsed), to_json(body)) << text << " -> " << out;
  }
}

}  // namespace
}  // namespace prefixgate::json
