// Unix epoch timestamps as standalone numbers: 10 digits of seconds ("1787236387", optionally
// with a fraction as time.time() prints it) or 13 digits of milliseconds ("1787236387123").
#include <cstdint>

#include "volatile_internal.h"

namespace prefixgate::canon::volatile_detail {
namespace {

// 2001-09-10T00:00:00Z, the first midnight with 10 digits of seconds, so a value rounded down
// within its day keeps its width; to 2100-01-01T00:00:00Z. Outside that, a 10- or 13-digit
// number is more likely a phone number, an order number or a count.
constexpr std::int64_t kMinEpochSeconds = 1000080000;
constexpr std::int64_t kMaxEpochSeconds = 4102444800;
constexpr std::int64_t kSecondsPerHour = 3600;
constexpr std::int64_t kSecondsPerDay = 86400;

// A byte before the number that makes it part of something else: a decimal or a thousands
// group ('.', ','), a phone number ('+'), a price ('$', or any non-ASCII currency sign), an
// issue or order number ('#'), a URL path segment ("/commit/1710016053", "/pull/1363683002").
bool glued_before(std::string_view text, std::size_t pos) {
  if (pos == 0) return false;
  const char c = text[pos - 1];
  if (c == '.' || c == ',' || c == '+' || c == '$' || c == '#' || c == '/') return true;
  if (static_cast<unsigned char>(c) >= 0x80) return true;
  return c == '-' && pos >= 2 && is_digit(text[pos - 2]);  // "555-1234567890"
}

// Ten-digit numbers in range that are well-known constants or placeholders, not times:
// INT32_MAX, 2^31, and the "1234567890" of examples.
bool is_famous_constant(std::int64_t value) {
  return value == 2147483647 || value == 2147483648 || value == 1234567890;
}

}  // namespace

void detect_epoch(std::string_view text, const Token& token, std::vector<Candidate>& out) {
  const std::size_t digits = token.size();
  if (token.classes != kHasDigit || (digits != 10 && digits != 13)) return;
  if (glued_before(text, token.begin)) return;
  std::int64_t value = 0;
  for (std::size_t i = token.begin; i < token.end; ++i) value = value * 10 + (text[i] - '0');
  const bool millis = digits == 13;
  const std::int64_t seconds = millis ? value / 1000 : value;
  if (seconds < kMinEpochSeconds || seconds >= kMaxEpochSeconds) return;
  if (!millis && is_famous_constant(value)) return;

  Candidate c;
  c.begin = token.begin;
  c.end = token.end;
  c.epoch_digits = digits;
  std::size_t end = token.end;
  if (!millis && char_at(text, end, '.') && digit_at(text, end + 1)) {
    std::size_t j = end + 1;
    while (digit_at(text, j) && j - (end + 1) < 9) {
      c.time.fraction_nonzero = c.time.fraction_nonzero || text[j] != '0';
      ++j;
    }
    c.time.fraction_pos = end + 1;
    c.time.fraction_len = j - (end + 1);
    end = j;
  }
  // "1787236387.1.2", "1787236387,5", "17872363871x": a version, a decimal, a word.
  if (alnum_at(text, end)) return;
  if ((char_at(text, end, '.') || char_at(text, end, ',')) && digit_at(text, end + 1)) return;
  c.end = end;
  c.rule = Rule::kTimestamp;
  c.kind = millis ? "epoch-millis" : "epoch-seconds";
  c.priority = kPriorityStructuredId;
  c.epoch = millis ? EpochUnit::kMillis : EpochUnit::kSeconds;
  // Same precision rule as a written time (time_severity).
  const bool sub_second = millis ? value % 1000 != 0 : c.time.fraction_nonzero;
  if (sub_second || seconds % kSecondsPerHour != 0) {
    c.severity = Severity::kError;
  } else {
    c.severity = seconds % kSecondsPerDay == 0 ? Severity::kInfo : Severity::kWarning;
  }
  out.push_back(c);
}

}  // namespace prefixgate::canon::volatile_detail
