// Test helpers: a readable list of detector findings, for assertion messages, and the check that
// a text has none.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/volatile.h"

namespace prefixgate::canon::test_support {

inline std::string describe(std::string_view text, const std::vector<VolatileSpan>& spans) {
  std::string out = "found:";
  for (const VolatileSpan& s : spans) {
    out += "\n  " + std::string(rule_id(s.rule)) + " " + severity_name(s.severity) + " " + s.kind +
           " '" + std::string(text.substr(s.begin, s.end - s.begin)) + "'";
  }
  return out;
}

// No detector finds anything in `text`.
inline void expect_no_volatile(std::string_view text) {
  const std::vector<VolatileSpan> spans = find_volatile(text);
  EXPECT_TRUE(spans.empty()) << "text: " << text << "\n" << describe(text, spans);
}

}  // namespace prefixgate::canon::test_support
