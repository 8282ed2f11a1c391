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

struct TimestampRounding {
  std::string text;           // the input with timestamps rounded down
  std::size_t rewritten = 0;  // how many timestamps changed
};

// Rounds every timestamp of a recognised format that carries a time of day down to a multiple
// of `granularity` (e.g. one hour: 14:33:07 -> 14:00:00), keeping each one's own format (ISO 8601
// stays ISO 8601, with its offset; RFC 2822 stays RFC 2822). Epoch seconds/millis are rounded
// too. Dates alone and identifiers are left as they are.
TimestampRounding round_timestamps(std::string_view text, std::chrono::seconds granularity);

}  // namespace prefixgate::canon
