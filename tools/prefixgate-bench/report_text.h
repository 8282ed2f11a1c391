// Small text helpers shared by the reports of compare (report.cpp) and simulate
// (simulate_report.cpp): one printf-style number, and text escaped for an SVG chart.
//
//   report_text::fmt("%.1f%%", 81.5)          // "81.5%"
//   report_text::xml_escape("a<b & \"c\"")   // "a&lt;b &amp; &quot;c&quot;"
#pragma once

#include <cstdio>
#include <string>

namespace prefixgate::bench::report_text {

inline std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// For SVG text and attribute values.
inline std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace prefixgate::bench::report_text
