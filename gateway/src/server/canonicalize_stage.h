// The canonicalization stage: each rule off, observed (its changes counted, the body left as
// sent) or rewritten (the upstream receives the canonical body).
//
//   CanonicalizeStage stage(config.canonicalization);
//   StageResult r = stage.apply(parsed);
//   if (r.rewritten) forward(json::to_json(*r.body)); else forward(original bytes);
//   for (const canon::Change& c : r.changes) metrics.add({c.rule, mode_of(c.rule)});
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config.h"
#include "prefixgate/canonicalize/policy.h"

namespace prefixgate::gateway::server {

struct StageChange {
  std::string rule;
  RuleMode mode = RuleMode::kOff;
  std::string path;
  std::string detail;
};

struct StageResult {
  std::optional<json::Value> body;   // set when a rewrite rule changed the body
  std::vector<StageChange> changes;  // observed and rewritten
};

class CanonicalizeStage {
 public:
  explicit CanonicalizeStage(const CanonicalizationConfig& config);
  StageResult apply(const canon::ParsedRequest& request) const;
  RuleMode mode(std::string_view rule) const;

 private:
  CanonicalizationConfig config_;
  canon::CanonicalizationPolicy rewrite_;  // the rules in rewrite mode
  canon::CanonicalizationPolicy observe_;  // the rules in observe mode
  bool any_rewrite_ = false;
  bool any_observe_ = false;
};

}  // namespace prefixgate::gateway::server
