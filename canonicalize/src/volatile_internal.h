// Internal to the volatile-content detectors (volatile_*.cpp, timestamp_rounding.cpp): the
// candidate record every detector emits, the byte classes they share, and the entry points the
// scanner calls at each token.
//
// The scanner (volatile_scan.cpp) walks the text once, cutting it into tokens (maximal runs of
// ASCII letters and digits). Every detector is anchored at a token start, so a detector only
// runs where its format can begin, and most English words are dismissed after a byte or two.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/volatile.h"

namespace prefixgate::canon::volatile_detail {

inline constexpr std::size_t kNoPos = std::string_view::npos;

inline bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
inline bool is_upper(char c) {
  return c >= 'A' && c <= 'Z';
}
inline bool is_lower(char c) {
  return c >= 'a' && c <= 'z';
}
inline bool is_alpha(char c) {
  return is_upper(c) || is_lower(c);
}
inline bool is_alnum(char c) {
  return is_digit(c) || is_alpha(c);
}
inline bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
inline char to_lower(char c) {
  return is_upper(c) ? static_cast<char>(c - 'A' + 'a') : c;
}

inline bool digit_at(std::string_view s, std::size_t i) {
  return i < s.size() && is_digit(s[i]);
}
inline bool alnum_at(std::string_view s, std::size_t i) {
  return i < s.size() && is_alnum(s[i]);
}
inline bool char_at(std::string_view s, std::size_t i, char c) {
  return i < s.size() && s[i] == c;
}

// Reads exactly `count` digits at `i` (and no more than that many: the caller checks what
// follows when it matters). Returns false when any of them is missing.
inline bool read_digits(std::string_view s, std::size_t i, std::size_t count, int& value) {
  if (i + count > s.size()) return false;
  int v = 0;
  for (std::size_t k = i; k < i + count; ++k) {
    if (!is_digit(s[k])) return false;
    v = v * 10 + (s[k] - '0');
  }
  value = v;
  return true;
}

// True when a letter or digit ends right before `pos`, i.e. `pos` is inside a word. The letter
// of a JSON escape ("\n2026-08-20" in a raw request body) does not count: it is whitespace.
inline bool word_before(std::string_view s, std::size_t pos) {
  if (pos == 0 || !is_alnum(s[pos - 1])) return false;
  const char c = s[pos - 1];
  return !(pos >= 2 && s[pos - 2] == '\\' && (c == 'n' || c == 't' || c == 'r'));
}

// Byte length of one space-like character at `i`: ' ', U+00A0 or U+202F (the narrow no-break
// space ICU and JavaScript put between a time and "PM"); 0 when there is none.
inline std::size_t space_len(std::string_view s, std::size_t i) {
  if (i >= s.size()) return 0;
  if (s[i] == ' ') return 1;
  if (s.substr(i, 2) == "\xC2\xA0") return 2;
  if (s.substr(i, 3) == "\xE2\x80\xAF") return 3;
  return 0;
}

// Byte classes of a token, OR-ed over its bytes.
enum TokenClass : unsigned { kHasDigit = 1u, kHasUpper = 2u, kHasLower = 4u };

struct Token {
  std::size_t begin = 0;
  std::size_t end = 0;  // one past the last letter or digit
  unsigned classes = 0;
  std::size_t size() const { return end - begin; }
};

enum class Meridiem : std::uint8_t { kNone, kAm, kPm };

// Where a timestamp writes its time of day, so round_timestamps can rewrite it in place. For an
// epoch only the fraction fields are used.
struct TimeOfDay {
  std::size_t hour_pos = kNoPos;
  std::size_t hour_len = 0;           // 1 or 2 digits, as written
  std::size_t minute_pos = kNoPos;    // 2 digits; kNoPos when only the hour is written
  std::size_t second_pos = kNoPos;    // 2 digits
  std::size_t fraction_pos = kNoPos;  // the digits after '.' or ','
  std::size_t fraction_len = 0;
  std::size_t meridiem_pos = kNoPos;  // the 'a'/'p' of am, PM, p.m., ...
  int hour = 0;                       // as written: 1..12 with a meridiem, else 0..23
  int minute = 0;
  int second = 0;  // 0..60 (60: a leap second)
  bool fraction_nonzero = false;
  Meridiem meridiem = Meridiem::kNone;

  int hour24() const {
    if (meridiem == Meridiem::kNone) return hour;
    return hour % 12 + (meridiem == Meridiem::kPm ? 12 : 0);
  }
  // The finest unit the text shows, in seconds: 1, 60 or 3600.
  int precision_s() const {
    if (second_pos != kNoPos) return 1;
    return minute_pos != kNoPos ? 60 : 3600;
  }
};

enum class EpochUnit : std::uint8_t { kNone, kSeconds, kMillis };

// One recognised span before overlaps are resolved.
struct Candidate : VolatileHit {
  int priority = 0;  // breaks ties between overlapping spans of equal length: higher wins
  bool has_time = false;
  EpochUnit epoch = EpochUnit::kNone;
  std::size_t epoch_digits = 0;  // 10 or 13
  TimeOfDay time;
};

// Tie-break priorities: a structured format beats a heuristic one over the same bytes.
inline constexpr int kPriorityTimestamp = 5;
inline constexpr int kPriorityDate = 4;
inline constexpr int kPriorityStructuredId = 3;
inline constexpr int kPriorityHex = 2;
inline constexpr int kPriorityBase64 = 1;

// Severity of a time of day by the precision its digits show: minutes or seconds change every
// request (error); a whole hour changes hourly (warning); midnight changes daily (info), like a
// date. A time rounded by round_timestamps is therefore reported at its new, lower cost.
Severity time_severity(const TimeOfDay& time);

Candidate make_timestamp(std::size_t begin, std::size_t end, const char* kind,
                         const TimeOfDay& time);
Candidate make_date(std::size_t begin, std::size_t end);

// Detectors, each anchored at `token.begin` and appending what starts there to `out`.
void detect_iso_dates(std::string_view text, const Token& token, std::vector<Candidate>& out);
void detect_numeric_dates(std::string_view text, const Token& token, std::vector<Candidate>& out);
void detect_textual_dates(std::string_view text, const Token& token, std::vector<Candidate>& out);
void detect_time_of_day(std::string_view text, const Token& token, std::vector<Candidate>& out);
void detect_epoch(std::string_view text, const Token& token, std::vector<Candidate>& out);
void detect_structured_ids(std::string_view text, const Token& token, std::vector<Candidate>& out);
void detect_hex_nonce(std::string_view text, const Token& token, std::vector<Candidate>& out);
// Base64 runs cross token boundaries ('+', '/', '-', '_'), so this one is given the first
// token of a run and returns where the run ends; the scanner skips the run's other tokens.
std::size_t detect_base64_run(std::string_view text, std::size_t token_begin,
                              std::vector<Candidate>& out);

// Every detector over the whole text, overlaps resolved (longest wins): sorted by begin. The
// result is the thread's (memoized per text, volatile_scan.cpp) and lives until the thread's
// next scan: a caller that needs it longer copies it.
const std::vector<Candidate>& scan(std::string_view text);

}  // namespace prefixgate::canon::volatile_detail
