// A Messages or Responses request made ready to route: converted into its Chat Completions
// equivalent, which goes through the canonicalization stage, the tenant's salt and the analysis
// as a chat request does; what the stage rewrote is carried back into the client's own body
// (canon::write_back), so an upstream that serves the API natively renders the same tokens.
//
// An agent sends the same tools every turn: the client's bytes of its tool list take the
// canonical chat list, its text and reports from canonicalize's memo, and the list's client form
// from this thread's ClientToolsMemo. The client's body is written again only where something
// changed; every other member is forwarded as the client's bytes.
#include <algorithm>

#include "prefixgate/canonicalize/anthropic.h"
#include "prefixgate/canonicalize/responses_api.h"
#include "prefixgate/canonicalize/responses_reply.h"
#include "server/client_tools_memo.h"
#include "server/request_prep.h"

namespace prefixgate::gateway::server {
namespace {

struct Converted {
  json::Value body;
  canon::ChatConversion chat;
};

// `source` gets the client's bytes of each top-level member.
Result<Converted> convert(std::string_view body, canon::Api api, const canon::RequestLimits& limits,
                          AgentRequestInfo& info, std::vector<json::SourceMember>& source) {
  if (api == canon::Api::kMessages) {
    auto m = canon::parse_messages_request(body, limits, source);
    if (!m) return m.error();
    info.model = std::move(m->model);
    info.stop_sequences = std::move(m->stop_sequences);
    return Converted{std::move(m->body), std::move(m->chat)};
  }
  auto r = canon::parse_responses_request(body, limits, source);
  if (!r) return r.error();
  info.model = std::move(r->model);
  info.responses_echo = canon::responses_echo(r->body);
  return Converted{std::move(r->body), std::move(r->chat)};
}

json::SourceMember* member(std::vector<json::SourceMember>& source, std::string_view key) {
  const auto it = std::find_if(source.begin(), source.end(),
                               [&](const json::SourceMember& m) { return m.key == key; });
  return it != source.end() ? &*it : nullptr;
}

// Carries the stage's rewrites into the client's body (canon::write_back). Returns the members
// to write from the tree; the tool list's client form is written once per list and then taken
// from the thread's memo: `source`'s "tools" then points at that text (`tools_text` holds it
// when it was made here).
std::vector<std::string> write_back_client(const canon::ChatConversion& conversion,
                                           const canon::ParsedRequest& canonical,
                                           json::Value& client,
                                           std::vector<json::SourceMember>& source,
                                           std::string& tools_text) {
  ClientToolsMemo& memo = ClientToolsMemo::for_this_thread();
  const canon::ToolListText* canonical_tools = canon::tool_list_text(canonical, "tools");
  json::SourceMember* client_tools = member(source, "tools");
  if (const std::string* known = memo.find(canonical_tools); known && client_tools) {
    client_tools->text = *known;
    return canon::write_back(conversion, canonical, client, /*tools=*/false);
  }
  std::vector<std::string> changed = canon::write_back(conversion, canonical, client);
  const auto tools = std::find(changed.begin(), changed.end(), "tools");
  if (tools == changed.end() || client_tools == nullptr) return changed;
  tools_text = json::to_json(*client.find("tools"));
  client_tools->text = tools_text;
  changed.erase(tools);
  for (const auto& text : canonical.tool_texts) {
    if (text.get() == canonical_tools) memo.remember(text, tools_text);
  }
  return changed;
}

canon::SourceShape shape_of(canon::Api api) {
  return api == canon::Api::kMessages ? canon::SourceShape::kMessages
                                      : canon::SourceShape::kResponses;
}

}  // namespace

json::SplicedJson& PreparedRequest::upstream_body() {
  if (upstream_body_pending_) {
    upstream_body_pending_ = false;
    std::vector<json::SourceMember> tool_texts;
    for (const auto& text : parsed.tool_texts) tool_texts.push_back({text->key, text->json});
    json::append_json_reusing(parsed.body, tool_texts, {}, upstream_body_.text);
  }
  return upstream_body_;
}

Result<PreparedRequest> prepare_agent_request(std::string_view body, canon::Api api,
                                              const Tenant& tenant, const PrepOptions& options,
                                              std::size_t readable_past_end) {
  PreparedRequest out;
  out.api = api;
  std::vector<json::SourceMember> source;  // the client's top-level members, as it sent them
  canon::RequestLimits limits = options.limits;
  limits.readable_past_end = readable_past_end;
  auto converted = convert(body, api, limits, out.agent, source);
  if (!converted) return converted.error();
  auto parsed = canon::parse_request_value(converted->chat.body, canon::Endpoint::kChatCompletions,
                                           options.limits);
  if (!parsed) return parsed.error();
  out.parsed = std::move(*parsed);
  json::Value& client = converted->body;
  // The chat request's tools are the conversion of the client's: its bytes name them.
  std::vector<json::SourceMember> tools_source;
  if (const json::SourceMember* tools = member(source, "tools")) tools_source.push_back(*tools);
  std::vector<std::string> rewritten;  // members of the client's body written from the tree
  std::string tools_text;              // the tool list's client form, when made here
  bool client_modified = false;
  if (apply_stage(out, options, tools_source, shape_of(api))) {
    rewritten = write_back_client(converted->chat, out.parsed, client, source, tools_text);
    client_modified = true;
  }
  if (apply_salt(out, tenant)) {
    client.set("cache_salt", out.parsed.cache_salt);  // prefixgate-engine takes it here too
    rewritten.push_back("cache_salt");
    client_modified = true;
  }
  out.stream = out.parsed.stream;
  out.client_wants_usage = true;  // the conversion asked for usage; the reply writers need it
  // Each tool list serialized once, for the chat body sent upstream and for the prompt: by the
  // stage when it saw the client's bytes, here otherwise.
  if (out.parsed.tool_texts.empty()) canon::keep_tool_list_texts(out.parsed);
  out.defer_upstream_body();
  if (client_modified) {
    const std::vector<std::string_view> names(rewritten.begin(), rewritten.end());
    json::append_json_spliced(client, source, names, body, out.agent.native_body);
  } else {
    out.agent.native_body = json::SplicedJson::borrowing(body);
  }
  if (Status s = analyze_request(out, options, &converted->chat); !s) return s.error();
  return out;
}

}  // namespace prefixgate::gateway::server
