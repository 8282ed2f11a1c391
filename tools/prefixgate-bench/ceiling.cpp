#include "ceiling.h"

#include <algorithm>
#include <numeric>

#include "prefixgate/canonicalize/anthropic.h"
#include "prefixgate/canonicalize/prompt.h"
#include "prefixgate/canonicalize/request.h"
#include "prefixgate/canonicalize/responses_api.h"

namespace prefixgate::bench {

std::size_t PrefixCeiling::add(std::span<const std::uint64_t> block_hashes,
                               std::size_t prompt_tokens, bool count) {
  const std::size_t lookable = prompt_tokens == 0 ? 0 : (prompt_tokens - 1) / block_size_;
  std::size_t matched = 0;
  while (matched < std::min(lookable, block_hashes.size()) &&
         blocks_.contains(block_hashes[matched])) {
    ++matched;
  }
  blocks_.insert(block_hashes.begin(), block_hashes.end());
  const std::size_t hit = matched * block_size_;
  if (count) {
    prompt_tokens_ += prompt_tokens;
    hit_tokens_ += hit;
  }
  return hit;
}

double PrefixCeiling::hit_rate() const {
  return prompt_tokens_ == 0
             ? 0
             : static_cast<double>(hit_tokens_) / static_cast<double>(prompt_tokens_);
}

std::vector<const Turn*> nominal_order(const Workload& workload) {
  std::vector<std::size_t> sessions(workload.sessions.size());
  std::iota(sessions.begin(), sessions.end(), 0);
  std::stable_sort(sessions.begin(), sessions.end(), [&](std::size_t a, std::size_t b) {
    return workload.sessions[a].arrival_s < workload.sessions[b].arrival_s;
  });
  std::vector<const Turn*> out;
  out.reserve(workload.requests());
  for (std::size_t t = 0;; ++t) {
    bool any = false;
    for (std::size_t s : sessions) {
      const Session& session = workload.sessions[s];
      if (t < session.turns.size()) {
        out.push_back(&session.turns[t]);
        any = true;
      }
    }
    if (!any) break;
  }
  return out;
}

Result<canon::ParsedRequest> parse_turn(const Turn& turn) {
  json::Value chat;
  if (turn.api == Api::kMessages) {
    auto m = canon::parse_messages_request(turn.body);
    if (!m) return m.error();
    chat = std::move(m->chat.body);
  } else if (turn.api == Api::kResponses) {
    auto r = canon::parse_responses_request(turn.body);
    if (!r) return r.error();
    chat = std::move(r->chat.body);
  } else {
    return canon::parse_request(turn.body, turn.api == Api::kCompletions
                                               ? canon::Endpoint::kCompletions
                                               : canon::Endpoint::kChatCompletions);
  }
  return canon::parse_request_value(std::move(chat), canon::Endpoint::kChatCompletions);
}

Result<CeilingResult> compute_ceiling(const Workload& workload, const CeilingModel& model,
                                      std::size_t warmup, std::size_t max_requests) {
  if (model.tokenizer == nullptr) {
    return make_error(ErrorCode::kInvalidValue, "ceiling: no tokenizer");
  }
  PrefixCeiling ceiling(model.block_size);
  const canon::PromptModel prompt_model{model.chat_format, model.tokenizer, model.block_size,
                                        model.model_id};
  std::size_t n = 0;
  for (const Turn* turn : nominal_order(workload)) {
    if (max_requests > 0 && n >= max_requests) break;
    const canon::Endpoint endpoint = turn->api == Api::kCompletions
                                         ? canon::Endpoint::kCompletions
                                         : canon::Endpoint::kChatCompletions;
    auto parsed = parse_turn(*turn);
    if (!parsed) return parsed.error();
    canon::ParsedRequest request = std::move(*parsed);
    const canon::CanonicalizeOutcome canonical = canon::canonicalize(request, model.policy);
    if (!canonical.changes.empty()) {
      auto again = canon::parse_request_value(canonical.body, endpoint);
      if (!again) return again.error();
      request = std::move(*again);
    }
    auto prompt = canon::analyze_prompt(request, prompt_model);
    if (!prompt) return prompt.error();
    ceiling.add(prompt->block_hashes, prompt->tokens.tokens.size(), n >= warmup);
    ++n;
  }
  return CeilingResult{ceiling.hit_rate(), ceiling.prompt_tokens(), ceiling.hit_tokens()};
}

}  // namespace prefixgate::bench
