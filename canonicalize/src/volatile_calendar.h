// Internal: calendar validation for the date detectors (proleptic Gregorian).
#pragma once

namespace prefixgate::canon::volatile_detail {

// Years a prompt's "today" plausibly carries. Wider ranges turn part numbers and codes into
// dates; narrower ones would miss historical timestamps that are still volatile in logs.
inline constexpr int kMinYear = 1900;
inline constexpr int kMaxYear = 2199;

inline bool is_leap_year(int year) {
  return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
}

inline int days_in_month(int year, int month) {
  constexpr int kDays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month == 2 && is_leap_year(year)) return 29;
  return kDays[month - 1];
}

inline bool is_valid_date(int year, int month, int day) {
  return year >= kMinYear && year <= kMaxYear && month >= 1 && month <= 12 && day >= 1 &&
         day <= days_in_month(year, month);
}

}  // namespace prefixgate::canon::volatile_detail
