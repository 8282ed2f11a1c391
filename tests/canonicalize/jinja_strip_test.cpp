// str.strip()/rstrip() and the trim filter against the definition they follow: Python strips the
// leading and trailing code points that are whitespace (or in `chars`), where the text is decoded
// from its start. The engine finds a trailing run by walking back from the end, which must agree
// on every string, malformed UTF-8 included.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "jinja_unicode.h"
#include "prefixgate/canonicalize/jinja.h"
#include "utf8_decode.h"

namespace prefixgate::canon::jinja {
namespace {

// Python's strip over code points decoded from the start: [begin, end) of what stays.
std::string reference_strip(std::string_view s, bool left, bool right,
                            const std::vector<std::string>* chars) {
  std::vector<std::pair<std::size_t, std::size_t>> points;  // (offset, bytes)
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = internal::decode_utf8(s, i).bytes;
    points.emplace_back(i, n);
    i += n;
  }
  const auto stripped = [&](const std::pair<std::size_t, std::size_t>& p) {
    const std::string_view cp = s.substr(p.first, p.second);
    if (chars == nullptr) return py_isspace(internal::decode_utf8(s, p.first).cp);
    for (const std::string& c : *chars) {
      if (c == cp) return true;
    }
    return false;
  };
  std::size_t first = 0;
  std::size_t last = points.size();
  if (left) {
    while (first < last && stripped(points[first])) ++first;
  }
  if (right) {
    while (last > first && stripped(points[last - 1])) --last;
  }
  if (first == last) return "";
  return std::string(s.substr(
      points[first].first, points[last - 1].first + points[last - 1].second - points[first].first));
}

std::string render_with(std::string_view tmpl, const std::string& s) {
  auto t = Template::compile(tmpl);
  EXPECT_TRUE(t.ok());
  Context ctx;
  ctx.set("s", Value(s));
  auto out = t->render(ctx);
  EXPECT_TRUE(out.ok()) << tmpl;
  return out ? out->text : "";
}

TEST(JinjaStripTest, StripAgreesWithPythonsDefinitionOnRandomText) {
  // Pieces: ASCII, ASCII and Unicode whitespace, multi-byte letters, and malformed sequences
  // (a lone continuation byte, a lead byte cut short, an overlong form, a surrogate).
  const std::vector<std::string> pieces = {"a",
                                           "Z",
                                           " ",
                                           "\t",
                                           "\n",
                                           "\r",
                                           "x",
                                           "\xc3\xa9",
                                           "\xe3\x80\x80",
                                           "\xc2\xa0",
                                           "\xe2\x80\xa8",
                                           "\xe8\xb0\x83",
                                           "\x80",
                                           "\xe3",
                                           "\xe3\x80",
                                           "\xc0\xaf",
                                           "\xed\xa0\x80",
                                           "\xf0\x9f\x9a\x80",
                                           "\xc2\x85",
                                           "\x1c"};
  // Code points strip('x\u3000') removes.
  const std::vector<std::string> chars = {"x", "\xe3\x80\x80"};
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    const int n = static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) s += pieces[rng() % pieces.size()];
    EXPECT_EQ(render_with("{{ s.rstrip() }}", s), reference_strip(s, false, true, nullptr)) << i;
    EXPECT_EQ(render_with("{{ s.strip() }}", s), reference_strip(s, true, true, nullptr)) << i;
    EXPECT_EQ(render_with("{{ s.lstrip() }}", s), reference_strip(s, true, false, nullptr)) << i;
    EXPECT_EQ(render_with("{{ s|trim }}", s), reference_strip(s, true, true, nullptr)) << i;
    EXPECT_EQ(render_with("{{ s.rstrip('x\xe3\x80\x80') }}", s),
              reference_strip(s, false, true, &chars))
        << i;
  }
}

}  // namespace
}  // namespace prefixgate::canon::jinja
