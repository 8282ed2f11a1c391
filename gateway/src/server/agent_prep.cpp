// A Messages or Responses request made ready to route: converted into its Chat Completions
// equivalent, which goes through the canonicalization stage, the tenant's salt and the analysis
// as a chat request does; what the stage rewrote is carried back into the client's own body
// (canon::write_back), so an upstream that serves the API natively renders the same tokens.
#include "prefixgate/canonicalize/anthropic.h"
#include "prefixgate/canonicalize/responses_api.h"
#include "prefixgate/canonicalize/responses_reply.h"
#include "server/request_prep.h"

namespace prefixgate::gateway::server {
namespace {

struct Converted {
  json::Value body;
  canon::ChatConversion chat;
};

Result<Converted> convert(std::string_view body, canon::Api api, const PrepOptions& options,
                          AgentRequestInfo& info) {
  if (api == canon::Api::kMessages) {
    auto m = canon::parse_messages_request(body, options.limits);
    if (!m) return m.error();
    info.model = std::move(m->model);
    info.stop_sequences = std::move(m->stop_sequences);
    return Converted{std::move(m->body), std::move(m->chat)};
  }
  auto r = canon::parse_responses_request(body, options.limits);
  if (!r) return r.error();
  info.model = std::move(r->model);
  info.responses_echo = canon::responses_echo(r->body);
  return Converted{std::move(r->body), std::move(r->chat)};
}

}  // namespace

Result<PreparedRequest> prepare_agent_request(std::string_view body, canon::Api api,
                                              const Tenant& tenant, const PrepOptions& options) {
  PreparedRequest out;
  out.api = api;
  auto converted = convert(body, api, options, out.agent);
  if (!converted) return converted.error();
  auto parsed = canon::parse_request_value(converted->chat.body, canon::Endpoint::kChatCompletions,
                                           options.limits);
  if (!parsed) return parsed.error();
  out.parsed = std::move(*parsed);
  json::Value& client = converted->body;
  bool client_modified = false;
  if (apply_stage(out, options)) {
    canon::write_back(converted->chat, out.parsed, client);
    client_modified = true;
  }
  if (apply_salt(out, tenant)) {
    client.set("cache_salt", out.parsed.cache_salt);  // prefixgate-engine takes it here too
    client_modified = true;
  }
  out.stream = out.parsed.stream;
  out.client_wants_usage = true;  // the conversion asked for usage; the reply writers need it
  // Each tool list serialized once, for the chat body sent upstream and for the prompt.
  canon::keep_tool_list_texts(out.parsed);
  std::vector<json::SourceMember> tool_texts;
  for (const auto& text : out.parsed.tool_texts) tool_texts.push_back({text->key, text->json});
  json::append_json_reusing(out.parsed.body, tool_texts, {}, out.upstream_body);
  out.agent.native_body = client_modified ? json::to_json(client) : std::string(body);
  if (Status s = analyze_request(out, options, &converted->chat); !s) return s.error();
  return out;
}

}  // namespace prefixgate::gateway::server
