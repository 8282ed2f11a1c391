#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::json {
namespace {

// Parses `text` and checks that it fails with `code`; returns the error for further checks.
Error ExpectParseError(std::string_view text, ErrorCode code, const ParseLimits& limits = {}) {
  Result<Value> result = parse(text, limits);
  if (result.ok()) {
    ADD_FAILURE() << "parsed, expected " << error_code_name(code) << ": "
                  << testing::PrintToString(std::string(text));
    return Error{code, {}, {}};
  }
  EXPECT_EQ(error_code_name(result.error().code), std::string(error_code_name(code)))
      << "input: " << testing::PrintToString(std::string(text))
      << "\nmessage: " << result.error().message;
  EXPECT_FALSE(result.error().message.empty());
  return result.error();
}

Value ParseOk(std::string_view text, const ParseLimits& limits = {}) {
  Result<Value> result = parse(text, limits);
  if (!result.ok()) {
    ADD_FAILURE() << "failed to parse " << testing::PrintToString(std::string(text)) << ": "
                  << result.error().message;
    return Value();
  }
  return std::move(result).value();
}

std::string Nested(std::size_t depth, std::string_view open, std::string_view close,
                   std::string_view inner = "") {
  std::string out;
  out.reserve(depth * (open.size() + close.size()) + inner.size());
  for (std::size_t i = 0; i < depth; ++i) out += open;
  out += inner;
  for (std::size_t i = 0; i < depth; ++i) out += close;
  return out;
}

TEST(JsonParseTest, BuildsTreeOfEveryType) {
  Value v = ParseOk(R"({"n":null,"t":true,"f":false,"i":-12,"s":"x","a":[1,[]],"o":{}})");
  ASSERT_TRUE(v.is_object());
  EXPECT_TRUE(v.find("n")->is_null());
  EXPECT_TRUE(v.find("t")->as_bool());
  EXPECT_FALSE(v.find("f")->as_bool());
  EXPECT_EQ(v.find("i")->as_number().value, -12.0);
  EXPECT_EQ(v.find("s")->as_string(), "x");
  ASSERT_TRUE(v.find("a")->is_array());
  EXPECT_EQ(v.find("a")->as_array().size(), 2u);
  EXPECT_TRUE(v.find("a")->as_array()[1].as_array().empty());
  EXPECT_TRUE(v.find("o")->as_object().empty());
}

TEST(JsonParseTest, ScalarRootsWithSurroundingWhitespace) {
  EXPECT_EQ(ParseOk(" \t\r\n42 \n").as_number().value, 42.0);
  EXPECT_EQ(ParseOk("\"x\"  ").as_string(), "x");
  EXPECT_TRUE(ParseOk(" true ").as_bool());
  EXPECT_TRUE(ParseOk("null\n").is_null());
  EXPECT_TRUE(ParseOk("  [ ]  ").as_array().empty());
}

TEST(JsonParseTest, PreservesMemberOrder) {
  Value v = ParseOk(R"({"b":1,"a":2,"c":{"z":1,"y":2}})");
  const Object& members = v.as_object();
  ASSERT_EQ(members.size(), 3u);
  EXPECT_EQ(members[0].key, "b");
  EXPECT_EQ(members[1].key, "a");
  EXPECT_EQ(members[2].key, "c");
  EXPECT_EQ(to_json(v), R"({"b":1,"a":2,"c":{"z":1,"y":2}})");
}

TEST(JsonParseTest, NumbersKeepSourceTextAndValue) {
  Value v = ParseOk("[1.0, 1e2 ,-0,0.5E-3 , 123456789012345678901234]");
  const Array& a = v.as_array();
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a[0].as_number().source, "1.0");
  EXPECT_EQ(a[1].as_number().source, "1e2");
  EXPECT_EQ(a[1].as_number().value, 100.0);
  EXPECT_EQ(a[2].as_number().source, "-0");
  EXPECT_TRUE(std::signbit(a[2].as_number().value));
  EXPECT_EQ(a[3].as_number().value, 0.0005);
  EXPECT_EQ(to_json(v), "[1.0,1e2,-0,0.5E-3,123456789012345678901234]");
}

TEST(JsonParseTest, IntegersBeyondUint64ParseToNearestDouble) {
  EXPECT_EQ(ParseOk("18446744073709551616").as_number().value, 18446744073709551616.0);
  // Correctly rounded (checked with Python's float() and node's Number()).
  EXPECT_EQ(ParseOk("123456789012345678901234").as_number().value, 123456789012345685803008.0);
  const std::string huge = "-" + std::string(300, '9');
  Value v = ParseOk(huge);
  EXPECT_EQ(v.as_number().value, -1e300);
  EXPECT_EQ(to_json(v), huge);
  // Many digits either side of the point still round correctly.
  EXPECT_EQ(ParseOk("0." + std::string(400, '0') + "1e401").as_number().value, 1.0);
}

TEST(JsonParseTest, TinyNumbersUnderflowToZeroAndHugeOnesAreRejected) {
  EXPECT_EQ(ParseOk("1e-400").as_number().value, 0.0);
  Value negative = ParseOk("-1e-400");
  EXPECT_EQ(negative.as_number().value, 0.0);
  EXPECT_TRUE(std::signbit(negative.as_number().value));
  EXPECT_EQ(ParseOk("5e-324").as_number().value, 5e-324);
  EXPECT_EQ(ParseOk("1.7976931348623157e308").as_number().value, 1.7976931348623157e308);

  Error e = ExpectParseError(R"({"temperature":[1e400]})", ErrorCode::kInvalidValue);
  EXPECT_EQ(e.param, "temperature[0]");
  ExpectParseError("-1e400", ErrorCode::kInvalidValue);
  ExpectParseError(std::string(400, '9'), ErrorCode::kInvalidValue);
  ExpectParseError("0.0001e313", ErrorCode::kInvalidValue);   // 1e309
  EXPECT_EQ(ParseOk("-0.0001e-321").as_number().value, 0.0);  // -1e-325
}

TEST(JsonParseTest, UnescapesStrings) {
  EXPECT_EQ(ParseOk(R"("a\"b\\c\/d\b\f\n\r\t")").as_string(), "a\"b\\c/d\b\f\n\r\t");
  EXPECT_EQ(ParseOk(R"("\u00e9\u20AC")").as_string(), "\xC3\xA9\xE2\x82\xAC");
  EXPECT_EQ(ParseOk(R"("nul\u0000byte")").as_string(), std::string("nul\0byte", 8));
  EXPECT_EQ(ParseOk("\"caf\xC3\xA9\"").as_string(), "caf\xC3\xA9");
}

TEST(JsonParseTest, AcceptsValidSurrogatePairs) {
  EXPECT_EQ(ParseOk(R"("\ud83d\ude02")").as_string(), "\xF0\x9F\x98\x82");
  EXPECT_EQ(ParseOk(R"("\uD800\uDC00")").as_string(), "\xF0\x90\x80\x80");  // U+10000
  EXPECT_EQ(ParseOk(R"("\uDBFF\uDFFF")").as_string(), "\xF4\x8F\xBF\xBF");  // U+10FFFF
  EXPECT_EQ(ParseOk(R"({"\ud83d\ude02":1})").as_object()[0].key, "\xF0\x9F\x98\x82");
}

TEST(JsonParseTest, RejectsLoneSurrogateEscapesAsInvalidUtf8) {
  for (const char* text : {
           R"("\ud800")",        // high alone
           R"("\udc00")",        // low alone
           R"("\udc00\ud800")",  // reversed pair
           R"("\ud800\ud800")",  // two highs
           R"("\ud800x")",       // high then a character
           R"("\ud800\u0041")",  // high then a BMP escape
           R"("\ud800\n")",      // high then another escape
           R"("abc\uDFFF")",     // low alone, at the end
           R"({"\ud800":1})",    // in a key
       }) {
    ExpectParseError(text, ErrorCode::kInvalidUtf8);
  }
  Error e = ExpectParseError(R"({"messages":[{"content":"hi \udc00"}]})", ErrorCode::kInvalidUtf8);
  EXPECT_EQ(e.param, "messages[0].content");
  EXPECT_NE(e.message.find("\\udc00"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("at byte 28"), std::string::npos) << e.message;
}

TEST(JsonParseTest, RejectsBytesThatAreNotUtf8) {
  for (std::string text : {
           std::string("\"\xFF\""),              // never valid
           std::string("\"\xC3\x28\""),          // bad continuation
           std::string("\"\xC0\xAF\""),          // overlong '/'
           std::string("\"\xED\xA0\x80\""),      // an encoded surrogate (CESU-8)
           std::string("\"\xF4\x90\x80\x80\""),  // above U+10FFFF
           std::string("\"\xE2\x82\""),          // truncated
           std::string("{\"k\xFF\":1}"),         // in a key
           std::string("[1, \x80]"),             // outside a string
       }) {
    ExpectParseError(text, ErrorCode::kInvalidUtf8);
  }
  Error e = ExpectParseError("[\"ok\", \"bad \xE2\x82\"]", ErrorCode::kInvalidUtf8);
  EXPECT_NE(e.message.find("at byte 12"), std::string::npos) << e.message;
}

TEST(JsonParseTest, RejectsSyntaxErrorsAsInvalidJson) {
  for (std::string text : {
           std::string(""),
           std::string("   \n"),
           std::string("{"),
           std::string("}"),
           std::string("[1,]"),
           std::string("[,1]"),
           std::string("[1 2]"),
           std::string(R"({"a" 1})"),
           std::string(R"({"a":1,})"),
           std::string(R"({"a"})"),
           std::string("{1:2}"),
           std::string("{a:1}"),
           std::string("[01]"),
           std::string("1."),
           std::string("-"),
           std::string("+1"),
           std::string(".5"),
           std::string("1e"),
           std::string("1e+"),
           std::string("[1.e5]"),
           std::string("0x10"),
           std::string("tru"),
           std::string("nul"),
           std::string("nullx"),
           std::string("[True]"),
           std::string("[1]]"),
           std::string("[1] 2"),
           std::string("[1][2]"),
           std::string("{} x"),
           std::string("1 2"),
           std::string("\"a\" \"b\""),
           std::string("true false"),
           std::string("null 0"),
           std::string("\"abc"),
           std::string(R"("\x")"),
           std::string(R"("\u12G4")"),
           std::string(R"("\u12")"),
           std::string("'a'"),
           std::string("[\"a\x01\"]"),
           std::string("[\"tab\there\"]"),
           std::string("NaN"),
           std::string("-Infinity"),
           std::string("[1,\x01]"),
           std::string("[\0]", 3),
           std::string("[1,2", 4),
       }) {
    ExpectParseError(text, ErrorCode::kInvalidJson);
  }
}

TEST(JsonParseTest, ErrorsSayWhereAndOnWhichField) {
  Error e = ExpectParseError("[1, 2, x]", ErrorCode::kInvalidJson);
  EXPECT_NE(e.message.find("at byte 7"), std::string::npos) << e.message;
  e = ExpectParseError(R"({"model":"m","messages":[{"role":"user","content":01}]})",
                       ErrorCode::kInvalidJson);
  EXPECT_EQ(e.param, "messages[0].content");
  EXPECT_NE(e.message.find("at byte 50"), std::string::npos) << e.message;
  e = ExpectParseError(R"({"a b":{"c":[tru]}})", ErrorCode::kInvalidJson);
  EXPECT_EQ(e.param, R"(["a b"].c[0])");
  e = ExpectParseError("[\"x\", \"a\x01\"]", ErrorCode::kInvalidJson);
  EXPECT_NE(e.message.find("at byte 8"), std::string::npos) << e.message;
  e = ExpectParseError("[1] 2", ErrorCode::kInvalidJson);
  EXPECT_TRUE(e.param.empty());
  e = ExpectParseError("1 2", ErrorCode::kInvalidJson);
  EXPECT_NE(e.message.find("at byte 2"), std::string::npos) << e.message;
}

TEST(JsonParseTest, TooLargeIsCheckedFirst) {
  ParseLimits limits;
  limits.max_bytes = 8;
  Error e = ExpectParseError("[1,2,3,4]", ErrorCode::kTooLarge, limits);
  EXPECT_NE(e.message.find('8'), std::string::npos) << e.message;
  ExpectParseError("\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF", ErrorCode::kTooLarge, limits);
  EXPECT_TRUE(ParseOk("[1,2,34]", limits).is_array());  // exactly max_bytes is fine
}

TEST(JsonParseTest, DepthLimitIsExact) {
  ParseLimits limits;
  limits.max_depth = 64;
  EXPECT_TRUE(ParseOk(Nested(64, "[", "]"), limits).is_array());
  EXPECT_TRUE(ParseOk(Nested(64, R"({"a":)", "}", "1"), limits).is_object());
  ExpectParseError(Nested(65, "[", "]"), ErrorCode::kTooDeep, limits);
  Error e = ExpectParseError(Nested(65, R"({"a":)", "}", "1"), ErrorCode::kTooDeep, limits);
  EXPECT_NE(e.message.find("64"), std::string::npos) << e.message;
  limits.max_depth = 0;
  EXPECT_EQ(ParseOk("7", limits).as_number().value, 7.0);
  ExpectParseError("[]", ErrorCode::kTooDeep, limits);
}

TEST(JsonParseTest, HundredThousandLevelsIsTooDeepNotACrash) {
  ExpectParseError(Nested(100000, "[", "]"), ErrorCode::kTooDeep);
  ExpectParseError(Nested(100000, R"({"a":)", "}", "null"), ErrorCode::kTooDeep);
  ExpectParseError(Nested(100000, "[{\"k\":", "}]", "0"), ErrorCode::kTooDeep);
  // Unbalanced: whichever error, it must be an error.
  EXPECT_FALSE(parse(std::string(100000, '[')).ok());
}

TEST(JsonParseTest, RejectsDuplicateKeysNamingThem) {
  Error e = ExpectParseError(R"({"a":1,"b":2,"a":3})", ErrorCode::kDuplicateKey);
  EXPECT_EQ(e.param, "a");
  EXPECT_NE(e.message.find("\"a\""), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("at byte 13"), std::string::npos) << e.message;
  // Compared after unescaping.
  e = ExpectParseError(R"({"role":1,"\u0072ole":2})", ErrorCode::kDuplicateKey);
  EXPECT_EQ(e.param, "role");
  e = ExpectParseError(R"({"messages":[{"role":"user"},{"role":"user","role":"x"}]})",
                       ErrorCode::kDuplicateKey);
  EXPECT_EQ(e.param, "messages[1].role");
  e = ExpectParseError(R"({"":1,"":2})", ErrorCode::kDuplicateKey);
  EXPECT_EQ(e.param, R"([""])");
  // The same key in different objects, and keys that differ only by case or length, are fine.
  EXPECT_TRUE(ParseOk(R"([{"a":1},{"a":2},{"a":{"a":3}}])").is_array());
  EXPECT_TRUE(ParseOk(R"({"a":1,"A":2,"aa":3,"a\u0000":4})").is_object());
}

TEST(JsonParseTest, FindsDuplicatesInLargeObjects) {
  // Past the pairwise threshold the check sorts; it must still report the first repeat.
  std::string text = "{";
  for (int i = 0; i < 500; ++i) text += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  text += "\"k7\":0,\"k3\":0}";
  Error e = ExpectParseError(text, ErrorCode::kDuplicateKey);
  EXPECT_EQ(e.param, "k7");
  text.replace(text.rfind("\"k7\""), 4, "\"z7\"");
  text.replace(text.rfind("\"k3\""), 4, "\"z3\"");
  Value v = ParseOk(text);
  EXPECT_EQ(v.as_object().size(), 502u);
  EXPECT_EQ(v.as_object()[500].key, "z7");
}

TEST(JsonParseTest, LargeDocumentsAndParserReuse) {
  // Over 1 MiB takes the one-off parser; the small document after it reuses the thread's.
  std::string big = "[";
  for (int i = 0; i < 300000; ++i) big += (i ? "," : "") + std::to_string(i);
  big += "]";
  ASSERT_GT(big.size(), std::size_t{1} << 20);
  Value v = ParseOk(big);
  ASSERT_EQ(v.as_array().size(), 300000u);
  EXPECT_EQ(v.as_array()[299999].as_number().value, 299999.0);
  EXPECT_EQ(to_json(ParseOk(R"({"a":[1,2]})")), R"({"a":[1,2]})");
  EXPECT_EQ(to_json(ParseOk("[3]")), "[3]");
}

// Property: whatever bytes arrive, parse() returns (never crashes), and whatever it accepts,
// to_json() writes back as a document that parses to the same tree.
TEST(JsonParseTest, MutatedDocumentsNeverCrashAndRoundTrip) {
  const std::string seed_doc =
      R"({"model":"m","messages":[{"role":"user","content":"h\u00e9\ud83d\ude02 \"x\""}],)"
      R"("n":[1,-2.5e-3,1E+2,0,true,false,null,{}],"s":"\\\/\b\f\n\r\t"})";
  std::mt19937_64 rng(0x5eed);
  const std::string alphabet = "{}[]\":,\\ \t\n0123456789-+.eEtrufalsn\x01\x7f\x80\xC3\xED\xF0";
  int accepted = 0;
  for (int round = 0; round < 5000; ++round) {
    std::string text = seed_doc;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits; ++k) {
      const std::size_t pos = rng() % (text.size() + 1);
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0: text.insert(pos, 1, c); break;
        case 1:
          if (pos < text.size()) text.erase(pos, 1);
          break;
        default:
          if (pos < text.size()) text[pos] = c;
      }
    }
    Result<Value> first = parse(text);
    if (!first.ok()) continue;
    ++accepted;
    const std::string written = to_json(*first);
    Result<Value> second = parse(written);
    ASSERT_TRUE(second.ok()) << testing::PrintToString(text) << " -> " << written;
    EXPECT_EQ(*second, *first) << testing::PrintToString(text);
    EXPECT_EQ(to_json(*second), written);
  }
  EXPECT_GT(accepted, 100);  // the mutations must leave some documents valid
}

// A text whose buffer has the parser's padding past its end is parsed where it lies, whatever
// that padding holds: the same value or the same error as from a copy, for mutated documents
// (valid and not) followed by bytes that would continue them ("1", "]", "\"", ...).
TEST(JsonParseTest, ParsesInPlaceAsFromACopy) {
  const std::string seed_doc =
      R"({"model":"m","messages":[{"role":"user","content":"h\u00e9 \"x\""}],"n":[1,-2.5e-3,true,null]})";
  std::mt19937_64 rng(0xface);
  const std::string alphabet = "{}[]\":,\\ 0123456789-.eEtrufalsn\x01\x80\xC3";
  const std::vector<std::string> pads = {
      std::string(kParsePadding, '1'), std::string(kParsePadding, ']'),
      std::string(kParsePadding, '"'), std::string(kParsePadding, '\\'),
      std::string(kParsePadding, '\0')};
  // Found by fuzz_json: with `]` past its end simdjson reported this text's first fault
  // elsewhere.
  const std::string unbalanced = "[[[[[[[[[[[[[[`[]]]]]]]]]]]]]]]]";
  for (int round = 0; round < 3000; ++round) {
    std::string text = round == 0 ? unbalanced
                                  : seed_doc.substr(0, round % 7 == 0 ? rng() % seed_doc.size()
                                                                      : std::string::npos);
    for (int k = 0; round > 0 && k < static_cast<int>(rng() % 3); ++k) {
      const std::size_t pos = rng() % (text.size() + 1);
      text.insert(pos, 1, alphabet[rng() % alphabet.size()]);
    }
    const std::string& pad = round == 0 ? pads[1] : pads[rng() % pads.size()];
    const std::string buffer = text + pad;
    ParseLimits in_place;
    in_place.readable_past_end = pad.size();
    std::vector<MemberSpan> copied_spans, in_place_spans;
    Result<Value> copied = parse(text, ParseLimits{}, copied_spans);
    Result<Value> direct =
        parse(std::string_view(buffer.data(), text.size()), in_place, in_place_spans);
    ASSERT_EQ(direct.ok(), copied.ok()) << testing::PrintToString(text);
    if (copied.ok()) {
      EXPECT_EQ(*direct, *copied) << testing::PrintToString(text);
      ASSERT_EQ(in_place_spans.size(), copied_spans.size());
      for (std::size_t i = 0; i < copied_spans.size(); ++i) {
        EXPECT_EQ(in_place_spans[i].begin, copied_spans[i].begin);
        EXPECT_EQ(in_place_spans[i].end, copied_spans[i].end);
      }
    } else {
      EXPECT_EQ(direct.error().code, copied.error().code) << testing::PrintToString(text);
      EXPECT_EQ(direct.error().message, copied.error().message) << testing::PrintToString(text);
    }
  }
}

}  // namespace
}  // namespace prefixgate::json
