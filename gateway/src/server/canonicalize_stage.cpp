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
        any_rule_ = true;
        break;
      case RuleMode::kObserve:
        enable(observe_, rule);
        any_rule_ = true;
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

StageResult CanonicalizeStage::apply(canon::ParsedRequest& request,
                                     std::span<const json::SourceMember> source,
                                     canon::SourceShape shape) const {
  StageResult out;
  if (!any_rule_) return out;
  std::vector<canon::Change> changes =
      canon::canonicalize_in_place(request, rewrite_, observe_, source, shape);
  out.changes.reserve(changes.size());
  for (canon::Change& c : changes) {
    out.body_changed = out.body_changed || c.applied;
    out.changes.push_back({std::move(c.rule), c.applied ? RuleMode::kRewrite : RuleMode::kObserve,
                           std::move(c.path), std::move(c.detail)});
  }
  return out;
}

}  // namespace prefixgate::gateway::server
