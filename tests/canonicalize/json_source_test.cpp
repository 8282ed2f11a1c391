// parse() recording where each root member's value lies, and append_json_reusing() writing
// unchanged members as those bytes: what lets the gateway forward a body it only partly rewrote.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/json_splice.h"

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
      "1", "-2.50", "1e3", "\"s\"", "\"a\\u00e9\\n}\"", "true", "null", "[]", "[1, [2, {}]]", "{ }",
      "{\"k\" : [ \"v\" , 3 ]}", "\"\\\"{\"",
      // Long enough to be spliced rather than copied (json_splice.h).
      "[\"" + std::string(SplicedJson::kMinSpliceBytes, 'z') + "\"]"};
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
    // Spliced, the long values left in the text: the same bytes.
    SplicedJson spliced;
    append_json_spliced(body, source, rewritten, text, spliced);
    EXPECT_EQ(spliced.flattened(), out) << text;
    EXPECT_EQ(spliced.size(), out.size());
  }
}

// A member of `size` bytes: a string of that length with its quotes.
std::string member_text(std::size_t size, char fill) {
  return "\"" + std::string(size - 2, fill) + "\"";
}

TEST(JsonSplice, LargeUnchangedMembersAreLeftInTheClientsBodyAndTheRestWritten) {
  const std::size_t big = SplicedJson::kMinSpliceBytes;
  const std::string text = R"({"model":"m","messages":)" + member_text(big, 'a') +
                           R"(,"tools":[{"b":1,"a":2}],"small":)" + member_text(big - 1, 'b') +
                           R"(,"last":)" + member_text(3 * big, 'c') + "}";
  Value body;
  const auto source = source_of(text, &body);
  canonicalize_in_place(*body.find("tools"));
  SplicedJson out;
  append_json_spliced(body, source, {"tools"}, text, out);
  std::string reused;
  append_json_reusing(body, source, {"tools"}, reused);
  EXPECT_EQ(out.flattened(), reused);
  // The two members of at least kMinSpliceBytes, as the client's own bytes (not copies).
  ASSERT_EQ(out.splice_count, 2u);
  EXPECT_EQ(out.splices[0].source.data(), source[1].text.data());
  EXPECT_EQ(out.splices[0].source.size(), big);
  EXPECT_EQ(out.splices[1].source.data(), source[4].text.data());
  // The written text holds the rest: the rewritten tools, and the member one byte too short.
  EXPECT_NE(out.text.find(R"("tools":[{"a":2,"b":1}])"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find(member_text(big - 1, 'b')), std::string::npos);
  EXPECT_EQ(out.text.find('a' + std::string(100, 'a')), std::string::npos);
  std::vector<std::string_view> pieces;
  out.for_each_piece([&](std::string_view p) { pieces.push_back(p); });
  EXPECT_EQ(pieces.size(), 5u);  // text, messages, text, last, text ("}")
  for (std::string_view p : pieces) EXPECT_FALSE(p.empty());
}

TEST(JsonSplice, TextsOutsideTheStableBytesAndSplicesPastTheLimitAreCopied) {
  const std::size_t big = SplicedJson::kMinSpliceBytes;
  std::string text = "{";
  for (std::size_t i = 0; i < SplicedJson::kMaxSplices + 2; ++i) {
    if (i > 0) text += ',';
    text += "\"m" + std::to_string(i) + "\":" + member_text(big, static_cast<char>('a' + i));
  }
  text += "}";
  Value body;
  auto source = source_of(text, &body);
  // One member's text elsewhere (a tool list kept by a memo): not the client's bytes.
  const std::string elsewhere(source[0].text);
  source[0].text = elsewhere;
  SplicedJson out;
  append_json_spliced(body, source, {}, text, out);
  EXPECT_EQ(out.splice_count, SplicedJson::kMaxSplices);
  EXPECT_EQ(out.splices[0].source.data(), source[1].text.data());
  EXPECT_EQ(out.text.find(elsewhere), 1 + std::string_view(R"("m0":)").size());
  EXPECT_EQ(out.flattened(), text);
  // Nothing stable: all written.
  SplicedJson copied;
  append_json_spliced(body, source, {}, {}, copied);
  EXPECT_EQ(copied.splice_count, 0u);
  EXPECT_EQ(copied.text, text);
}

TEST(JsonSplice, BorrowingAndOwningAWholeBody) {
  const std::string text = R"({"a":1})";
  const SplicedJson borrowed = SplicedJson::borrowing(text);
  EXPECT_EQ(borrowed.splices[0].source.data(), text.data());
  EXPECT_EQ(borrowed.flattened(), text);
  EXPECT_EQ(borrowed.size(), text.size());
  const SplicedJson owned(text);
  EXPECT_EQ(owned.splice_count, 0u);
  EXPECT_EQ(owned.flattened(), text);
  EXPECT_EQ(SplicedJson().flattened(), "");
  std::size_t calls = 0;
  SplicedJson().for_each_piece([&](std::string_view) { ++calls; });
  EXPECT_EQ(calls, 0u);
}

}  // namespace
}  // namespace prefixgate::json
