// Detectors of volatile content: the timestamps, dates and identifiers that change from one
// request to the next and so break a prompt's cacheable prefix.
//
//   for (const canon::VolatileSpan& s : canon::find_volatile(system_prompt)) {
//     // s.rule == Rule::kTimestamp, s.severity == Severity::kError, s.kind == "iso8601", ...
//   }
//   auto rounded = canon::round_timestamps(system_prompt, std::chrono::hours(1));
//
// Severity reflects how often the content changes, hence what it costs in cache hits:
//   error   - changes every request or minute (second/minute-precision times, epochs, ids);
//   warning - changes every hour (a time of hour precision);
//   info    - changes every day (a calendar date alone).
// The detectors are tuned against false positives: versions ("v2.0.1", "Python 3.11"), HTTP
// status codes, prices, phone numbers and a bare year are not reported.
//
// A timestamp's severity follows the precision its digits show, since text cannot tell
// "14:00 exactly" from "rounded to the hour": a non-zero minute, second or fraction is an error,
// a whole hour ("14:00", "2 PM", "2026-08-20T14") a warning, midnight ("00:00:00") info. So a
// prompt passed through round_timestamps(..., 1h) lints at warning level at most.
//
// A 24-hour "H:MM" alone is reported only with evidence that it is a clock (AM/PM, seconds, a
// zone, or a word such as "at", "since", "time" before it): ratios ("16:10"), scores and verses
// ("John 3:16") are not. Hex and base64 nonces are judged by how random they look and err
// towards silence (camelCase names, paths and model names are never nonces).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace prefixgate::canon {

enum class Rule { kTimestamp, kDate, kId };
enum class Severity { kInfo = 0, kWarning = 1, kError = 2 };

// "volatile-timestamp", "volatile-date", "volatile-id".
const char* rule_id(Rule rule);
// "info", "warning", "error".
const char* severity_name(Severity severity);

struct VolatileSpan {
  Rule rule;
  Severity severity;
  std::size_t begin = 0;  // byte offsets into the scanned text, [begin, end)
  std::size_t end = 0;
  // What was recognised: "iso8601", "rfc3339", "iso8601-basic", "rfc2822", "http-date",
  // "long-date", "numeric-datetime", "time-of-day", "date", "epoch-seconds", "epoch-millis",
  // "uuid", "ulid", "traceparent", "jwt", "provider-id", "hex-nonce", "base64-nonce".
  std::string kind;
};

// All volatile spans in `text`, sorted by begin, non-overlapping (the longest match wins).
std::vector<VolatileSpan> find_volatile(std::string_view text);

// A VolatileSpan as the detectors make it, its kind one of their static names: what the scanner
// finds and what a prompt memo keeps of it (prompt_memo.h), without a string to allocate.
struct VolatileHit {
  std::size_t begin = 0;
  std::size_t end = 0;
  Rule rule = Rule::kTimestamp;
  Severity severity = Severity::kError;
  const char* kind = "";
};

struct TimestampRounding {
  std::string text;           // the input with timestamps rounded down
  std::size_t rewritten = 0;  // how many timestamps changed
};

// Rounds every timestamp of a recognised format that carries a time of day down to a multiple
// of `granularity` (e.g. one hour: 14:33:07 -> 14:00:00), keeping each one's own format (ISO 8601
// stays ISO 8601, with its offset; RFC 2822 stays RFC 2822). Epoch seconds/millis are rounded
// too. Dates alone and identifiers are left as they are.
//
// Details:
//   - Multiples are counted from midnight of the timestamp's own day (UTC for epochs), so the
//     date, and with it any weekday, never changes. A granularity that does not divide a day
//     restarts each day (7 h: 00:00, 07:00, 14:00, 21:00); one day or more gives midnight.
//   - Fractional digits become zeros (".123" -> ".000"); 12-hour times keep AM/PM and its
//     spelling ("2:33 PM" -> "2:00 PM"; with one day "2:33 PM" -> "12:00 AM").
//   - A time is only rounded to what its format can show: "2 PM" under 45 minutes goes to the
//     least common multiple, 3 h ("12 PM"), not to an unwritable 1:30 PM. Rounding twice
//     equals rounding once.
//   - A granularity of zero or less rewrites nothing. `rewritten` counts timestamps whose text
//     changed.
TimestampRounding round_timestamps(std::string_view text, std::chrono::seconds granularity);

// round_timestamps(text, granularity).rewritten without building the rounded text: what a rule
// in observe mode reports.
std::size_t count_timestamps_to_round(std::string_view text, std::chrono::seconds granularity);

}  // namespace prefixgate::canon
