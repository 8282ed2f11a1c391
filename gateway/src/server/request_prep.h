// A client's completion request made ready to route and forward: parsed and validated, through
// the canonicalization stage, salted for an isolated tenant, with usage asked for on streams,
// and analyzed into the block hashes the upstream engine will cache it under. A Messages or
// Responses request (agent_prep.cpp) goes the same way as its Chat Completions equivalent
// (canonicalize/'s chat_conversion.h), and keeps its own body, canonicalized alike, for
// upstreams that serve its API natively.
//
//   auto prep = prepare_request(body, canon::Api::kChatCompletions, tenant, ctx);
//   if (!prep) return reply_error(prep.error());           // 400 / 413, in the API's shape
//   route(prep->block_hashes, prep->prompt_tokens); forward(prep->upstream_body());
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/chat_conversion.h"
#include "prefixgate/canonicalize/json_splice.h"
#include "prefixgate/canonicalize/request.h"
#include "prefixgate/serving/metrics.h"
#include "server/canonicalize_stage.h"
#include "server/model_registry.h"

namespace prefixgate::gateway::server {

struct Tenant {
  std::string name;  // "" = no tenant
  bool isolate = false;
};

struct PrepOptions {
  const CanonicalizeStage* stage = nullptr;
  const ModelRegistry* models = nullptr;
  canon::RequestLimits limits;
  bool lint = false;  // collect volatile-content findings (for rules in observe mode)
  // Requests a model's chat template refused, by model and what was done (may be null).
  serving::CounterFamily* template_errors = nullptr;
};

// One lint finding of a request, as PromptFindings gives it: views of the findings' own text.
struct PromptFinding {
  std::string_view rule;         // lint rule id (canon::rule_id: static text)
  std::string_view field;        // "messages[0].content"
  std::string_view excerpt;      // the matched text, as sent: redact before logging it
  std::size_t token_offset = 0;  // first token of the match in the rendered prompt
  std::size_t byte_offset = 0;   // first byte of the match in the rendered prompt
};

// A request's lint findings (volatile content in its prompt), their fields and excerpts kept in
// one text: a system prompt with a date and a time found on every request costs that text and
// the list, not two strings a finding. Read by index or in order; each finding is a view valid
// while the list is unchanged.
class PromptFindings {
 public:
  void add(std::string_view rule, std::string_view field, std::string_view excerpt,
           std::size_t token_offset, std::size_t byte_offset);
  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  PromptFinding operator[](std::size_t i) const {
    const Item& item = items_[i];
    const std::string_view text = text_;
    return PromptFinding{.rule = item.rule,
                         .field = text.substr(item.field_at, item.field_size),
                         .excerpt = text.substr(item.field_at + item.field_size, item.excerpt_size),
                         .token_offset = item.token_offset,
                         .byte_offset = item.byte_offset};
  }
  PromptFinding front() const { return (*this)[0]; }
  std::string_view rule(std::size_t i) const { return items_[i].rule; }

  class Iterator {
   public:
    Iterator(const PromptFindings& list, std::size_t at) : list_(&list), at_(at) {}
    PromptFinding operator*() const { return (*list_)[at_]; }
    Iterator& operator++() {
      ++at_;
      return *this;
    }
    bool operator==(const Iterator& other) const { return at_ == other.at_; }

   private:
    const PromptFindings* list_;
    std::size_t at_;
  };
  Iterator begin() const { return {*this, 0}; }
  Iterator end() const { return {*this, items_.size()}; }

 private:
  struct Item {
    std::string_view rule;
    std::size_t field_at = 0;  // in text_, the field, then the excerpt right after it
    std::size_t field_size = 0;
    std::size_t excerpt_size = 0;
    std::size_t token_offset = 0;
    std::size_t byte_offset = 0;
  };
  std::vector<Item> items_;
  std::string text_;
};

// What a Messages or Responses request keeps for its reply and for native upstreams.
struct AgentRequestInfo {
  // The client's body, canonicalized and salted as the chat one; refers to the client's body.
  json::SplicedJson native_body;
  std::string model;                        // as the client named it
  std::vector<std::string> stop_sequences;  // Messages
  json::Object responses_echo;              // Responses: the fields a response repeats
  std::size_t breakpoint_tokens = 0;        // prompt tokens up to the last cache breakpoint
};

struct PreparedRequest {
  canon::Api api = canon::Api::kChatCompletions;  // the client's API
  canon::ParsedRequest parsed;  // after canonicalization and salting (the chat equivalent)
  // What an upstream of the chat API receives. Its unchanged members are the client's bytes,
  // the large ones not copied (json_splice.h): valid while the body prepare_request() read is.
  // For a Messages or Responses request it is written from `parsed` when first asked for
  // (defer_upstream_body): most upstreams take those APIs as sent (agent.native_body), and
  // writing a long conversation's chat equivalent on every request was most of the cost of
  // preparing it.
  json::SplicedJson& upstream_body();
  void defer_upstream_body() { upstream_body_pending_ = true; }
  // The chat body, to be set now (a chat or completions request's).
  json::SplicedJson& upstream_body_to_set() {
    upstream_body_pending_ = false;
    return upstream_body_;
  }
  bool stream = false;
  bool client_wants_usage = false;  // stream: the client asked for the usage chunk itself
  std::vector<std::uint64_t> block_hashes;
  std::size_t prompt_tokens = 0;
  std::size_t block_size = 16;
  std::vector<StageChange> changes;
  PromptFindings findings;  // lint findings (volatile content in the prompt)
  // The model's template refused the request and the model routes on its text instead
  // (TemplateErrorAction::kRouteOnText): the template's message.
  std::string template_error;
  std::string model;       // the registry entry's name ("" for the default), for metric labels
  AgentRequestInfo agent;  // api kMessages or kResponses

 private:
  json::SplicedJson upstream_body_;
  bool upstream_body_pending_ = false;
};

// The cache_salt an isolated tenant's requests carry ("" when not isolated).
std::string tenant_salt(const Tenant& tenant, std::string_view client_salt);

// The consistent_hash session key: the x-prefixgate-session header, else the body's `user`
// field, else the API key ("" when none: the policy falls back to least_load).
std::string session_key_for(std::string_view header, const json::Value& body,
                            std::string_view api_key);

// Errors: the request's (parse, limits), and the model's chat template refusing it when the
// model's template_errors is reject (400, as the engine would answer).
// `readable_past_end`: bytes of the body's buffer past its end (serving::readable_past_end);
// with the JSON parser's padding there the body is parsed where it lies.
Result<PreparedRequest> prepare_request(std::string_view body, canon::Api api, const Tenant& tenant,
                                        const PrepOptions& options,
                                        std::size_t readable_past_end = 0);
// prepare_request() for kMessages and kResponses (agent_prep.cpp).
Result<PreparedRequest> prepare_agent_request(std::string_view body, canon::Api api,
                                              const Tenant& tenant, const PrepOptions& options,
                                              std::size_t readable_past_end = 0);

// The steps after parsing, shared by both: the canonicalization stage over out.parsed (returns
// whether it rewrote the body), the tenant's salt (whether it changed it), and rendering,
// tokenizing, hashing and linting (`conversion`: the client's request a chat one came from,
// for its breakpoints and its field names; nullptr for a chat request).
bool apply_stage(PreparedRequest& out, const PrepOptions& options,
                 std::span<const json::SourceMember> source = {},
                 canon::SourceShape shape = canon::SourceShape::kChat);
bool apply_salt(PreparedRequest& out, const Tenant& tenant);
Status analyze_request(PreparedRequest& out, const PrepOptions& options,
                       const canon::ChatConversion* conversion);

}  // namespace prefixgate::gateway::server
