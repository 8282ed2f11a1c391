#include "server/canonicalize_stage.h"

namespace prefixgate::gateway::server {
namespace {

void enable(canon::CanonicalizationPolicy& p, std::string_view rule) {
  if (rule == canon::kRuleToolJson) p.tool_json = true;
  if (rule == canon::kRuleToolOrder) p.tool_order = true;
  if (rule == canon::kRuleResponseFormat) p.response_format = true;
  if (rule == canon::kRuleTimestamp) p.timestamp = true;
  if (rule == canon::kRuleWhitespace) p.whitespace = true;
}

}  // namespace

CanonicalizeStage::CanonicalizeStage(const CanonicalizationConfig& config)
    : config_(config),
      rewrite_(canon::CanonicalizationPolicy::none()),
      observe_(canon::CanonicalizationPolicy::none()) {
  rewrite_.timestamp_granularity = config.timestamp_granularity;
  observe_.timestamp_granularity = config.timestamp_granularity;
  for (std::string_view rule :
       {canon::kRuleToolJson, canon::kRuleToolOrder, canon::kRuleResponseFormat,
        canon::kRuleTimestamp, canon::kRuleWhitespace}) {
    switch (mode(rule)) {
      case RuleMode::kRewrite:
        enable(rewrite_, rule);
        any_rewrite_ = true;
        break;
      case RuleMode::kObserve:
        enable(observe_, rule);
        any_observe_ = true;
        break;
      case RuleMode::kOff: break;
    }
  }
}

RuleMode CanonicalizeStage::mode(std::string_view rule) const {
  if (rule == canon::kRuleToolJson) return config_.tool_json;
  if (rule == canon::kRuleToolOrder) return config_.tool_order;
  if (rule == canon::kRuleResponseFormat) return config_.response_format;
  if (rule == canon::kRuleTimestamp) return config_.timestamp;
  if (rule == canon::kRuleWhitespace) return config_.whitespace;
  return RuleMode::kOff;
}

StageResult CanonicalizeStage::apply(const canon::ParsedRequest& request) const {
  StageResult out;
  const auto record = [&](const std::vector<canon::Change>& changes) {
    for (const canon::Change& c : changes) {
      out.changes.push_back({c.rule, mode(c.rule), c.path, c.detail});
    }
  };
  if (any_observe_) record(canon::canonicalize(request, observe_).changes);
  if (any_rewrite_) {
    canon::CanonicalizeOutcome rewritten = canon::canonicalize(request, rewrite_);
    if (!rewritten.changes.empty()) {
      record(rewritten.changes);
      out.body = std::move(rewritten.body);
    }
  }
  return out;
}

}  // namespace prefixgate::gateway::server
