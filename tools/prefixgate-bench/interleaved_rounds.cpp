#include "interleaved_rounds.h"

#include "percentiles.h"

namespace prefixgate::bench {

void InterleavedRounds::add(const std::string& target, std::map<std::string, double> values) {
  if (rounds_.empty() || rounds_.back().contains(target)) rounds_.emplace_back();
  rounds_.back()[target] = std::move(values);
}

InterleavedRounds::Summary InterleavedRounds::summary(const std::string& target,
                                                      const std::string& metric,
                                                      const std::string& baseline) const {
  const auto value = [&](const auto& round, const std::string& name) -> const double* {
    const auto run = round.find(name);
    if (run == round.end()) return nullptr;
    const auto v = run->second.find(metric);
    return v == run->second.end() ? nullptr : &v->second;
  };
  Summary s;
  std::vector<double> differences, ratios;
  for (const auto& round : rounds_) {
    const double* v = value(round, target);
    if (v == nullptr) continue;
    ++s.rounds;
    s.by_round.push_back(*v);
    const double* base = value(round, baseline);
    if (base == nullptr) continue;
    differences.push_back(*v - *base);
    if (*base != 0) ratios.push_back(*v / *base);
  }
  s.median = median(s.by_round);
  s.minus_baseline = median(differences);
  s.over_baseline = median(ratios);
  return s;
}

}  // namespace prefixgate::bench
