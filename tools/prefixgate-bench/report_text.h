// Small text helpers shared by the reports of compare (report.cpp), simulate
// (simulate_report.cpp) and soak (soak_report.cpp): one printf-style number, text escaped for an
// SVG chart, and a name -> count map as a JSON object.
//
//   report_text::fmt("%.1f%%", 81.5)          // "81.5%"
//   report_text::xml_escape("a<b & \"c\"")   // "a&lt;b &amp; &quot;c&quot;"
#pragma once

#include <cstddef>
#include <cstdio>
#include <map>
#include <string>

#include "prefixgate/canonicalize/json.h"

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

// {"name": count, ...} in the map's order.
inline json::Value counts_json(const std::map<std::string, std::size_t>& m) {
  json::Object o;
  for (const auto& [k, v] : m) o.push_back({k, static_cast<double>(v)});
  return o;
}

}  // namespace prefixgate::bench::report_text
