// Numeric calendar dates and the timestamps built on them: ISO 8601 / RFC 3339 extended
// ("2026-08-20T14:33:07Z", "2026-08-20 14:33:07.123+02:00"), ISO 8601 basic
// ("20260820T143307Z") and day/month/year forms ("20/08/2026 14:33", "08/20/2026 2:33 PM",
// "2026/08/20").
#include "volatile_calendar.h"
#include "volatile_clock.h"
#include "volatile_internal.h"

namespace prefixgate::canon::volatile_detail {
namespace {

// A date glued to a name by '-', '_', '.' or ':' is part of that name or of a longer number
// chain ("gpt-4o-2024-08-06", "v1.2026.08.20", "10.20.30.2026"), not a date the prompt states.
// After '/' an ISO date is a path segment ("/logs/2026-08-20/"), still volatile, but a
// slashed date there would be read out of a longer chain ("1/20/08/2026").
enum class AfterSlash { kAllowed, kRejected };

bool date_may_start(std::string_view text, std::size_t pos, AfterSlash after_slash) {
  if (word_before(text, pos)) return false;
  if (pos == 0) return true;
  const char c = text[pos - 1];
  return c != '-' && c != '_' && c != '.' && c != ':' &&
         (after_slash == AfterSlash::kAllowed || c != '/');
}

bool is_rfc3339_zone(ZoneKind kind) {
  return kind == ZoneKind::kZulu || kind == ZoneKind::kOffsetColon;
}

std::size_t count_digits(std::string_view text, std::size_t pos) {
  std::size_t n = 0;
  while (digit_at(text, pos + n)) ++n;
  return n;
}

// The strict ISO 8601 time after "YYYY-MM-DD": 'T' or one space, then HH[:MM[:SS[.f]]] and an
// attached designator ("Z", "+02:00") or a spaced zone (" UTC"). Returns false when absent.
bool parse_iso_time(std::string_view text, std::size_t date_end, ClockParse& clock, ZoneParse& zone,
                    std::size_t& end) {
  const bool t_sep = char_at(text, date_end, 'T') || char_at(text, date_end, 't');
  // With a space the minutes are required: "2026-08-20 14 apples" is not a time.
  const bool space_sep = char_at(text, date_end, ' ') && digit_at(text, date_end + 1) &&
                         digit_at(text, date_end + 2) && char_at(text, date_end + 3, ':');
  if (!t_sep && !space_sep) return false;
  if (!parse_clock(text, date_end + 1, ClockStyle::kExtended, clock)) return false;
  zone = parse_iso_zone(text, clock.end);
  if (zone.kind == ZoneKind::kNone) zone = parse_spaced_zone(text, clock.end);
  end = zone.kind != ZoneKind::kNone ? zone.end : clock.end;
  return !alnum_at(text, end);
}

}  // namespace

void detect_iso_dates(std::string_view text, const Token& token, std::vector<Candidate>& out) {
  const std::size_t pos = token.begin;
  if (token.classes != kHasDigit) {
    // ISO 8601 basic lives in one token: "20260820T143307Z".
    if (token.size() < 13 || text[pos + 8] != 'T' || count_digits(text, pos) != 8) return;
    if (!date_may_start(text, pos, AfterSlash::kAllowed)) return;
    int year = 0, month = 0, day = 0;
    read_digits(text, pos, 4, year);
    read_digits(text, pos + 4, 2, month);
    read_digits(text, pos + 6, 2, day);
    ClockParse clock;
    if (!is_valid_date(year, month, day) ||
        !parse_clock(text, pos + 9, ClockStyle::kBasic, clock)) {
      return;
    }
    const ZoneParse zone = parse_iso_zone(text, clock.end);
    const std::size_t end = zone.kind != ZoneKind::kNone ? zone.end : clock.end;
    if (!alnum_at(text, end)) out.push_back(make_timestamp(pos, end, "iso8601-basic", clock.time));
    return;
  }

  if (token.size() != 4 || !char_at(text, pos + 4, '-') ||
      !date_may_start(text, pos, AfterSlash::kAllowed))
    return;
  int year = 0, month = 0, day = 0;
  if (!read_digits(text, pos, 4, year) || !read_digits(text, pos + 5, 2, month) ||
      !char_at(text, pos + 7, '-') || !read_digits(text, pos + 8, 2, day) ||
      !is_valid_date(year, month, day)) {
    return;
  }
  const std::size_t date_end = pos + 10;
  if (digit_at(text, date_end)) return;

  ClockParse clock;
  ZoneParse zone;
  std::size_t iso_end = 0;
  const bool iso = parse_iso_time(text, date_end, clock, zone, iso_end);
  if (iso) {
    const bool rfc3339 = clock.time.second_pos != kNoPos && is_rfc3339_zone(zone.kind);
    out.push_back(make_timestamp(pos, iso_end, rfc3339 ? "rfc3339" : "iso8601", clock.time));
  }
  // A looser time after the date: "2026-08-20 at 2:33 PM", "2026-08-20, 14:33". It also
  // catches "2026-08-20 11:30 PM", where the strict parse stops before "PM": the longer wins.
  TimeTail tail;
  if (parse_time_after_date(text, date_end, tail) && (!iso || tail.end > iso_end)) {
    out.push_back(make_timestamp(pos, tail.end, "numeric-datetime", tail.clock.time));
  } else if (!iso && !alnum_at(text, date_end)) {
    out.push_back(make_date(pos, date_end));
  }
}

void detect_numeric_dates(std::string_view text, const Token& token, std::vector<Candidate>& out) {
  const std::size_t pos = token.begin;
  const std::size_t n = token.size();
  if (token.classes != kHasDigit || (n != 1 && n != 2 && n != 4) || pos + n >= text.size()) {
    return;
  }
  const char sep = text[pos + n];
  if (sep != '/' && sep != '.' && sep != '-') return;
  if (n == 4 && sep == '-') return;  // ISO 8601, detect_iso_dates
  if (!date_may_start(text, pos, AfterSlash::kRejected)) return;

  // Three fields: day/month/year or month/day/year (either reading may be the real one), or
  // year/month/day when the first field has four digits.
  int first = 0, second = 0, third = 0;
  read_digits(text, pos, n, first);
  const std::size_t second_pos = pos + n + 1;
  const std::size_t second_len = count_digits(text, second_pos);
  if (second_len < 1 || second_len > 2 || !char_at(text, second_pos + second_len, sep)) return;
  read_digits(text, second_pos, second_len, second);
  const std::size_t third_pos = second_pos + second_len + 1;
  const std::size_t third_len = count_digits(text, third_pos);
  if (n == 4 ? (third_len < 1 || third_len > 2) : third_len != 4) return;
  read_digits(text, third_pos, third_len, third);
  const std::size_t date_end = third_pos + third_len;
  if (alnum_at(text, date_end)) return;
  // "1.2.2026.5", "20/08/2026/3": a longer chain of numbers, not a date.
  if (date_end < text.size() &&
      (text[date_end] == '.' || text[date_end] == '/' || text[date_end] == '-' ||
       text[date_end] == ':') &&
      digit_at(text, date_end + 1)) {
    return;
  }
  const bool valid =
      n == 4 ? is_valid_date(first, second, third)
             : is_valid_date(third, second, first) || is_valid_date(third, first, second);
  if (!valid) return;

  TimeTail tail;
  if (parse_time_after_date(text, date_end, tail)) {
    out.push_back(make_timestamp(pos, tail.end, "numeric-datetime", tail.clock.time));
  } else {
    out.push_back(make_date(pos, date_end));
  }
}

}  // namespace prefixgate::canon::volatile_detail
