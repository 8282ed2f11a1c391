// Parsing a written time of day ("14:33:07.123", "2:33 PM", "T1433") and the zone after it.
#include "volatile_clock.h"

#include <array>

namespace prefixgate::canon::volatile_detail {
namespace {

// ISO 8601 offsets run from -12:00 to +14:00; a bigger "hour" is a range ("9:00-17:00").
constexpr int kMaxOffsetHours = 14;

// "am", "PM", "a.m.", "p.m" followed by a word boundary. A single dot ("am.") ends a sentence
// and is left out.
bool parse_meridiem(std::string_view text, std::size_t pos, Meridiem& meridiem, std::size_t& end) {
  if (pos >= text.size()) return false;
  const char c = to_lower(text[pos]);
  if (c != 'a' && c != 'p') return false;
  std::size_t i = pos + 1;
  const bool dotted = char_at(text, i, '.');
  if (dotted) ++i;
  if (i >= text.size() || to_lower(text[i]) != 'm') return false;
  ++i;
  if (dotted && char_at(text, i, '.')) ++i;
  if (alnum_at(text, i)) return false;
  meridiem = c == 'a' ? Meridiem::kAm : Meridiem::kPm;
  end = i;
  return true;
}

// Up to 9 digits after '.' or ','; more is not a time.
bool parse_fraction(std::string_view text, std::size_t i, TimeOfDay& time, std::size_t& end) {
  if (!(char_at(text, i, '.') || char_at(text, i, ',')) || !digit_at(text, i + 1)) return true;
  std::size_t j = i + 1;
  bool nonzero = false;
  while (digit_at(text, j) && j - (i + 1) < 9) {
    nonzero = nonzero || text[j] != '0';
    ++j;
  }
  if (digit_at(text, j)) return false;
  time.fraction_pos = i + 1;
  time.fraction_len = j - (i + 1);
  time.fraction_nonzero = nonzero;
  end = j;
  return true;
}

// ":MM" then optionally ":SS" and a fraction, after the hour digits ending at `i`.
bool parse_minutes_seconds(std::string_view text, std::size_t& i, TimeOfDay& time) {
  int minute = 0;
  if (!char_at(text, i, ':') || !read_digits(text, i + 1, 2, minute) || minute > 59 ||
      digit_at(text, i + 3)) {
    return true;  // hours only; the caller decides whether that is enough
  }
  time.minute_pos = i + 1;
  time.minute = minute;
  i += 3;
  int second = 0;
  if (!char_at(text, i, ':') || !read_digits(text, i + 1, 2, second) || second > 60 ||
      digit_at(text, i + 3)) {
    return true;
  }
  time.second_pos = i + 1;
  time.second = second;
  i += 3;
  return parse_fraction(text, i, time, i);
}

bool parse_basic(std::string_view text, std::size_t pos, TimeOfDay& time, std::size_t& end) {
  std::size_t n = 0;
  while (digit_at(text, pos + n)) ++n;
  if (n != 4 && n != 6) return false;
  int hour = 0, minute = 0, second = 0;
  read_digits(text, pos, 2, hour);
  read_digits(text, pos + 2, 2, minute);
  if (n == 6) read_digits(text, pos + 4, 2, second);
  if (hour > 23 || minute > 59 || second > 60) return false;
  time.hour_pos = pos;
  time.hour_len = 2;
  time.hour = hour;
  time.minute_pos = pos + 2;
  time.minute = minute;
  end = pos + n;
  if (n == 6) {
    time.second_pos = pos + 4;
    time.second = second;
    return parse_fraction(text, end, time, end);
  }
  return true;
}

struct NamedZone {
  std::string_view name;
  ZoneKind kind;
};

constexpr std::array<NamedZone, 34> kNamedZones = {{
    {"GMT", ZoneKind::kGmt},         {"UT", ZoneKind::kRfc2822Name},
    {"EST", ZoneKind::kRfc2822Name}, {"EDT", ZoneKind::kRfc2822Name},
    {"CST", ZoneKind::kRfc2822Name}, {"CDT", ZoneKind::kRfc2822Name},
    {"MST", ZoneKind::kRfc2822Name}, {"MDT", ZoneKind::kRfc2822Name},
    {"PST", ZoneKind::kRfc2822Name}, {"PDT", ZoneKind::kRfc2822Name},
    {"UTC", ZoneKind::kOtherName},   {"CET", ZoneKind::kOtherName},
    {"CEST", ZoneKind::kOtherName},  {"EET", ZoneKind::kOtherName},
    {"EEST", ZoneKind::kOtherName},  {"WET", ZoneKind::kOtherName},
    {"WEST", ZoneKind::kOtherName},  {"BST", ZoneKind::kOtherName},
    {"IST", ZoneKind::kOtherName},   {"JST", ZoneKind::kOtherName},
    {"KST", ZoneKind::kOtherName},   {"HKT", ZoneKind::kOtherName},
    {"SGT", ZoneKind::kOtherName},   {"AEST", ZoneKind::kOtherName},
    {"AEDT", ZoneKind::kOtherName},  {"ACST", ZoneKind::kOtherName},
    {"ACDT", ZoneKind::kOtherName},  {"AWST", ZoneKind::kOtherName},
    {"NZST", ZoneKind::kOtherName},  {"NZDT", ZoneKind::kOtherName},
    {"MSK", ZoneKind::kOtherName},   {"AKST", ZoneKind::kOtherName},
    {"AKDT", ZoneKind::kOtherName},  {"HST", ZoneKind::kOtherName},
}};

// "+HH:MM" or "+HHMM" after a space (a bare "+HH" there is too easily a phone prefix).
ZoneParse parse_spaced_offset(std::string_view text, std::size_t pos) {
  int hours = 0, minutes = 0;
  if (!read_digits(text, pos + 1, 2, hours) || hours > kMaxOffsetHours) return {};
  if (char_at(text, pos + 3, ':') && read_digits(text, pos + 4, 2, minutes) && minutes <= 59 &&
      !digit_at(text, pos + 6)) {
    return {ZoneKind::kOffsetColon, pos + 6};
  }
  if (read_digits(text, pos + 3, 2, minutes) && minutes <= 59 && !digit_at(text, pos + 5)) {
    return {ZoneKind::kOffsetHhmm, pos + 5};
  }
  return {};
}

// "+2", "-07:00", "+0530" right after "UTC" or "GMT".
std::size_t parse_name_offset(std::string_view text, std::size_t pos) {
  if (!(char_at(text, pos, '+') || char_at(text, pos, '-'))) return kNoPos;
  std::size_t i = pos + 1;
  std::size_t n = 0;
  while (digit_at(text, i + n)) ++n;
  if (n == 0 || n == 3 || n > 4) return kNoPos;
  int hours = 0;
  read_digits(text, i, n <= 2 ? n : 2, hours);
  if (hours > kMaxOffsetHours) return kNoPos;
  i += n;
  int minutes = 0;
  if (n <= 2 && char_at(text, i, ':') && read_digits(text, i + 1, 2, minutes) &&
      !digit_at(text, i + 3)) {
    i += 3;
  }
  return i;
}

// " (Central European Summer Time)" or " (UTC)" after a zone, as JavaScript and RFC 2822
// comments write it.
std::size_t skip_zone_comment(std::string_view text, std::size_t pos) {
  if (!char_at(text, pos, ' ') || !char_at(text, pos + 1, '(')) return pos;
  std::size_t i = pos + 2;
  while (i < text.size() && i - pos < 66 && (is_alpha(text[i]) || text[i] == ' ')) ++i;
  if (i - (pos + 2) < 2 || !char_at(text, i, ')')) return pos;
  return i + 1;
}

}  // namespace

bool parse_clock(std::string_view text, std::size_t pos, ClockStyle style, ClockParse& out) {
  TimeOfDay time;
  std::size_t i = pos;
  if (style == ClockStyle::kBasic) {
    if (!parse_basic(text, pos, time, i)) return false;
  } else {
    std::size_t n = 0;
    while (digit_at(text, pos + n)) ++n;
    const bool hour_ok = style == ClockStyle::kExtended ? n == 2 : (n == 1 || n == 2);
    if (!hour_ok) return false;
    read_digits(text, pos, n, time.hour);
    time.hour_pos = pos;
    time.hour_len = n;
    i = pos + n;
    if (!parse_minutes_seconds(text, i, time)) return false;
  }
  // More fields than a clock has: a time code ("01:02:03:04"), IPv6, a lap time ("1:30.5").
  if ((char_at(text, i, ':') || char_at(text, i, '.')) && digit_at(text, i + 1)) return false;

  if (style == ClockStyle::kFree) {
    const std::size_t gap = space_len(text, i);  // "2pm", "2 PM", "2\u202fPM"
    std::size_t meridiem_end = 0;
    if (parse_meridiem(text, i + gap, time.meridiem, meridiem_end)) {
      time.meridiem_pos = i + gap;
      i = meridiem_end;
    }
    if (time.meridiem != Meridiem::kNone) {
      if (time.hour < 1 || time.hour > 12) return false;
    } else if (time.minute_pos == kNoPos) {
      return false;  // "14" alone is a number, not a time
    }
  }
  if (time.hour > 23) return false;
  out.time = time;
  out.end = i;
  return true;
}

ZoneParse parse_iso_zone(std::string_view text, std::size_t pos) {
  if (char_at(text, pos, 'Z') || char_at(text, pos, 'z')) return {ZoneKind::kZulu, pos + 1};
  if (!(char_at(text, pos, '+') || char_at(text, pos, '-'))) return {};
  int hours = 0, minutes = 0;
  if (!read_digits(text, pos + 1, 2, hours) || hours > kMaxOffsetHours) return {};
  if (char_at(text, pos + 3, ':')) {
    if (!read_digits(text, pos + 4, 2, minutes) || minutes > 59 || digit_at(text, pos + 6)) {
      return {};
    }
    return {ZoneKind::kOffsetColon, pos + 6};
  }
  if (read_digits(text, pos + 3, 2, minutes)) {
    if (minutes > 59 || digit_at(text, pos + 5)) return {};
    return {ZoneKind::kOffsetHhmm, pos + 5};
  }
  if (digit_at(text, pos + 3)) return {};
  return {ZoneKind::kOffsetHh, pos + 3};
}

ZoneParse parse_spaced_zone(std::string_view text, std::size_t pos) {
  if (!char_at(text, pos, ' ')) return {};
  const std::size_t i = pos + 1;
  ZoneParse zone;
  if (char_at(text, i, '+') || char_at(text, i, '-')) {
    zone = parse_spaced_offset(text, i);
  } else {
    std::size_t n = 0;
    while (i + n < text.size() && is_upper(text[i + n]) && n < 5) ++n;
    const std::string_view name = text.substr(i, n);
    for (const NamedZone& named : kNamedZones) {
      if (named.name != name) continue;
      zone = {named.kind, i + n};
      if (name == "GMT" || name == "UTC") {
        const std::size_t offset_end = parse_name_offset(text, i + n);
        if (offset_end != kNoPos) zone = {ZoneKind::kOtherName, offset_end};
      }
      break;
    }
  }
  if (zone.kind == ZoneKind::kNone || alnum_at(text, zone.end)) return {};
  zone.end = skip_zone_comment(text, zone.end);
  return zone;
}

bool parse_time_after_date(std::string_view text, std::size_t pos, TimeTail& out) {
  struct Joiner {
    std::string_view text;
    Connector connector;
  };
  static constexpr std::array<Joiner, 5> kJoiners = {{
      {", at ", Connector::kOther},
      {" at ", Connector::kOther},
      {", ", Connector::kOther},
      {" @ ", Connector::kOther},
      {" ", Connector::kSpace},
  }};
  for (const Joiner& joiner : kJoiners) {
    if (text.substr(pos, joiner.text.size()) != joiner.text) continue;
    const std::size_t start = pos + joiner.text.size();
    ClockParse clock;
    if (!digit_at(text, start) || !parse_clock(text, start, ClockStyle::kFree, clock)) continue;
    ZoneParse zone;
    if (char_at(text, clock.end, 'Z') && clock.time.meridiem == Meridiem::kNone) {
      zone = {ZoneKind::kZulu, clock.end + 1};
    } else {
      zone = parse_spaced_zone(text, clock.end);
    }
    const std::size_t end = zone.kind != ZoneKind::kNone ? zone.end : clock.end;
    if (alnum_at(text, end)) continue;
    out = TimeTail{clock, zone, joiner.connector, end};
    return true;
  }
  return false;
}

Severity time_severity(const TimeOfDay& time) {
  if (time.minute != 0 || time.second != 0 || time.fraction_nonzero) return Severity::kError;
  return time.hour24() == 0 ? Severity::kInfo : Severity::kWarning;
}

Candidate make_timestamp(std::size_t begin, std::size_t end, const char* kind,
                         const TimeOfDay& time) {
  Candidate c;
  c.begin = begin;
  c.end = end;
  c.rule = Rule::kTimestamp;
  c.severity = time_severity(time);
  c.kind = kind;
  c.priority = kPriorityTimestamp;
  c.has_time = true;
  c.time = time;
  return c;
}

Candidate make_date(std::size_t begin, std::size_t end) {
  Candidate c;
  c.begin = begin;
  c.end = end;
  c.rule = Rule::kDate;
  c.severity = Severity::kInfo;
  c.kind = "date";
  c.priority = kPriorityDate;
  return c;
}

}  // namespace prefixgate::canon::volatile_detail
