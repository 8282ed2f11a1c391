// round_timestamps: every detected timestamp rewritten in its own format with its time of day
// rounded down, so a prompt that states "now" changes once per granularity instead of once
// per request.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <numeric>
#include <string>

#include "prefixgate/base/check.h"
#include "volatile_internal.h"

namespace prefixgate::canon {
namespace {

using volatile_detail::Candidate;
using volatile_detail::EpochUnit;
using volatile_detail::kNoPos;
using volatile_detail::Meridiem;
using volatile_detail::TimeOfDay;

constexpr std::int64_t kSecondsPerDay = 86400;

// The step a time showing `precision_s` (1, 60 or 3600) is rounded down to: the least multiple
// of the granularity the text can show. A 45-minute granularity rounds "2 PM" to 3-hour steps,
// not to 1:30 PM it cannot write, and rounding twice equals rounding once. Capped at a day.
std::int64_t step_for(std::int64_t granularity_s, std::int64_t precision_s) {
  return std::min(std::lcm(granularity_s, precision_s), kSecondsPerDay);
}

void append_padded(std::string& out, std::int64_t value, std::size_t width) {
  char digits[24];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, value);
  PG_DCHECK(ec == std::errc());
  const std::size_t n = static_cast<std::size_t>(end - digits);
  if (n < width) out.append(width - n, '0');
  out.append(digits, n);
}

// Copies text[from, to) to out and returns `to`.
std::size_t copy_until(std::string_view text, std::size_t from, std::size_t to, std::string& out) {
  out.append(text.substr(from, to - from));
  return to;
}

// The rounded text of a time of day, written into `out` (cleared first, so that one buffer serves
// every timestamp of a text without an allocation each).
void rewrite_clock(std::string_view text, const Candidate& c, std::int64_t granularity_s,
                   std::string& out) {
  const TimeOfDay& t = c.time;
  // A leap second (23:59:60) is rounded as 23:59:59 so it stays within its day.
  const std::int64_t original =
      std::min<std::int64_t>(t.hour24() * 3600 + t.minute * 60 + t.second, kSecondsPerDay - 1);
  const std::int64_t step = step_for(granularity_s, t.precision_s());
  const std::int64_t rounded = original / step * step;
  const std::int64_t hour24 = rounded / 3600;

  out.clear();
  std::size_t at = copy_until(text, c.begin, t.hour_pos, out);
  std::int64_t hour_written = hour24;
  if (t.meridiem != Meridiem::kNone) hour_written = hour24 % 12 == 0 ? 12 : hour24 % 12;
  append_padded(out, hour_written, t.hour_len);  // "2 PM" may become "12 AM": widths grow
  at = t.hour_pos + t.hour_len;
  if (t.minute_pos != kNoPos) {
    at = copy_until(text, at, t.minute_pos, out);
    append_padded(out, rounded / 60 % 60, 2);
    at += 2;
  }
  if (t.second_pos != kNoPos) {
    at = copy_until(text, at, t.second_pos, out);
    append_padded(out, rounded % 60, 2);
    at += 2;
  }
  if (t.fraction_pos != kNoPos) {
    at = copy_until(text, at, t.fraction_pos, out);
    out.append(t.fraction_len, '0');
    at += t.fraction_len;
  }
  if (t.meridiem_pos != kNoPos) {
    at = copy_until(text, at, t.meridiem_pos, out);
    const bool upper = volatile_detail::is_upper(text[t.meridiem_pos]);
    out += hour24 < 12 ? (upper ? 'A' : 'a') : (upper ? 'P' : 'p');
    at += 1;
  }
  copy_until(text, at, c.end, out);
}

// Whether rounding leaves a written time of day as it is, told without writing it: its value is
// already on a step and every field would be written back as it reads (no leap or out-of-range
// second or minute, no nonzero fraction, an hour its meridiem writes back). Most of a prompt's
// clock times are whole hours ("open 09:00-17:00") that an hourly granularity keeps.
bool clock_kept(const TimeOfDay& t, std::int64_t granularity_s) {
  if (t.minute >= 60 || t.second >= 60 || t.fraction_nonzero) return false;
  if (t.meridiem == Meridiem::kNone ? t.hour > 23 : t.hour < 1 || t.hour > 12) return false;
  const std::int64_t original = t.hour24() * 3600 + t.minute * 60 + t.second;
  return original % step_for(granularity_s, t.precision_s()) == 0;
}

// The rounded text of an epoch timestamp, written into `out` (cleared first).
void rewrite_epoch(std::string_view text, const Candidate& c, std::int64_t granularity_s,
                   std::string& out) {
  std::int64_t value = 0;
  for (std::size_t i = c.begin; i < c.begin + c.epoch_digits; ++i)
    value = value * 10 + (text[i] - '0');
  const bool millis = c.epoch == EpochUnit::kMillis;
  const std::int64_t seconds = millis ? value / 1000 : value;
  // Rounded from midnight UTC, like a written time, so a granularity that does not divide a
  // day restarts its steps every day.
  const std::int64_t step = step_for(granularity_s, 1);
  const std::int64_t second_of_day = seconds % kSecondsPerDay;
  const std::int64_t rounded = seconds - second_of_day + second_of_day / step * step;
  out.clear();
  append_padded(out, millis ? rounded * 1000 : rounded, 0);
  // The detector's range starts at a midnight with the full width, so the width is kept.
  PG_DCHECK(out.size() == c.epoch_digits);
  if (c.time.fraction_pos != kNoPos) {
    out += '.';
    out.append(c.time.fraction_len, '0');
  }
}

}  // namespace

namespace {

// Calls on_rounded(candidate, rounded text) for each timestamp whose text rounding changes, in
// order; round_timestamps and count_timestamps_to_round differ only in what they do with it.
template <class OnRounded>
void for_each_rounding(std::string_view text, std::int64_t granularity_s, OnRounded&& on_rounded) {
  thread_local std::string rounded;
  for (const Candidate& c : volatile_detail::scan(text)) {
    if (c.epoch != EpochUnit::kNone) {
      rewrite_epoch(text, c, granularity_s, rounded);
    } else if (c.has_time) {
      if (clock_kept(c.time, granularity_s)) {
        PG_DCHECK((rewrite_clock(text, c, granularity_s, rounded),
                   rounded == text.substr(c.begin, c.end - c.begin)),
                  "clock_kept() agrees with the rewrite");
        continue;
      }
      rewrite_clock(text, c, granularity_s, rounded);
    } else {
      continue;  // dates and identifiers are left as they are
    }
    if (rounded == text.substr(c.begin, c.end - c.begin)) continue;
    on_rounded(c, rounded);
  }
}

std::int64_t granularity_seconds(std::chrono::seconds granularity) {
  return std::min<std::int64_t>(granularity.count(), kSecondsPerDay);
}

}  // namespace

TimestampRounding round_timestamps(std::string_view text, std::chrono::seconds granularity) {
  TimestampRounding result;
  const std::int64_t granularity_s = granularity_seconds(granularity);
  if (granularity_s <= 0) {  // nothing to round to: the text is returned as it is
    result.text.assign(text);
    return result;
  }
  result.text.reserve(text.size());
  std::size_t copied = 0;
  for_each_rounding(text, granularity_s, [&](const Candidate& c, const std::string& rounded) {
    copy_until(text, copied, c.begin, result.text);
    result.text += rounded;
    copied = c.end;
    ++result.rewritten;
  });
  copy_until(text, copied, text.size(), result.text);
  return result;
}

std::size_t count_timestamps_to_round(std::string_view text, std::chrono::seconds granularity) {
  const std::int64_t granularity_s = granularity_seconds(granularity);
  if (granularity_s <= 0) return 0;
  std::size_t count = 0;
  for_each_rounding(text, granularity_s, [&](const Candidate&, const std::string&) { ++count; });
  return count;
}

}  // namespace prefixgate::canon
