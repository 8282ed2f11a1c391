// What `prefixlint log` computes from a traffic log, shared by its text, JSON and HTML outputs.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace prefixgate::lint {

struct Totals {
  std::size_t requests = 0;
  std::size_t prompt_tokens = 0;
  std::size_t hit_tokens = 0;  // as sent
  std::size_t canonical_hit_tokens = 0;
};

struct CauseStats {
  std::size_t requests = 0;
  std::size_t tokens_lost = 0;
  std::size_t fixed_by_canonicalization = 0;
  std::string example;  // "line 17, messages[0].content: "old..." -> "new...""
};

// One request of the log, in order: for the report's charts over time and its worst requests.
struct RequestOutcome {
  std::size_t line = 0;
  std::string timestamp;  // from the log envelope, "" when none
  std::string tenant;
  std::size_t prompt_tokens = 0;
  std::size_t hit_tokens = 0;
  std::size_t canonical_hit_tokens = 0;
  std::string cause;  // "" when the request kept its whole stable prefix
  std::size_t tokens_lost = 0;
  bool fixed_by_canonicalization = false;
};

struct LogReport {
  std::string file;
  std::size_t block_size = 0;
  Totals all;
  std::map<std::string, Totals> tenants;
  std::map<std::string, CauseStats> causes;  // by cause name
  std::vector<RequestOutcome> requests;
};

inline double ratio(std::size_t a, std::size_t b) {
  return b == 0 ? 0.0 : static_cast<double>(a) / static_cast<double>(b);
}

// Causes, most requests first.
std::vector<std::pair<std::string, CauseStats>> causes_by_count(const LogReport& r);

// A self-contained HTML page (inline CSS and SVG, nothing fetched): the ceilings as sent and
// canonicalized, both over the log, divergence causes over the log, top offenders, tenants.
std::string log_html(const LogReport& r);

}  // namespace prefixgate::lint
