// round_timestamps: every detected timestamp rewritten in its own format with its time of day
// rounded down, so a prompt that states "now" changes once per granularity instead of once
// per request.
#include <algorithm>
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
  const std::string digits = std::to_string(value);
  if (digits.size() < width) out.append(width - digits.size(), '0');
  out += digits;
}

// Copies text[from, to) to out and returns `to`.
std::size_t copy_until(std::string_view text, std::size_t from, std::size_t to, std::string& out) {
  out.append(text.substr(from, to - from));
  return to;
}

std::string rewrite_clock(std::string_view text, const Candidate& c, std::int64_t granularity_s) {
  const TimeOfDay& t = c.time;
  // A leap second (23:59:60) is rounded as 23:59:59 so it stays within its day.
  const std::int64_t original =
      std::min<std::int64_t>(t.hour24() * 3600 + t.minute * 60 + t.second, kSecondsPerDay - 1);
  const std::int64_t step = step_for(granularity_s, t.precision_s());
  const std::int64_t rounded = original / step * step;
  const std::int64_t hour24 = rounded / 3600;

  std::string out;
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
  return out;
}

std::string rewrite_epoch(std::string_view text, const Candidate& c, std::int64_t granularity_s) {
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
  std::string out = std::to_string(millis ? rounded * 1000 : rounded);
  // The detector's range starts at a midnight with the full width, so the width is kept.
  PG_DCHECK(out.size() == c.epoch_digits);
  if (c.time.fraction_pos != kNoPos) {
    out += '.';
    out.append(c.time.fraction_len, '0');
  }
  return out;
}

}  // namespace

namespace {

// Calls on_rounded(candidate, rounded text) for each timestamp whose text rounding changes, in
// order; round_timestamps and count_timestamps_to_round differ only in what they do with it.
template <class OnRounded>
void for_each_rounding(std::string_view text, std::int64_t granularity_s, OnRounded&& on_rounded) {
  for (const Candidate& c : volatile_detail::scan(text)) {
    std::string rounded;
    if (c.epoch != EpochUnit::kNone) {
      rounded = rewrite_epoch(text, c, granularity_s);
    } else if (c.has_time) {
      rounded = rewrite_clock(text, c, granularity_s);
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
