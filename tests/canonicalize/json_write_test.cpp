#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::json {
namespace {

std::string Quoted(std::string_view s) {
  std::string out;
  append_quoted(s, out);
  return out;
}

std::string Utf8(char32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

std::u16string Utf16(char32_t cp) {
  if (cp < 0x10000) return std::u16string(1, static_cast<char16_t>(cp));
  const char32_t v = cp - 0x10000;
  return {static_cast<char16_t>(0xD800 + (v >> 10)), static_cast<char16_t>(0xDC00 + (v & 0x3FF))};
}

TEST(JsonWriteTest, QuotesWithRfc8785MinimalEscapes) {
  EXPECT_EQ(Quoted(""), R"("")");
  EXPECT_EQ(Quoted("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(Quoted("\b\f\n\r\t"), R"("\b\f\n\r\t")");
  // Not escaped: solidus, DEL, and every non-ASCII character (RFC 8785 section 3.2.2.2).
  EXPECT_EQ(Quoted("/\x7F\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x82"),
            "\"/\x7F\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x82\"");
  EXPECT_EQ(Quoted(std::string("a\0b", 3)), R"("a\u0000b")");
}

TEST(JsonWriteTest, EveryOtherControlCharacterIsLowercaseUnicodeEscape) {
  for (int c = 0; c < 0x20; ++c) {
    const std::string got = Quoted(std::string(1, static_cast<char>(c)));
    std::string want;
    switch (c) {
      case '\b': want = R"("\b")"; break;
      case '\f': want = R"("\f")"; break;
      case '\n': want = R"("\n")"; break;
      case '\r': want = R"("\r")"; break;
      case '\t': want = R"("\t")"; break;
      default: {
        static constexpr char kHex[] = "0123456789abcdef";
        want = std::string("\"\\u00") + kHex[c >> 4] + kHex[c & 0xF] + "\"";
      }
    }
    EXPECT_EQ(got, want) << "control character " << c;
  }
  EXPECT_EQ(Quoted("\x1f"), R"("\u001f")");
}

TEST(JsonWriteTest, AppendsToExistingText) {
  std::string out = "x=";
  append_quoted("y", out);
  append_number(1.5, out);
  EXPECT_EQ(out, "x=\"y\"1.5");
}

TEST(JsonWriteTest, ToJsonIsCompactInStoredOrderWithSourceText) {
  Value v = Object{{"z", Value(Number{100, "1e2"})},
                   {"a", Array{Value(), true, false, 0.5, "s\n"}},
                   {"m", Object{}}};
  EXPECT_EQ(to_json(v), R"({"z":1e2,"a":[null,true,false,0.5,"s\n"],"m":{}})");
  EXPECT_EQ(to_json(Value(1e21)), "1e+21");
  EXPECT_EQ(to_json(Value(-0.0)), "0");
  EXPECT_EQ(to_json(Value(std::numeric_limits<double>::quiet_NaN())), "null");
  EXPECT_EQ(to_json(Value(-std::numeric_limits<double>::infinity())), "null");
}

// RFC 8785 Appendix B: IEEE-754 bit patterns and their required serialization.
TEST(JsonWriteTest, FormatsRfc8785AppendixBNumbers) {
  struct Case {
    std::uint64_t bits;
    const char* text;
  };
  const Case cases[] = {
      {0x0000000000000000, "0"},
      {0x8000000000000000, "0"},
      {0x0000000000000001, "5e-324"},
      {0x8000000000000001, "-5e-324"},
      {0x7fefffffffffffff, "1.7976931348623157e+308"},
      {0xffefffffffffffff, "-1.7976931348623157e+308"},
      {0x4340000000000000, "9007199254740992"},
      {0xc340000000000000, "-9007199254740992"},
      {0x4430000000000000, "295147905179352830000"},
      {0x44b52d02c7e14af5, "9.999999999999997e+22"},
      {0x44b52d02c7e14af6, "1e+23"},
      {0x44b52d02c7e14af7, "1.0000000000000001e+23"},
      {0x444b1ae4d6e2ef4e, "999999999999999700000"},
      {0x444b1ae4d6e2ef4f, "999999999999999900000"},
      {0x444b1ae4d6e2ef50, "1e+21"},
      {0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
      {0x3eb0c6f7a0b5ed8d, "0.000001"},
      {0x41b3de4355555553, "333333333.3333332"},
      {0x41b3de4355555554, "333333333.33333325"},
      {0x41b3de4355555555, "333333333.3333333"},
      {0x41b3de4355555556, "333333333.3333334"},
      {0x41b3de4355555557, "333333333.33333343"},
      {0xbecbf647612f3696, "-0.0000033333333333333333"},
      {0x43143ff3c1cb0959, "1424953923781206.2"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(format_number(std::bit_cast<double>(c.bits)), c.text) << std::hex << c.bits;
  }
}

TEST(JsonWriteTest, FormatsNumbersAcrossEcmaScriptLayoutBoundaries) {
  EXPECT_EQ(format_number(1), "1");
  EXPECT_EQ(format_number(-1.5), "-1.5");
  EXPECT_EQ(format_number(100), "100");
  EXPECT_EQ(format_number(123.456), "123.456");
  EXPECT_EQ(format_number(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(format_number(1e20), "100000000000000000000");
  EXPECT_EQ(format_number(1e21), "1e+21");  // n = 22: exponent form
  EXPECT_EQ(format_number(1.5e21), "1.5e+21");
  EXPECT_EQ(format_number(1e-6), "0.000001");  // n = -5: still decimal
  EXPECT_EQ(format_number(1e-7), "1e-7");      // n = -6: exponent form
  EXPECT_EQ(format_number(1.25e-7), "1.25e-7");
  EXPECT_EQ(format_number(123e-20), "1.23e-18");
  EXPECT_EQ(format_number(9007199254740993.0), "9007199254740992");
  EXPECT_EQ(format_number(-0.0), "0");
  EXPECT_EQ(format_number(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(format_number(std::numeric_limits<double>::infinity()), "Infinity");
  EXPECT_EQ(format_number(-std::numeric_limits<double>::infinity()), "-Infinity");
}

TEST(JsonWriteTest, Utf16OrderPutsSupplementaryCharactersBetweenD7ffAndE000) {
  const std::string e_acute = "\xC3\xA9";           // U+00E9
  const std::string grinning = "\xF0\x9F\x98\x80";  // U+1F600 = D83D DE00
  const std::string replacement = "\xEF\xBF\xBD";   // U+FFFD
  const std::string private_use = "\xEE\x80\x80";   // U+E000
  const std::string hangul_end = "\xED\x9F\xBF";    // U+D7FF
  const std::string linear_b = "\xF0\x90\x80\x80";  // U+10000 = D800 DC00
  EXPECT_TRUE(utf16_less(e_acute, grinning));
  EXPECT_TRUE(utf16_less(grinning, replacement));  // code point order says the opposite
  EXPECT_TRUE(utf16_less(e_acute, replacement));
  EXPECT_TRUE(utf16_less(linear_b, private_use));
  EXPECT_TRUE(utf16_less(hangul_end, linear_b));
  EXPECT_TRUE(utf16_less(linear_b, grinning));
  EXPECT_FALSE(utf16_less(replacement, grinning));
  EXPECT_FALSE(utf16_less(grinning, e_acute));
  // Prefixes and equality.
  EXPECT_TRUE(utf16_less("", "a"));
  EXPECT_TRUE(utf16_less("a", "ab"));
  EXPECT_FALSE(utf16_less("ab", "a"));
  EXPECT_FALSE(utf16_less("a", "a"));
  EXPECT_FALSE(utf16_less("", ""));
  EXPECT_TRUE(utf16_less("a" + grinning, "a" + replacement));
  EXPECT_TRUE(utf16_less(grinning, grinning + "a"));
  EXPECT_TRUE(utf16_less(std::string("a\0", 2), "a\x01"));
}

// Property: on valid UTF-8, utf16_less agrees with comparing the UTF-16 encodings.
TEST(JsonWriteTest, Utf16LessAgreesWithUtf16EncodingOnRandomStrings) {
  const char32_t boundaries[] = {0x00,   0x41,   0x7F,   0x80,    0x7FF,   0x800,   0xD7FF,
                                 0xE000, 0xFFFD, 0xFFFF, 0x10000, 0x1F600, 0x1F601, 0x10FFFF};
  std::mt19937_64 rng(20240601);
  const auto random_cp = [&]() -> char32_t {
    switch (rng() % 6) {
      case 0: return boundaries[rng() % std::size(boundaries)];
      case 1: return static_cast<char32_t>(rng() % 0x80);
      case 2: return static_cast<char32_t>(0x80 + rng() % (0xD800 - 0x80));
      case 3: return static_cast<char32_t>(0xE000 + rng() % 0x2000);
      default: return static_cast<char32_t>(0x10000 + rng() % 0x100000);
    }
  };
  for (int trial = 0; trial < 20000; ++trial) {
    // A small alphabet per trial, so strings often share long prefixes.
    std::vector<char32_t> alphabet(1 + rng() % 3);
    for (char32_t& cp : alphabet) cp = random_cp();
    std::string a8, b8;
    std::u16string a16, b16;
    const std::size_t len_a = rng() % 5, len_b = rng() % 5;
    for (std::size_t i = 0; i < len_a; ++i) {
      const char32_t cp = alphabet[rng() % alphabet.size()];
      a8 += Utf8(cp);
      a16 += Utf16(cp);
    }
    for (std::size_t i = 0; i < len_b; ++i) {
      const char32_t cp = alphabet[rng() % alphabet.size()];
      b8 += Utf8(cp);
      b16 += Utf16(cp);
    }
    ASSERT_EQ(utf16_less(a8, b8), a16 < b16)
        << testing::PrintToString(a8) << " vs " << testing::PrintToString(b8);
  }
}

// Property: even on bytes that are not UTF-8 (a constructed Value can hold any), utf16_less is
// a strict total order, so sorting with it is well defined.
TEST(JsonWriteTest, Utf16LessIsATotalOrderOnArbitraryBytes) {
  const std::string bytes =
      std::string("a\x7F\x80\xBF\xC3\xA9\xE2\x82\xED\xA0\xF0\x9F\xF4\xFF", 14);
  std::mt19937_64 rng(7);
  std::vector<std::string> strings(300);
  for (std::string& s : strings) {
    const std::size_t len = rng() % 6;
    for (std::size_t i = 0; i < len; ++i) s += bytes[rng() % bytes.size()];
  }
  for (const std::string& a : strings) {
    EXPECT_FALSE(utf16_less(a, a));
    for (const std::string& b : strings) {
      const bool ab = utf16_less(a, b), ba = utf16_less(b, a);
      ASSERT_FALSE(ab && ba) << testing::PrintToString(a) << " " << testing::PrintToString(b);
      ASSERT_EQ(!ab && !ba, a == b)
          << testing::PrintToString(a) << " " << testing::PrintToString(b);
    }
  }
  for (int k = 0; k < 200000; ++k) {
    const std::string& a = strings[rng() % strings.size()];
    const std::string& b = strings[rng() % strings.size()];
    const std::string& c = strings[rng() % strings.size()];
    if (utf16_less(a, b) && utf16_less(b, c)) {
      ASSERT_TRUE(utf16_less(a, c)) << testing::PrintToString(a) << " " << testing::PrintToString(b)
                                    << " " << testing::PrintToString(c);
    }
  }
}

TEST(JsonWriteTest, PathHelpersBuildOpenAiStyleParams) {
  std::string path = "content";
  prepend_path_index(2, path);
  EXPECT_EQ(path, "[2].content");
  prepend_path_key("messages", path);
  EXPECT_EQ(path, "messages[2].content");
  std::string odd;
  prepend_path_key("a.b", odd);
  EXPECT_EQ(odd, R"(["a.b"])");
  prepend_path_key("x", odd);
  EXPECT_EQ(odd, R"(x["a.b"])");
  std::string digits;
  prepend_path_key("0", digits);
  prepend_path_index(0, digits);
  EXPECT_EQ(digits, R"([0]["0"])");
}

// is_canonical() and canonicalize_in_place() are the allocation-free forms of "serialize the
// canonical copy and compare": they must agree with it on every value, whatever its key order,
// nesting and number spellings.
TEST(JsonWriteTest, IsCanonicalAndInPlaceAgreeWithSerializingTheCanonicalCopy) {
  std::mt19937_64 rng(20261130);
  const std::vector<std::string> keys = {
      "a", "b", "type", "name", "Z", "\xc3\xa9", "\xf0\x9f\x98\x80", "\xee\x80\x80", "aa", ""};
  const std::vector<std::string> numbers = {"1", "1.0", "1e2", "100", "-0", "0.5", "5E-1", "2"};
  std::function<Value(int)> random_value = [&](int depth) -> Value {
    const int kind = static_cast<int>(rng() % (depth > 3 ? 3 : 5));
    switch (kind) {
      case 0: return Value(std::string("s") + std::to_string(rng() % 10));
      case 1: {
        const std::string& src = numbers[rng() % numbers.size()];
        const bool keep_source = rng() % 2 == 0;
        return Value(Number{std::stod(src), keep_source ? src : std::string()});
      }
      case 2: return Value(rng() % 2 == 0);
      case 3: {
        Array items;
        for (std::size_t i = 0, n = rng() % 4; i < n; ++i) items.push_back(random_value(depth + 1));
        return Value(std::move(items));
      }
      default: {
        // Now and then an object past canonicalize_in_place's insertion-sort size.
        const bool large = depth < 2 && rng() % 8 == 0;
        std::vector<std::string> pool = keys;
        if (large) {
          for (int k = 0; k < 30; ++k) pool.push_back("k" + std::to_string(k));
        }
        std::shuffle(pool.begin(), pool.end(), rng);
        if (large && rng() % 3 == 0) std::sort(pool.begin(), pool.begin() + 20);
        Object members;
        for (std::size_t i = 0, n = large ? 17 + rng() % 20 : rng() % 5; i < n; ++i) {
          members.push_back(Member{pool[i], random_value(depth + 1)});
        }
        return Value(std::move(members));
      }
    }
  };
  int canonical = 0;
  for (int round = 0; round < 3000; ++round) {
    const Value v = random_value(0);
    const std::string expected = to_json(canonicalized(v));
    EXPECT_EQ(is_canonical(v), to_json(v) == expected) << to_json(v);
    canonical += is_canonical(v) ? 1 : 0;
    Value in_place = v;
    canonicalize_in_place(in_place);
    EXPECT_EQ(to_json(in_place), expected);
    EXPECT_TRUE(is_canonical(in_place));
  }
  // Both outcomes were exercised.
  EXPECT_GT(canonical, 100);
  EXPECT_LT(canonical, 2900);
}

// append_quoted skips eight bytes at a time; a byte-at-a-time reference must agree on strings
// with an escape at every offset, next to multi-byte UTF-8 and high bytes.
TEST(JsonWriteTest, WordAtATimeQuotingMatchesAByteLoop) {
  const auto reference = [](std::string_view s) {
    std::string out = "\"";
    for (const char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      static constexpr char kHex[] = "0123456789abcdef";
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
          if (c < 0x20) {
            out += "\\u00";
            out += kHex[c >> 4];
            out += kHex[c & 0xF];
          } else {
            out += ch;
          }
      }
    }
    return out + "\"";
  };
  std::mt19937 rng(8785);
  const std::string alphabet =
      std::string("abc XYZ 019\xc3\xa9\x7f\xff\"\\\n\t") + '\0' + "\x01\x1f";
  for (int round = 0; round < 5000; ++round) {
    std::string s(rng() % 40, 'a');
    for (char& c : s) {
      // Mostly plain, so whole safe words occur; sometimes anything from the alphabet.
      if (rng() % 6 == 0) c = alphabet[rng() % alphabet.size()];
    }
    EXPECT_EQ(Quoted(s), reference(s)) << round;
  }
}

}  // namespace
}  // namespace prefixgate::json
