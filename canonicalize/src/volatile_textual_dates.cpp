// Dates written with month names, alone or with a time: "Thursday, August 20, 2026 at 2:33 PM",
// "20 Aug 2026", RFC 2822 ("Thu, 20 Aug 2026 14:33:07 +0000") and the three HTTP date forms
// of RFC 9110 section 5.6.7 (IMF-fixdate, RFC 850, asctime).
#include <algorithm>
#include <array>
#include <cstdint>

#include "volatile_calendar.h"
#include "volatile_clock.h"
#include "volatile_internal.h"

namespace prefixgate::canon::volatile_detail {
namespace {

enum NameForm { kFull, kAbbreviated };

struct Name {
  std::string_view text;  // lower case
  int value;
  NameForm form;
};

// "May" is listed once, as an abbreviation: it is also the three-letter form RFC 2822 uses.
constexpr std::array<Name, 24> kMonths = {{
    {"january", 1, kFull},     {"february", 2, kFull},    {"march", 3, kFull},
    {"april", 4, kFull},       {"may", 5, kAbbreviated},  {"june", 6, kFull},
    {"july", 7, kFull},        {"august", 8, kFull},      {"september", 9, kFull},
    {"october", 10, kFull},    {"november", 11, kFull},   {"december", 12, kFull},
    {"jan", 1, kAbbreviated},  {"feb", 2, kAbbreviated},  {"mar", 3, kAbbreviated},
    {"apr", 4, kAbbreviated},  {"jun", 6, kAbbreviated},  {"jul", 7, kAbbreviated},
    {"aug", 8, kAbbreviated},  {"sep", 9, kAbbreviated},  {"sept", 9, kAbbreviated},
    {"oct", 10, kAbbreviated}, {"nov", 11, kAbbreviated}, {"dec", 12, kAbbreviated},
}};

constexpr std::array<Name, 17> kWeekdays = {{
    {"monday", 1, kFull},
    {"tuesday", 2, kFull},
    {"wednesday", 3, kFull},
    {"thursday", 4, kFull},
    {"friday", 5, kFull},
    {"saturday", 6, kFull},
    {"sunday", 7, kFull},
    {"mon", 1, kAbbreviated},
    {"tue", 2, kAbbreviated},
    {"tues", 2, kAbbreviated},
    {"wed", 3, kAbbreviated},
    {"thu", 4, kAbbreviated},
    {"thur", 4, kAbbreviated},
    {"thurs", 4, kAbbreviated},
    {"fri", 5, kAbbreviated},
    {"sat", 6, kAbbreviated},
    {"sun", 7, kAbbreviated},
}};

// The month or weekday whose name (any case) is the whole word at `pos`.
template <std::size_t N>
const Name* name_at(std::string_view text, std::size_t pos, const std::array<Name, N>& names) {
  std::size_t n = 0;
  while (n < 10 && pos + n < text.size() && is_alpha(text[pos + n])) ++n;
  if (n < 3 || n > 9 || alnum_at(text, pos + n)) return nullptr;
  for (const Name& name : names) {
    if (name.text.size() != n) continue;
    bool same = true;
    for (std::size_t k = 0; k < n && same; ++k) same = to_lower(text[pos + k]) == name.text[k];
    if (same) return &name;
  }
  return nullptr;
}

constexpr std::uint32_t letter_bit(char lower) {
  return std::uint32_t{1} << (lower - 'a');
}

bool digit_within(std::string_view text, std::size_t pos, std::size_t count) {
  const std::size_t end = std::min(text.size(), pos + count);
  for (std::size_t i = pos; i < end; ++i) {
    if (is_digit(text[i])) return true;
  }
  return false;
}

// How the date was written; decides between "rfc2822", "http-date" and "long-date".
struct TextualDate {
  std::size_t begin = 0;
  bool weekday = false;
  bool weekday_abbr3 = false;  // "Thu", as RFC 2822 writes it
  bool weekday_comma = false;
  bool day_first = false;      // "20 August 2026"
  bool day_decorated = false;  // "20th", "20th of"
  std::size_t day_len = 0;
  bool month_abbr3 = false;  // "Aug" without a dot
  bool dashed = false;       // RFC 850: "20-Aug-26"
  bool year_comma = false;   // "August 20, 2026"
  int year = 0;
  int month = 0;
  int day = 0;
};

// "20", "6", "20th", "1st" followed by a non-alphanumeric byte.
bool parse_day(std::string_view text, std::size_t pos, TextualDate& d, std::size_t& end) {
  std::size_t n = 0;
  while (digit_at(text, pos + n)) ++n;
  if (n < 1 || n > 2) return false;
  read_digits(text, pos, n, d.day);
  d.day_len = n;
  std::size_t i = pos + n;
  if (i + 1 < text.size() && is_alpha(text[i])) {
    const char a = to_lower(text[i]);
    const char b = to_lower(text[i + 1]);
    const bool suffix = (a == 's' && b == 't') || (a == 'n' && b == 'd') ||
                        (a == 'r' && b == 'd') || (a == 't' && b == 'h');
    if (!suffix) return false;
    d.day_decorated = true;
    i += 2;
  }
  if (alnum_at(text, i)) return false;
  end = i;
  return true;
}

// A month name at `pos` (an abbreviation may take a dot); returns the byte after it.
std::size_t parse_month(std::string_view text, std::size_t pos, TextualDate& d) {
  const Name* month = name_at(text, pos, kMonths);
  if (month == nullptr) return kNoPos;
  d.month = month->value;
  std::size_t i = pos + month->text.size();
  d.month_abbr3 = month->form == kAbbreviated && month->text.size() == 3;
  if (month->form == kAbbreviated && char_at(text, i, '.')) {
    d.month_abbr3 = false;
    ++i;
  }
  return i;
}

bool parse_year4(std::string_view text, std::size_t pos, TextualDate& d) {
  return read_digits(text, pos, 4, d.year) && !alnum_at(text, pos + 4);
}

// Month first: "August 20, 2026", "Aug. 20th 2026". `i` is at the month.
std::size_t parse_month_day_year(std::string_view text, std::size_t i, TextualDate& d) {
  if (i == kNoPos || !char_at(text, i, ' ')) return kNoPos;
  if (!parse_day(text, i + 1, d, i)) return kNoPos;
  if (char_at(text, i, ',')) {
    d.year_comma = true;
    ++i;
  }
  if (!char_at(text, i, ' ') || !parse_year4(text, i + 1, d)) return kNoPos;
  return i + 5;
}

// Day first: "20 August 2026", "20th of Aug, 2026", or RFC 850's "20-Aug-26".
std::size_t parse_day_month_year(std::string_view text, std::size_t i, TextualDate& d) {
  d.day_first = true;
  if (!parse_day(text, i, d, i)) return kNoPos;
  if (char_at(text, i, '-')) {
    d.dashed = true;
    const std::size_t month_end = parse_month(text, i + 1, d);
    if (month_end == kNoPos || !d.month_abbr3 || !char_at(text, month_end, '-')) return kNoPos;
    i = month_end + 1;
    std::size_t n = 0;
    while (digit_at(text, i + n)) ++n;
    if ((n != 2 && n != 4) || alnum_at(text, i + n)) return kNoPos;
    read_digits(text, i, n, d.year);
    // Two-digit years as RFC 9110 reads them: within 50 years of now, here fixed at 1970-2069.
    if (n == 2) d.year += d.year < 70 ? 2000 : 1900;
    return i + n;
  }
  if (!char_at(text, i, ' ')) return kNoPos;
  ++i;
  if (text.substr(i, 3) == "of ") {
    d.day_decorated = true;
    i += 3;
  }
  i = parse_month(text, i, d);
  if (i == kNoPos) return kNoPos;
  if (char_at(text, i, ',')) {
    d.year_comma = true;
    ++i;
  }
  if (!char_at(text, i, ' ') || !parse_year4(text, i + 1, d)) return kNoPos;
  return i + 5;
}

// asctime and `date`: "Thu Aug 20 14:33:07 2026", "Thu Aug  6 14:33:07 UTC 2026". `i` is
// after "Thu Aug ".
bool parse_asctime(std::string_view text, std::size_t i, TextualDate& d,
                   std::vector<Candidate>& out) {
  const bool padded = char_at(text, i, ' ');
  if (padded) ++i;
  std::size_t n = 0;
  while (digit_at(text, i + n)) ++n;
  if (n < 1 || n > 2 || (padded && n != 1) || !char_at(text, i + n, ' ')) return false;
  read_digits(text, i, n, d.day);
  ClockParse clock;
  if (!parse_clock(text, i + n + 1, ClockStyle::kExtended, clock) ||
      clock.time.second_pos == kNoPos) {
    return false;
  }
  std::size_t k = clock.end;
  const ZoneParse zone = parse_spaced_zone(text, k);
  if (zone.kind != ZoneKind::kNone) k = zone.end;
  if (!char_at(text, k, ' ') || !parse_year4(text, k + 1, d)) return false;
  if (!is_valid_date(d.year, d.month, d.day)) return false;
  // With a zone it is `date` output rather than the HTTP form.
  const char* kind = zone.kind == ZoneKind::kNone ? "http-date" : "long-date";
  out.push_back(make_timestamp(d.begin, k + 5, kind, clock.time));
  return true;
}

const char* classify(const TextualDate& d, const TimeTail& tail) {
  const TimeOfDay& time = tail.clock.time;
  const ZoneKind zone = tail.zone.kind;
  const bool rfc_time = tail.connector == Connector::kSpace && time.meridiem == Meridiem::kNone &&
                        time.hour_len == 2 && time.minute_pos != kNoPos &&
                        time.fraction_pos == kNoPos;
  const bool rfc_zone =
      zone == ZoneKind::kOffsetHhmm || zone == ZoneKind::kGmt || zone == ZoneKind::kRfc2822Name;
  // RFC 2822 section 3.3: [day-of-week ","] day month year hour ":" minute [":" second] zone.
  const bool rfc_date = d.day_first && !d.day_decorated && d.month_abbr3 && !d.year_comma &&
                        !d.dashed && (!d.weekday || (d.weekday_abbr3 && d.weekday_comma));
  if (rfc_date && rfc_time && rfc_zone) {
    // IMF-fixdate, the fixed-width RFC 2822 subset HTTP sends: "Thu, 20 Aug 2026 14:33:07 GMT".
    if (zone == ZoneKind::kGmt && d.weekday && d.day_len == 2 && time.second_pos != kNoPos) {
      return "http-date";
    }
    return "rfc2822";
  }
  // RFC 850: "Thursday, 20-Aug-26 14:33:07 GMT".
  if (d.dashed && d.weekday && !d.weekday_abbr3 && d.weekday_comma && rfc_time &&
      time.second_pos != kNoPos && zone == ZoneKind::kGmt) {
    return "http-date";
  }
  return "long-date";
}

}  // namespace

void detect_textual_dates(std::string_view text, const Token& token, std::vector<Candidate>& out) {
  const std::size_t pos = token.begin;
  TextualDate d;
  d.begin = pos;
  std::size_t i = pos;
  if (is_alpha(text[pos])) {
    // Most words are dismissed here: a name starts with one of these letters, and the day
    // follows within a few bytes ("Wednesday, September 20": 12 bytes after the weekday).
    constexpr std::uint32_t kFirstLetters =
        letter_bit('a') | letter_bit('d') | letter_bit('f') | letter_bit('j') | letter_bit('m') |
        letter_bit('n') | letter_bit('o') | letter_bit('s') | letter_bit('t') | letter_bit('w');
    if (token.size() < 3 || token.size() > 9 ||
        (letter_bit(to_lower(text[pos])) & kFirstLetters) == 0 ||
        !digit_within(text, token.end, 13)) {
      return;
    }
    if (const Name* weekday = name_at(text, pos, kWeekdays)) {
      d.weekday = true;
      i += weekday->text.size();
      d.weekday_abbr3 = weekday->form == kAbbreviated && weekday->text.size() == 3;
      if (weekday->form == kAbbreviated && char_at(text, i, '.')) {
        d.weekday_abbr3 = false;
        ++i;
      }
      if (char_at(text, i, ',')) {
        d.weekday_comma = true;
        ++i;
      }
      if (!char_at(text, i, ' ')) return;
      ++i;
    }
  } else if (token.size() > 4) {
    return;
  }

  std::size_t date_end = kNoPos;
  if (digit_at(text, i)) {
    date_end = parse_day_month_year(text, i, d);
  } else {
    const std::size_t month_end = parse_month(text, i, d);
    if (month_end == kNoPos) return;
    if (d.weekday && !d.weekday_comma && char_at(text, month_end, ' ') &&
        parse_asctime(text, month_end + 1, d, out)) {
      return;
    }
    date_end = parse_month_day_year(text, month_end, d);
  }
  if (date_end == kNoPos || !is_valid_date(d.year, d.month, d.day)) return;

  TimeTail tail;
  if (parse_time_after_date(text, date_end, tail)) {
    out.push_back(make_timestamp(pos, tail.end, classify(d, tail), tail.clock.time));
  } else {
    out.push_back(make_date(pos, date_end));
  }
}

}  // namespace prefixgate::canon::volatile_detail
