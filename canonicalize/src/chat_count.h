// A count in a chat reply (a tool call's index, a number of tokens) as the replies read it.
#pragma once

#include <cstddef>
#include <limits>

namespace prefixgate::canon {

// A positive number's whole part; 0 for anything else. A number past what size_t holds reads as
// its largest value, where a plain cast would be undefined.
inline std::size_t chat_count(double x) {
  if (!(x > 0)) return 0;
  constexpr double kPastLargest = 18446744073709551616.0;  // 2^64
  if (x >= kPastLargest) return std::numeric_limits<std::size_t>::max();
  return static_cast<std::size_t>(x);
}

}  // namespace prefixgate::canon
