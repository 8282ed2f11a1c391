// Test helper: a readable list of detector findings, for assertion messages.
#pragma once

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

}  // namespace prefixgate::canon::test_support
