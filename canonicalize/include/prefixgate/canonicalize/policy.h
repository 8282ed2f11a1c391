// The canonicalization policy: rewrites that make a request's prefix bytes stable without
// changing what it means, each switchable and each reporting what it changed.
//
// Rules (name, default):
//   tool-json        on   tool/function definitions re-serialized in RFC 8785 form (key order
//                         and number spelling no longer depend on the client's JSON library)
//   tool-order       on   tools sorted by function name (tool order carries no meaning)
//   response-format  on   response_format json_schema in RFC 8785 form
//   timestamp        on   timestamps in system/developer messages and tool descriptions rounded
//                         down to `timestamp_granularity` (default one hour), format kept
//   whitespace       off  CRLF -> LF and trailing spaces/tabs removed, in every message's text
//
//   canon::CanonicalizationPolicy policy;               // defaults above
//   canon::CanonicalizeOutcome out = canon::canonicalize(request, policy);
//   for (const canon::Change& c : out.changes) log(c.rule, c.path, c.detail);
//   forward(json::to_json(out.body));
#pragma once

#include <chrono>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/request.h"

namespace prefixgate::canon {

struct CanonicalizationPolicy {
  bool tool_json = true;
  bool tool_order = true;
  bool response_format = true;
  bool timestamp = true;
  std::chrono::seconds timestamp_granularity{3600};
  bool whitespace = false;

  // Every rule off: the identity policy.
  static CanonicalizationPolicy none();
};

// Rule names as used in configuration, metrics and reports.
inline constexpr std::string_view kRuleToolJson = "tool-json";
inline constexpr std::string_view kRuleToolOrder = "tool-order";
inline constexpr std::string_view kRuleResponseFormat = "response-format";
inline constexpr std::string_view kRuleTimestamp = "timestamp";
inline constexpr std::string_view kRuleWhitespace = "whitespace";

struct Change {
  std::string rule;     // one of the kRule* names
  std::string path;     // JSON path of what changed: "tools", "messages[0].content"
  std::string detail;   // for a person: "3 timestamps rounded to 1h", "tools sorted by name"
  bool applied = true;  // false: an observed rule's change, reported but not made
};

struct CanonicalizeOutcome {
  json::Value body;             // the canonical body (equal to the input when nothing changed)
  std::vector<Change> changes;  // empty when the request was already canonical
};

// Applies `policy` to a validated request. Pure: the request is not modified.
CanonicalizeOutcome canonicalize(const ParsedRequest& request,
                                 const CanonicalizationPolicy& policy);

// One pass over a request the caller owns: the rules of `rewrite` change `request.body` in
// place, the rules of `observe` (not also in `rewrite`) only report what they would change
// (Change::applied false). Returns every change, applied or not, in body order. The parsed
// fields follow the body (messages' text, tools' order), so the request stays as
// parse_request_value() of its new body would make it. A gateway's per-request path: no copy
// of the body, no second parse, and a schema already in canonical form is recognized without
// being serialized.
std::vector<Change> canonicalize_in_place(ParsedRequest& request,
                                          const CanonicalizationPolicy& rewrite,
                                          const CanonicalizationPolicy& observe);
// Whose members the bytes in canonicalize_in_place's `source` are: the chat request's own, or
// those of the Messages or Responses request it was converted from (the client's `tools` there
// convert to the chat request's `tools`). The same bytes make different lists in each, so the
// memo keeps them apart.
enum class SourceShape { kChat, kMessages, kResponses };

// The same, given each top-level member's bytes as the client sent them (parse_request's
// `source`, or, for a converted request, the client request's with `shape` naming its API). A
// tool list this thread canonicalized recently under the same rules from the same bytes is
// taken from its memo instead of being processed again (agents send the same tools every turn),
// and request.tool_texts gets each tool list's JSON text, which rendering and the forwarded body
// reuse. The result is the same as without `source`.
std::vector<Change> canonicalize_in_place(ParsedRequest& request,
                                          const CanonicalizationPolicy& rewrite,
                                          const CanonicalizationPolicy& observe,
                                          std::span<const json::SourceMember> source,
                                          SourceShape shape = SourceShape::kChat);

}  // namespace prefixgate::canon
