// Where and why two versions of a prompt stop sharing a prefix.
//
// `prefixlint diff` and `prefixlint log` use this to explain a cache miss: the first differing
// byte, token and block of the rendered prompts, the field it lies in, its cause, how many
// prefix tokens it costs, and whether the canonicalization policy would have kept the prefix.
//
//   auto d = canon::compare_prompts(old_req, new_req, model, policy);
//   if (d && d->diverged) print(d->token_index, d->field, canon::cause_name(d->cause));
#pragma once

#include <cstddef>
#include <string>

#include "prefixgate/canonicalize/policy.h"
#include "prefixgate/canonicalize/prompt.h"

namespace prefixgate::canon {

enum class DivergenceCause {
  kNone,        // no divergence: equal, or one extends the other
  kTimestamp,   // a timestamp or date differs
  kId,          // a per-request identifier differs
  kKeyOrder,    // a tool/function definition serialized with another key order (same content)
  kToolOrder,   // the same tools listed in another order
  kWhitespace,  // only whitespace differs at the divergence
  kEdit,        // the content itself changed
};
// "none", "timestamp", "id", "key-order", "tool-order", "whitespace", "edit".
const char* cause_name(DivergenceCause cause);

struct Divergence {
  bool diverged = false;        // false when the prompts are equal or one is a prefix of the other
  std::size_t byte_offset = 0;  // first differing byte of the rendered prompts
  std::size_t token_index = 0;  // first differing token
  std::size_t block_index = 0;  // block holding that token
  std::string field;            // where the divergence lies in the new request
  DivergenceCause cause = DivergenceCause::kNone;
  std::string old_excerpt;  // a few bytes from the divergence on, in each version
  std::string new_excerpt;
  std::size_t common_prefix_tokens = 0;
  std::size_t new_stable_prefix_tokens = 0;  // tokens of the new prompt before its last user turn
  // Tokens the old prompt could have supplied from cache to the new one's stable prefix but did
  // not, because of the divergence: min(old length, new stable prefix) - common prefix. Zero
  // when nothing diverged.
  std::size_t prefix_tokens_lost = 0;
  // The same comparison after canonicalizing both requests with the policy.
  std::size_t canonical_common_prefix_tokens = 0;
  bool canonicalization_keeps_prefix = false;  // canonical forms share the new stable prefix
};

// Errors: a request the model's chat template refuses (analyze_prompt's).
Result<Divergence> compare_prompts(const ParsedRequest& old_request,
                                   const ParsedRequest& new_request, const PromptModel& model,
                                   const CanonicalizationPolicy& policy,
                                   const ChatRenderOptions& options = {});

// Compares two already-analyzed prompts without the canonicalization pass (its fields are
// left zero): for callers that compare many pairs and canonicalize themselves.
Divergence compare_analyzed(const ParsedRequest& old_request, const AnalyzedPrompt& old_prompt,
                            const ParsedRequest& new_request, const AnalyzedPrompt& new_prompt);

}  // namespace prefixgate::canon
