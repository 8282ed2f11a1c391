// visit_member_fields(): one member's fields (and those of the objects directly inside it) read
// from a text without building its tree, as the gateway reads every answer's usage.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::json {
namespace {

// A field as a line: "object.key type number" (owning the views the visitor saw).
// `from_end`: read by visit_last_member_fields().
std::vector<std::string> visited(std::string_view text, std::string_view key, bool* ok,
                                 const ParseLimits& limits = {}, bool from_end = false) {
  std::vector<std::string> out;
  const auto line = [&](const FieldSeen& f) {
    out.push_back(std::string(f.object) + "." + std::string(f.key) + " " + type_name(f.type) + " " +
                  std::to_string(f.number));
  };
  *ok = from_end ? visit_last_member_fields(text, key, line, limits)
                 : visit_member_fields(text, key, line, limits);
  return out;
}

// The same lines from parse()'s tree of the member.
std::vector<std::string> walked(const Value& member) {
  std::vector<std::string> out;
  const auto line = [&](std::string_view object, const Member& m) {
    const double number = m.value.is_number() ? m.value.as_number().value : 0;
    out.push_back(std::string(object) + "." + m.key + " " + type_name(m.value.type()) + " " +
                  std::to_string(number));
  };
  for (const Member& m : member.as_object()) {
    line({}, m);
    if (!m.value.is_object()) continue;
    for (const Member& inner : m.value.as_object()) line(m.key, inner);
  }
  return out;
}

TEST(JsonVisitMember, ReadsOnlyTheMemberAsked) {
  const std::string answer =
      R"({"id":"x","choices":[{"message":{"content":"a } \"usage\": {\"b\":1}"}}],)"
      R"( "usage" : {"prompt_tokens":12,"prompt_tokens_details":{"cached_tokens":8,)"
      R"("deep":{"x":1}},"list":[1,{"y":2}],"note":"caf\u00e9"}, "z":[1,2]})";
  bool ok = false;
  EXPECT_EQ(visited(answer, "usage", &ok),
            (std::vector<std::string>{".prompt_tokens number 12.000000",
                                      ".prompt_tokens_details object 0.000000",
                                      "prompt_tokens_details.cached_tokens number 8.000000",
                                      "prompt_tokens_details.deep object 0.000000",
                                      ".list array 0.000000", ".note string 0.000000"}));
  EXPECT_TRUE(ok);
  EXPECT_TRUE(visited(R"({"usage":{}})", "usage", &ok).empty());
  EXPECT_TRUE(ok);
}

TEST(JsonVisitMember, RefusesWhatIsNotAnObjectsObjectMember) {
  bool ok = true;
  for (const char* text :
       {R"({"id":"x"})", "[1]", R"({"usage":[1]})", R"({"usage":7})", R"({"usage": {"a":)",
        "not json", R"({"usage":{"a":01}})", R"({"usage":{"a":1e400}})",
        R"({"usage":{"a":{"b":-}}})", R"({"usage":{"a":tru}})", R"({"usage":{"a":nul}})",
        R"({"usage":{"a":{"b":"\x"}}})"}) {
    visited(text, "usage", &ok);
    EXPECT_FALSE(ok) << text;
  }
  visited(R"({"usage":{"a":1}})", "usage", &ok, ParseLimits{.max_bytes = 4});
  EXPECT_FALSE(ok);
}

TEST(JsonVisitMember, ReadsAnAnswerPastTheThreadsParserSize) {
  // Past the size the thread's parser is kept for (1 MiB), read with a parser of its own.
  const std::string answer =
      R"({"text":")" + std::string(3 << 20, 'x') + R"(","usage":{"prompt_tokens":7}})";
  bool ok = false;
  EXPECT_EQ(visited(answer, "usage", &ok),
            std::vector<std::string>{".prompt_tokens number 7.000000"});
  EXPECT_TRUE(ok);
}

// Random members of every kind, escapes and whitespace: the fields visited are what a walk of
// parse()'s tree of the member gives, in the same order, numbers with the same values.
std::string random_value(std::mt19937_64& rng, int depth) {
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  static const char* kKeys[] = {"prompt_tokens", "cached_tokens",        "a",   "k\\u00e9y",
                                "\\\"q\\\"",     "input_tokens_details", "x y", "n"};
  static const char* kScalars[] = {"0", "-0", "12", "3177", "1.5e3", "-2.25", "1E-400",
                                   "123456789012345678901234", "true", "false", "null", "\"s\"",
                                   "\"\\ud83d\\ude00 }\"", "\"usage\"",
                                   // A quote escaped, and a backslash escaped just before a
                                   // string's closing quote, with brackets among them.
                                   "\"q\\\"}]\"", "\"a\\\\\"", "\"[\\\\\\\"{\""};
  const int kind = depth >= 3 ? 2 : pick(3);
  std::string ws = pick(3) == 0 ? " \n" : "";
  if (kind == 2) return ws + kScalars[pick(std::size(kScalars))] + ws;
  const bool object = kind == 0;
  std::string out = object ? "{" : "[";
  const int n = pick(4);
  for (int i = 0; i < n; ++i) {
    if (i > 0) out += ',';
    // Keys indexed by position keep them distinct (parse() refuses a repeated key).
    if (object)
      out += ws + "\"" + kKeys[pick(std::size(kKeys))] + std::to_string(i) + "\"" + ws + ":";
    out += random_value(rng, depth + 1);
  }
  return out + (object ? "}" : "]");
}

// `answer`'s usage read (from the end when `from_end`) against a walk of parse()'s tree of it: the
// same fields where it is an object (counted in `compared`), refused where it is not.
void expect_reads_as_parsed(const std::string& answer, bool from_end, int& compared) {
  auto doc = parse(answer);
  ASSERT_TRUE(doc.ok()) << answer << ": " << doc.error().message;
  const Value& usage = *doc->find("usage");
  bool ok = false;
  const std::vector<std::string> lines = visited(answer, "usage", &ok, {}, from_end);
  if (!usage.is_object()) {
    EXPECT_FALSE(ok) << answer;
    return;
  }
  EXPECT_TRUE(ok) << answer;
  EXPECT_EQ(lines, walked(usage)) << answer;
  ++compared;
}

TEST(JsonVisitMember, SeesWhatAWalkOfParsesTreeSees) {
  std::mt19937_64 rng(20261203);
  int compared = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string member = random_value(rng, 1);
    if (member.find('{') == std::string::npos) member = "{\"only\":" + member + "}";
    const std::string before = random_value(rng, 1);
    const std::string answer = "{\"id\":" + before + ", \"usage\" :" + member + ",\"z\":1}";
    ASSERT_NO_FATAL_FAILURE(expect_reads_as_parsed(answer, false, compared));
  }
  EXPECT_GT(compared, 1000);
}

// From the end: a member that is last, one that is not, one whose key is written with an escape,
// keys of the same name inside strings and inside other members: the fields are those read from
// the start.
TEST(JsonVisitMember, FromTheEndReadsWhatFromTheStartReads) {
  const char* texts[] = {
      R"({"id":"x","usage":{"p":1,"d":{"c":2}}})",
      R"({"id":"x","usage":{"p":1} ,"z":[1]} )",
      R"({"usage":{"p":1},"x":{"usage":{"q":2}}})",
      R"({"usage":{"usage":{"p":1}}})",
      R"({"us\u0061ge":{"p":1}})",
      R"({"usage":{"p\u0031":1,"d":{"c\u0032":2}}})",
      R"({"a":"\"usage\":{\"p\":1}}"})",
      R"({"a":"x\\","usage":{"p":3}})",
      R"({"\"usage":{"p":1}})",
      R"({"a":["usage",{"usage":{"p":4}}]})",
      R"({"usage":7})",
      R"({"usage":{"p":1},"usage2":{"q":1}})",
      "  {\"usage\" :\n {\"p\":5}\n}\n",
  };
  for (const char* text : texts) {
    bool ok_start = false, ok_end = false;
    const auto from_start = visited(text, "usage", &ok_start);
    const auto from_end = visited(text, "usage", &ok_end, {}, true);
    EXPECT_EQ(ok_end, ok_start) << text;
    EXPECT_EQ(from_end, from_start) << text;
  }
}

// Found from the end, the members before are not read: a malformed one is not seen (read from
// the start, it is). An answer whose usage is malformed is refused either way.
TEST(JsonVisitMember, FromTheEndPassesOverTheMembersBefore) {
  bool ok = false;
  EXPECT_EQ(visited(R"({"id":[1,"usage":{"p":1}})", "usage", &ok, {}, true),
            std::vector<std::string>{".p number 1.000000"});
  EXPECT_TRUE(ok);
  visited(R"({"id":[1,"usage":{"p":1}})", "usage", &ok);
  EXPECT_FALSE(ok);
  visited(R"({"id":1,"usage":{"p":01}})", "usage", &ok, {}, true);
  EXPECT_FALSE(ok);
  visited(R"({"usage":{"a":1}})", "usage", &ok, ParseLimits{.max_bytes = 4}, true);
  EXPECT_FALSE(ok);
}

TEST(JsonVisitMember, FromTheEndSeesWhatAWalkOfParsesTreeSees) {
  std::mt19937_64 rng(20261207);
  int compared = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string member = random_value(rng, 1);
    if (member.find('{') == std::string::npos) member = "{\"only\":" + member + "}";
    const std::string before = random_value(rng, 1);
    // Last, before another member, or before one holding a member of the same name.
    std::string after;
    switch (rng() % 3) {
      case 0: break;
      case 1: after = ",\"z\":" + random_value(rng, 2); break;
      default: after = ",\"x\":{\"usage\":{\"inner\":" + random_value(rng, 2) + "}}"; break;
    }
    const std::string answer = "{\"id\":" + before + ", \"usage\" :" + member + after + "}";
    ASSERT_NO_FATAL_FAILURE(expect_reads_as_parsed(answer, true, compared));
  }
  EXPECT_GT(compared, 1000);
}

}  // namespace
}  // namespace prefixgate::json
