// RFC 8785 (JSON Canonicalization Scheme) conformance: the RFC's test vectors, and number
// formatting checked against a real ECMAScript engine (node) on 100k doubles.
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::json {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Canonical(std::string_view text) {
  Result<Value> doc = parse(text);
  if (!doc.ok()) return "parse error: " + doc.error().message;
  Result<std::string> canonical = to_canonical_json(*doc);
  if (!canonical.ok()) return "canonicalize error: " + canonical.error().message;
  return *canonical;
}

TEST(JcsTest, MatchesRfc8785TestVectors) {
  const fs::path dir = fs::path(PREFIXGATE_DATA_DIR) / "jcs";
  ASSERT_TRUE(fs::is_directory(dir / "input")) << dir / "input"
                                               << " is missing";
  int checked = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir / "input")) {
    if (!entry.is_regular_file() || entry.path().extension() != ".json") continue;
    SCOPED_TRACE(entry.path().filename().string());
    const fs::path expected_path = dir / "output" / entry.path().filename();
    ASSERT_TRUE(fs::is_regular_file(expected_path)) << expected_path << " is missing";
    std::string expected = ReadFile(expected_path);
    // Canonical JSON never ends in whitespace, so a final newline is the file's, not the data's.
    if (!expected.empty() && expected.back() == '\n') expected.pop_back();
    if (!expected.empty() && expected.back() == '\r') expected.pop_back();
    EXPECT_EQ(Canonical(ReadFile(entry.path())), expected);
    ++checked;
  }
  EXPECT_GT(checked, 0) << "no *.json test vectors in " << dir / "input";
}

// The doubles to compare with node: random bit patterns, random short decimals at every
// magnitude, integers, the neighbours of every power of ten, and the named edge cases.
std::vector<double> OracleDoubles() {
  std::mt19937_64 rng(0x8785);
  std::vector<double> out;
  out.reserve(100000);
  const auto add = [&](double x) {
    if (std::isfinite(x)) out.push_back(x);
  };
  for (double x : {5e-324,
                   -5e-324,
                   1.7976931348623157e308,
                   2.2250738585072014e-308,
                   2.2250738585072009e-308,
                   1e21,
                   1e-7,
                   1e-6,
                   9007199254740993.0,
                   9007199254740992.0,
                   0.1 + 0.2,
                   -0.0,
                   0.0,
                   1.0,
                   -1.0,
                   0.1,
                   1e23,
                   5e-7,
                   1e300,
                   123456789012345680000.0,
                   4.35,
                   0.5,
                   2.0 / 3.0}) {
    add(x);
  }
  for (int e = -325; e <= 309; ++e) {
    const double p = std::pow(10.0, e);
    add(p);
    add(std::nextafter(p, 0.0));
    add(std::nextafter(p, std::numeric_limits<double>::infinity()));
    add(-p);
  }
  while (out.size() < 40000) {
    add(std::bit_cast<double>(rng()));  // any finite double, subnormals included
  }
  while (out.size() < 75000) {
    // d.ddd...e±N with 1-17 significant digits: the numbers people write.
    std::string text = std::to_string(1 + rng() % 9);
    const int digits = static_cast<int>(rng() % 17);
    if (digits > 0) text += '.';
    for (int i = 0; i < digits; ++i) text += static_cast<char>('0' + rng() % 10);
    text += "e" + std::to_string(static_cast<int>(rng() % 650) - 330);
    add((rng() & 1 ? 1.0 : -1.0) * std::strtod(text.c_str(), nullptr));
  }
  while (out.size() < 90000) {
    const int bits = 1 + static_cast<int>(rng() % 70);
    add(static_cast<double>(rng() >> (64 - std::min(bits, 64))) * (bits > 64 ? 1e3 : 1.0));
  }
  while (out.size() < 100000) {
    // Near the layout boundaries of ECMA-262 Number::toString: 1e21 and 1e-6.
    const double base = rng() & 1 ? 1e21 : 1e-6;
    double x = base * (0.5 + static_cast<double>(rng() % 1000) / 500.0);
    for (int steps = static_cast<int>(rng() % 4); steps > 0; --steps) {
      x = std::nextafter(x, rng() & 1 ? 0.0 : 1e300);
    }
    add(x);
  }
  return out;
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

TEST(JcsTest, NumbersMatchNodeJsonStringifyOnHundredThousandDoubles) {
  // Never skipped: without node this test cannot check anything, so it fails.
  ASSERT_EQ(std::system("command -v node >/dev/null 2>&1"), 0)
      << "node (Node.js) is not on PATH; this test compares format_number() with "
         "JSON.stringify and needs it (Debian: apt-get install nodejs)";
  const fs::path script = fs::path(PREFIXGATE_JS_DIR) / "jcs_number_oracle.cjs";
  ASSERT_TRUE(fs::is_regular_file(script)) << script << " is missing";

  const std::vector<double> doubles = OracleDoubles();
  ASSERT_EQ(doubles.size(), 100000u);
  const fs::path input =
      fs::temp_directory_path() / ("jcs_numbers_" + std::to_string(::getpid()) + ".hex");
  {
    std::ofstream out(input, std::ios::binary);
    char line[24];
    for (double x : doubles) {
      std::snprintf(line, sizeof line, "%016llx\n",
                    static_cast<unsigned long long>(std::bit_cast<std::uint64_t>(x)));
      out << line;
    }
    ASSERT_TRUE(out.good()) << "could not write " << input;
  }

  const std::string command =
      "node " + ShellQuote(script.string()) + " " + ShellQuote(input.string());
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr) << "could not run: " << command;
  std::string output;
  char buffer[1 << 16];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
  const int status = ::pclose(pipe);
  fs::remove(input);
  ASSERT_EQ(status, 0) << "node failed: " << command;

  std::vector<std::string> expected;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) expected.push_back(line);
  ASSERT_EQ(expected.size(), doubles.size()) << "node printed a different number of lines";

  int mismatches = 0;
  for (std::size_t i = 0; i < doubles.size(); ++i) {
    const std::string got = format_number(doubles[i]);
    if (got == expected[i]) continue;
    if (++mismatches <= 20) {
      ADD_FAILURE() << "bits " << std::hex << std::bit_cast<std::uint64_t>(doubles[i]) << std::dec
                    << ": format_number gives " << got << ", JSON.stringify gives " << expected[i];
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(JcsTest, SortsKeysByUtf16AndIgnoresNumberSourceText) {
  EXPECT_EQ(Canonical(R"({"b":[1.0,1e2,-0,0.5E-3],"a":{"z":null,"y":"\u00e9\u001F"}})"),
            "{\"a\":{\"y\":\"\xC3\xA9\\u001f\",\"z\":null},\"b\":[1,100,0,0.0005]}");
  // U+1F600 sorts before U+FFFD in UTF-16 although after it in code point order.
  EXPECT_EQ(Canonical(R"({"\ufffd":1,"\ud83d\ude00":2,"\u00e9":3,"a":4})"),
            "{\"a\":4,\"\xC3\xA9\":3,\"\xF0\x9F\x98\x80\":2,\"\xEF\xBF\xBD\":1}");
  EXPECT_EQ(Canonical("123456789012345678901234"), "1.2345678901234569e+23");
  EXPECT_EQ(Canonical(R"("\u2028\/")"), "\"\xE2\x80\xA8/\"");
}

TEST(JcsTest, RejectsNaNInfinityAndDuplicateKeysInConstructedValues) {
  Value v = Object{{"a", Array{1, std::numeric_limits<double>::quiet_NaN()}}};
  Result<std::string> r = to_canonical_json(v);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidValue);
  EXPECT_EQ(r.error().param, "a[1]");
  EXPECT_FALSE(to_canonical_json(Value(std::numeric_limits<double>::infinity())).ok());

  Value dup = Object{{"k", Object{{"x", 1}, {"w", 2}, {"x", 3}}}};
  r = to_canonical_json(dup);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kDuplicateKey);
  EXPECT_EQ(r.error().param, "k.x");
}

// canonicalized(v) is the canonical tree: writing it compactly gives the canonical text, and
// parsing the canonical text gives it back.
TEST(JcsTest, CanonicalizedAgreesWithCanonicalText) {
  std::vector<std::string> docs = {
      R"({"b":1,"a":[{"y":1.50,"x":"\ud83d\ude00"},2e-7,-0],"\ufffd":{},"\ud83d\ude00":[]})",
      R"([3,{"c":{"b":{"a":1E300}}},"s",null,true])",
      R"("plain")",
      "7.0",
  };
  const fs::path inputs = fs::path(PREFIXGATE_DATA_DIR) / "jcs" / "input";
  ASSERT_TRUE(fs::is_directory(inputs)) << inputs << " is missing";
  for (const fs::directory_entry& entry : fs::directory_iterator(inputs)) {
    docs.push_back(ReadFile(entry.path()));
  }
  for (const std::string& text : docs) {
    SCOPED_TRACE(text);
    Result<Value> doc = parse(text);
    ASSERT_TRUE(doc.ok()) << doc.error().message;
    Result<std::string> canonical = to_canonical_json(*doc);
    ASSERT_TRUE(canonical.ok()) << canonical.error().message;
    const Value tree = canonicalized(*doc);
    EXPECT_EQ(to_json(tree), *canonical);
    Result<Value> reparsed = parse(*canonical);
    ASSERT_TRUE(reparsed.ok()) << reparsed.error().message;
    EXPECT_EQ(tree, *reparsed);
    EXPECT_EQ(to_json(canonicalized(*reparsed)), *canonical);  // idempotent
    // Canonical form of the canonical form is itself.
    EXPECT_EQ(Canonical(*canonical), *canonical);
  }
}

}  // namespace
}  // namespace prefixgate::json
