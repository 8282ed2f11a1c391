// Internal: parsing a written time of day and its zone, shared by every timestamp detector.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "volatile_internal.h"

namespace prefixgate::canon::volatile_detail {

enum class ClockStyle : std::uint8_t {
  kExtended,  // ISO 8601 extended: HH[:MM[:SS[.fff]]], two-digit hour, no AM/PM
  kBasic,     // ISO 8601 basic: HHMM[SS[.fff]]
  kFree,      // prose and logs: H[H]:MM[:SS[.fff]] [AM|PM], or H[H] AM|PM
};

struct ClockParse {
  TimeOfDay time;
  std::size_t end = 0;  // one past the clock (and its AM/PM), before any zone
};

// Parses a time of day starting exactly at `pos` and validates its ranges (hour 0-23, or 1-12
// with AM/PM; minute 0-59; second 0-60). Rejects a clock that goes on with ":<digit>" or
// ".<digit>" where no fraction may follow (time codes, IPv6, "1:30.5"). Does not check the
// byte after the clock: callers parse a zone first, then require a word boundary.
bool parse_clock(std::string_view text, std::size_t pos, ClockStyle style, ClockParse& out);

enum class ZoneKind : std::uint8_t {
  kNone,
  kZulu,         // Z
  kOffsetColon,  // +02:00
  kOffsetHhmm,   // +0200
  kOffsetHh,     // +02
  kGmt,          // GMT
  kRfc2822Name,  // UT, EST, EDT, CST, CDT, MST, MDT, PST, PDT (RFC 2822 section 4.3)
  kOtherName,    // UTC, CET, JST, GMT+2, UTC-07:00, ...
};

struct ZoneParse {
  ZoneKind kind = ZoneKind::kNone;
  std::size_t end = 0;
};

// An ISO 8601 zone designator right after the time: Z, +HH:MM, +HHMM or +HH.
ZoneParse parse_iso_zone(std::string_view text, std::size_t pos);
// A zone one space after the time, as prose, RFC 2822 and `date` write it: "+0000", "-07:00",
// "GMT", "PST", "UTC+2", "GMT+0200 (Central European Summer Time)".
ZoneParse parse_spaced_zone(std::string_view text, std::size_t pos);

enum class Connector : std::uint8_t { kSpace, kOther };

struct TimeTail {
  ClockParse clock;
  ZoneParse zone;
  Connector connector = Connector::kSpace;
  std::size_t end = 0;
};

// A time of day written after a date: " 14:33", ", 2:33 PM", " at 14:33:07 UTC", " @ 9am".
// Requires a word boundary after it.
bool parse_time_after_date(std::string_view text, std::size_t pos, TimeTail& out);

}  // namespace prefixgate::canon::volatile_detail
