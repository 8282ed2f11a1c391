// A time of day written without a date: "2:33 PM", "14:33:07", "at 14:33", "9:00-17:00".
//
// "H:MM" is also a ratio, a score, a Bible verse or a lap time ("16:10", "John 3:16"), so a
// 24-hour "H:MM" is only reported with evidence that it is a clock: AM/PM, seconds on a
// two-digit hour, a zone, a preceding word such as "at" or "time", or a preceding clock it
// forms a range with. One-digit minutes ("16:9", "3:1") are never a time.
#include <array>

#include "volatile_clock.h"
#include "volatile_internal.h"

namespace prefixgate::canon::volatile_detail {
namespace {

// Words after which "H:MM" is a clock: "at 14:33", "Current time: 14:33", "since 09:15".
constexpr std::array<std::string_view, 51> kClockWords = {
    "at",        "by",        "until",    "till",     "til",      "from",          "since",
    "before",    "after",     "around",   "about",    "approx",   "approximately", "time",
    "now",       "clock",     "today",    "tonight",  "tomorrow", "yesterday",     "morning",
    "afternoon", "evening",   "night",    "noon",     "updated",  "generated",     "created",
    "modified",  "timestamp", "start",    "starts",   "started",  "end",           "ends",
    "ended",     "due",       "deadline", "open",     "opens",    "closes",        "closed",
    "hours",     "between",   "sent",     "received", "posted",   "published",     "scheduled",
    "local",     "utc",
};

// Words that join two clocks into a range: "9:00 to 17:00", "between 9:00 and 17:00".
constexpr std::array<std::string_view, 4> kRangeWords = {"to", "and", "through", "thru"};

template <std::size_t N>
bool contains(const std::array<std::string_view, N>& words, std::string_view word) {
  for (std::string_view w : words) {
    if (w == word) return true;
  }
  return false;
}

// True when text[..end) ends with a clock: "9:00", "09:00:00", "9:00 am", "9 PM".
bool clock_ends_at(std::string_view text, std::size_t end) {
  std::size_t i = end;
  for (int spaces = 0; spaces < 3 && i > 0 && text[i - 1] == ' '; ++spaces) --i;
  bool meridiem = false;
  for (std::string_view suffix : {"a.m.", "p.m.", "am", "pm"}) {
    if (i < suffix.size()) continue;
    bool same = true;
    for (std::size_t k = 0; k < suffix.size() && same; ++k) {
      same = to_lower(text[i - suffix.size() + k]) == suffix[k];
    }
    if (same) {
      meridiem = true;
      i -= suffix.size();
      if (i > 0 && text[i - 1] == ' ') --i;
      break;
    }
  }
  if (i >= 4 && is_digit(text[i - 1]) && is_digit(text[i - 2]) && text[i - 3] == ':' &&
      is_digit(text[i - 4])) {
    return true;
  }
  return meridiem && i >= 1 && is_digit(text[i - 1]);
}

// The evidence before a "H:MM" at `pos` that it is a clock (see the file comment).
bool clock_context_before(std::string_view text, std::size_t pos) {
  std::size_t i = pos;
  std::size_t spaces = 0;
  while (i > 0 && text[i - 1] == ' ' && spaces < 3) {
    --i;
    ++spaces;
  }
  if (i == 0) return false;
  if (text[i - 1] == '@') return true;
  if (text[i - 1] == '-') return clock_ends_at(text, i - 1);
  if (i >= 3 && text.substr(i - 3, 3) == "\xE2\x80\x93") return clock_ends_at(text, i - 3);  // –
  if ((text[i - 1] == ':' || text[i - 1] == ',') && spaces > 0) --i;  // "Time: 14:33"
  std::size_t begin = i;
  while (begin > 0 && is_alpha(text[begin - 1]) && i - begin < 16) --begin;
  if (begin == i || (begin > 0 && is_alpha(text[begin - 1]))) return false;
  char word[16];
  const std::size_t len = i - begin;
  for (std::size_t k = 0; k < len; ++k) word[k] = to_lower(text[begin + k]);
  const std::string_view lowered(word, len);
  if (contains(kClockWords, lowered)) return true;
  return contains(kRangeWords, lowered) && clock_ends_at(text, begin);
}

}  // namespace

void detect_time_of_day(std::string_view text, const Token& token, std::vector<Candidate>& out) {
  const std::size_t pos = token.begin;
  if (token.size() > 4) return;  // "9", "14", "2pm", "11am"
  if (pos > 0) {
    // Inside a longer chain of numbers ("1.14:33", "a/12:30"), or a UTC offset ("+02:00").
    const char prev = text[pos - 1];
    if (prev == ':' || prev == '.' || prev == ',' || prev == '/' || prev == '+') return;
  }
  ClockParse clock;
  if (!parse_clock(text, pos, ClockStyle::kFree, clock)) return;
  const TimeOfDay& time = clock.time;
  ZoneParse zone;
  if (char_at(text, clock.end, 'Z') && time.meridiem == Meridiem::kNone) {
    zone = {ZoneKind::kZulu, clock.end + 1};
  } else {
    zone = parse_spaced_zone(text, clock.end);
  }
  const std::size_t end = zone.kind != ZoneKind::kNone ? zone.end : clock.end;
  if (alnum_at(text, end)) return;
  // Seconds alone are evidence only on a two-digit hour: "1:23:45" is as often a duration.
  const bool clock_shape = time.meridiem != Meridiem::kNone ||
                           (time.second_pos != kNoPos && time.hour_len == 2) ||
                           zone.kind != ZoneKind::kNone;
  if (!clock_shape && !clock_context_before(text, pos)) return;
  out.push_back(make_timestamp(pos, end, "time-of-day", time));
}

}  // namespace prefixgate::canon::volatile_detail
