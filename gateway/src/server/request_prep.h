// A client's completion request made ready to route and forward: parsed and validated, through
// the canonicalization stage, salted for an isolated tenant, with usage asked for on streams,
// and analyzed into the block hashes the upstream engine will cache it under.
//
//   auto prep = prepare_request(body, canon::Endpoint::kChatCompletions, tenant, ctx);
//   if (!prep) return reply_error(prep.error());           // 400 / 413, OpenAI-shaped
//   route(prep->block_hashes, prep->prompt_tokens); forward(prep->upstream_body);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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

struct PromptFinding {
  std::string rule;              // lint rule id
  std::string field;             // "messages[0].content"
  std::string excerpt;           // the matched text, as sent: redact before logging it
  std::size_t token_offset = 0;  // first token of the match in the rendered prompt
  std::size_t byte_offset = 0;   // first byte of the match in the rendered prompt
};

struct PreparedRequest {
  canon::ParsedRequest parsed;  // after canonicalization and salting
  std::string upstream_body;    // what the upstream receives
  bool stream = false;
  bool client_wants_usage = false;  // stream: the client asked for the usage chunk itself
  std::vector<std::uint64_t> block_hashes;
  std::size_t prompt_tokens = 0;
  std::size_t block_size = 16;
  std::vector<StageChange> changes;
  std::vector<PromptFinding> findings;  // lint findings (volatile content in the prompt)
  // The model's template refused the request and the model routes on its text instead
  // (TemplateErrorAction::kRouteOnText): the template's message.
  std::string template_error;
  std::string model;  // the registry entry's name ("" for the default), for metric labels
};

// The cache_salt an isolated tenant's requests carry ("" when not isolated).
std::string tenant_salt(const Tenant& tenant, std::string_view client_salt);

// The consistent_hash session key: the x-prefixgate-session header, else the body's `user`
// field, else the API key ("" when none: the policy falls back to least_load).
std::string session_key_for(std::string_view header, const json::Value& body,
                            std::string_view api_key);

// Errors: the request's (parse, limits), and the model's chat template refusing it when the
// model's template_errors is reject (400, as the engine would answer).
Result<PreparedRequest> prepare_request(std::string_view body, canon::Endpoint endpoint,
                                        const Tenant& tenant, const PrepOptions& options);

}  // namespace prefixgate::gateway::server
