// The canonicalization stage: each rule off, observed (its changes counted, the body left as
// sent) or rewritten (the upstream receives the canonical body).
//
//   CanonicalizeStage stage(config.canonicalization);
//   StageResult r = stage.apply(parsed);          // rewrites parsed.body in place
//   if (r.body_changed) forward(json::to_json(parsed.body)); else forward(original bytes);
//   for (const StageChange& c : r.changes) metrics.add({c.rule, rule_mode_name(c.mode)});
#pragma once

#include <span>
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
  bool body_changed = false;         // a rewrite rule changed the request's body
  std::vector<StageChange> changes;  // observed and rewritten
};

class CanonicalizeStage {
 public:
  explicit CanonicalizeStage(const CanonicalizationConfig& config);
  // One pass: rules in rewrite mode change `request.body` in place (its parsed fields follow),
  // rules in observe mode are reported only. `source` (the client's bytes of each top-level
  // member, when known; `shape`: whose members they are, for a request converted from another
  // API) lets a tool list sent before be taken from the thread's memo.
  StageResult apply(canon::ParsedRequest& request, std::span<const json::SourceMember> source = {},
                    canon::SourceShape shape = canon::SourceShape::kChat) const;
  RuleMode mode(std::string_view rule) const;

 private:
  CanonicalizationConfig config_;
  canon::CanonicalizationPolicy rewrite_;  // the rules in rewrite mode
  canon::CanonicalizationPolicy observe_;  // the rules in observe mode
  bool any_rule_ = false;
};

}  // namespace prefixgate::gateway::server
