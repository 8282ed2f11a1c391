// The code point sets of tokenizer_regex.h: Unicode general categories by name, membership
// tables, and case folding for (?i).
#include <utf8proc.h>

#include "char_class.h"
#include "tokenizer_regex.h"

namespace prefixgate::canon::internal {
namespace {

using namespace regex_category;

struct CategoryName {
  const char* name;
  std::uint32_t mask;
};

// General categories by the names Oniguruma accepts (compared case-insensitively, ignoring
// spaces, hyphens and underscores, as Oniguruma does).
constexpr CategoryName kCategoryNames[] = {
    {"l", kLetters},
    {"letter", kLetters},
    {"lu", bit(1)},
    {"uppercaseletter", bit(1)},
    {"ll", bit(2)},
    {"lowercaseletter", bit(2)},
    {"lt", bit(3)},
    {"titlecaseletter", bit(3)},
    {"lm", bit(4)},
    {"modifierletter", bit(4)},
    {"lo", bit(5)},
    {"otherletter", bit(5)},
    {"m", kMarks},
    {"mark", kMarks},
    {"combiningmark", kMarks},
    {"mn", bit(6)},
    {"nonspacingmark", bit(6)},
    {"mc", bit(7)},
    {"spacingmark", bit(7)},
    {"me", bit(8)},
    {"enclosingmark", bit(8)},
    {"n", kNumbers},
    {"number", kNumbers},
    {"nd", bit(9)},
    {"decimalnumber", bit(9)},
    {"nl", bit(10)},
    {"letternumber", bit(10)},
    {"no", bit(11)},
    {"othernumber", bit(11)},
    {"p", kPunctuation},
    {"punctuation", kPunctuation},
    {"pc", bit(12)},
    {"connectorpunctuation", bit(12)},
    {"pd", bit(13)},
    {"dashpunctuation", bit(13)},
    {"ps", bit(14)},
    {"openpunctuation", bit(14)},
    {"pe", bit(15)},
    {"closepunctuation", bit(15)},
    {"pi", bit(16)},
    {"initialpunctuation", bit(16)},
    {"pf", bit(17)},
    {"finalpunctuation", bit(17)},
    {"po", bit(18)},
    {"otherpunctuation", bit(18)},
    {"s", kSymbols},
    {"symbol", kSymbols},
    {"sm", bit(19)},
    {"mathsymbol", bit(19)},
    {"sc", bit(20)},
    {"currencysymbol", bit(20)},
    {"sk", bit(21)},
    {"modifiersymbol", bit(21)},
    {"so", bit(22)},
    {"othersymbol", bit(22)},
    {"z", kSeparators},
    {"separator", kSeparators},
    {"zs", bit(23)},
    {"spaceseparator", bit(23)},
    {"zl", bit(24)},
    {"lineseparator", bit(24)},
    {"zp", bit(25)},
    {"paragraphseparator", bit(25)},
    {"c", kOthers},
    {"other", kOthers},
    {"cn", bit(0)},
    {"unassigned", bit(0)},
    {"cc", bit(26)},
    {"control", bit(26)},
    {"cf", bit(27)},
    {"format", bit(27)},
    {"cs", bit(28)},
    {"surrogate", bit(28)},
    {"co", bit(29)},
    {"privateuse", bit(29)},
};

}  // namespace

std::optional<std::uint32_t> category_mask(std::string_view name) {
  std::string key;
  for (char c : name) {
    if (c == ' ' || c == '_' || c == '-') continue;
    key += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  for (const CategoryName& n : kCategoryNames) {
    if (key == n.name) return n.mask;
  }
  return std::nullopt;
}

char32_t fold_case(char32_t cp) {
  if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp - 'A' + 'a' : cp;
  if (cp > 0x10FFFF) return cp;
  utf8proc_int32_t out[4];
  utf8proc_int32_t boundclass = 0;
  const utf8proc_ssize_t n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), out, 4,
                                                     UTF8PROC_CASEFOLD, &boundclass);
  // Full foldings to several code points (U+00DF to "ss") are not simple foldings.
  return n == 1 ? static_cast<char32_t>(out[0]) : cp;
}

bool Regex::Set::contains_slow(char32_t cp) const {
  bool in = false;
  for (const Item& item : items) {
    bool hit = false;
    switch (item.kind) {
      case Item::kRange: hit = cp >= item.low && cp <= item.high; break;
      case Item::kWhiteSpace: hit = is_white_space_code_point(cp); break;
      case Item::kCategories: {
        const std::uint8_t cat = general_category(cp);
        hit = cat != kNoCategory && ((item.categories >> cat) & 1);
        break;
      }
    }
    if (hit != item.negated) {
      in = true;
      break;
    }
  }
  return in != negated;
}

void Regex::Set::finish() {
  bmp.assign(0x10000 / 64, 0);
  for (char32_t cp = 0; cp < 0x10000; ++cp) {
    if (contains_slow(cp)) bmp[cp >> 6] |= std::uint64_t{1} << (cp & 63);
  }
}

}  // namespace prefixgate::canon::internal
