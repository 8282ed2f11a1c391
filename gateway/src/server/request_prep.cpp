#include "server/request_prep.h"

#include "prefixgate/canonicalize/lint.h"
#include "prefixgate/canonicalize/prompt.h"
#include "prefixgate/model_folder/prompt_model.h"
#include "prefixgate/serving/request_body.h"

namespace prefixgate::gateway::server {

std::string tenant_salt(const Tenant& tenant, std::string_view client_salt) {
  if (!tenant.isolate || tenant.name.empty()) return std::string(client_salt);
  std::string salt = "prefixgate-tenant:" + tenant.name;
  if (!client_salt.empty()) {
    salt += '/';
    salt += client_salt;
  }
  return salt;
}

std::string session_key_for(std::string_view header, const json::Value& body,
                            std::string_view api_key) {
  if (!header.empty()) return std::string(header);
  if (const json::Value* user = body.find("user"); user && user->is_string()) {
    if (!user->as_string().empty()) return "user:" + user->as_string();
  }
  return std::string(api_key);
}

bool apply_stage(PreparedRequest& out, const PrepOptions& options,
                 std::span<const json::SourceMember> source, canon::SourceShape shape) {
  // Keeps the parsed fields in step.
  StageResult staged = options.stage->apply(out.parsed, source, shape);
  out.changes = std::move(staged.changes);
  return staged.body_changed;
}

bool apply_salt(PreparedRequest& out, const Tenant& tenant) {
  canon::ParsedRequest& req = out.parsed;
  const std::string salt = tenant_salt(tenant, req.cache_salt);
  if (salt == req.cache_salt) return false;
  req.cache_salt = salt;
  req.body.set("cache_salt", salt);
  return true;
}

void PromptFindings::add(std::string_view rule, std::string_view field, std::string_view excerpt,
                         std::size_t token_offset, std::size_t byte_offset) {
  if (items_.empty()) {
    // Room for a system prompt's usual few findings at once.
    constexpr std::size_t kUsualFindings = 8;
    constexpr std::size_t kUsualTextBytes = 512;
    items_.reserve(kUsualFindings);
    text_.reserve(kUsualTextBytes);
  }
  items_.push_back(Item{.rule = rule,
                        .field_at = text_.size(),
                        .field_size = field.size(),
                        .excerpt_size = excerpt.size(),
                        .token_offset = token_offset,
                        .byte_offset = byte_offset});
  text_.append(field).append(excerpt);
}

Status analyze_request(PreparedRequest& out, const PrepOptions& options,
                       const canon::ChatConversion* conversion) {
  const canon::ParsedRequest& req = out.parsed;
  const ModelEntry& entry = options.models->for_model(req.model);
  const canon::PromptModel& model = entry.prompt_model;
  out.model = entry.name;
  canon::ChatRenderOptions render;
  if (model.chat_format.uses_strftime_now()) render.now = local_time_now();
  // One per thread, reused: the token and offset vectors of a 32 KB prompt are ~400 KB, which
  // allocated per request means fresh pages, and page faults, every time. A prompt far larger
  // than usual gives its memory back afterwards.
  thread_local canon::AnalyzedPrompt prompt;
  struct Trim {
    ~Trim() {
      constexpr std::size_t kKeepTokens = std::size_t{1} << 20;
      if (prompt.tokens.tokens.capacity() > kKeepTokens) prompt = canon::AnalyzedPrompt{};
    }
  } trim;
  // A byte's token only where something asks for one, lint's findings and an agent request's
  // cache_control breakpoint: found from the stretches, not from an offset per token.
  const canon::ByteOffsets offsets = options.lint || conversion != nullptr
                                         ? canon::ByteOffsets::kOnDemand
                                         : canon::ByteOffsets::kSkip;
  // The ids themselves are never read here (routing takes the hashes, lint and the breakpoint
  // a byte's token from the stretches): a long conversation's stay in the prompt memo.
  Status analyzed =
      canon::analyze_prompt_into(req, model, prompt, render, offsets, canon::TokenIds::kCount);
  if (!analyzed && options.template_errors != nullptr) {
    options.template_errors->add({entry.name.empty() ? "default" : entry.name,
                                  template_error_action_name(entry.template_errors)});
  }
  if (!analyzed && entry.template_errors == TemplateErrorAction::kRouteOnText) {
    // Routed on the request's text: the plain rendering of the same messages.
    out.template_error = analyzed.error().message;
    canon::PromptModel plain = model;
    plain.chat_format = canon::ChatTemplate::kPlain;
    analyzed = canon::analyze_prompt_into(req, plain, prompt, {}, offsets, canon::TokenIds::kCount);
  }
  if (!analyzed) return analyzed.error();
  // What breaks the prefix: the final user message (past any breakpoint) is not looked into.
  canon::LintOptions lint{.explain = false, .volatile_tail = false};
  if (conversion != nullptr) {
    lint.breakpoints = canon::breakpoint_bytes(*conversion, req, prompt.rendered);
    out.agent.breakpoint_tokens = canon::breakpoint_tokens(*conversion, req, prompt);
  }
  if (options.lint) {
    // Each finding as it is found, straight into the request's: a lint Finding's strings would
    // be made only to be moved here and freed.
    canon::lint_prompt_each(prompt, lint, [&](const canon::FindingSeen& f) {
      if (conversion != nullptr) {
        out.findings.add(canon::rule_id(f.hit.rule), canon::source_field(*conversion, f.field),
                         f.excerpt, f.token_offset, f.prompt_begin);
      } else {
        out.findings.add(canon::rule_id(f.hit.rule), f.field, f.excerpt, f.token_offset,
                         f.prompt_begin);
      }
    });
  }
  out.block_hashes = std::move(prompt.block_hashes);
  out.prompt_tokens = prompt.tokens.size();
  out.block_size = model.block_size;
  return {};
}

// The request bodies the servers read leave the parser's padding past their end.
static_assert(serving::kReadablePastEnd >= json::kParsePadding);

Result<PreparedRequest> prepare_request(std::string_view body, canon::Api api, const Tenant& tenant,
                                        const PrepOptions& options, std::size_t readable_past_end) {
  if (api == canon::Api::kMessages || api == canon::Api::kResponses) {
    return prepare_agent_request(body, api, tenant, options, readable_past_end);
  }
  const canon::Endpoint endpoint = api == canon::Api::kCompletions
                                       ? canon::Endpoint::kCompletions
                                       : canon::Endpoint::kChatCompletions;
  // The client's bytes of each top-level member, so that the body sent upstream re-serializes
  // only the members a rule rewrote (a 30 KB conversation whose tools were put in canonical
  // form is sent as the client's bytes, not written again nor copied).
  thread_local std::vector<json::SourceMember> source;
  canon::RequestLimits limits = options.limits;
  limits.readable_past_end = readable_past_end;
  auto parsed = canon::parse_request(body, endpoint, limits, source);
  if (!parsed) return parsed.error();
  PreparedRequest out;
  out.api = api;
  out.parsed = std::move(*parsed);
  bool modified = apply_stage(out, options, source);
  std::vector<std::string_view> rewritten;
  bool rewritten_known = true;
  for (const StageChange& c : out.changes) {
    if (c.mode != RuleMode::kRewrite) continue;
    const std::string_view path = c.path;
    const std::string_view member = path.substr(0, path.find_first_of(".["));
    rewritten_known = rewritten_known && !member.empty();
    // A rewritten tool list whose text canonicalization kept is copied from that text.
    if (const canon::ToolListText* text = canon::tool_list_text(out.parsed, member)) {
      for (json::SourceMember& m : source) {
        if (m.key == member) m.text = text->json;
      }
      continue;
    }
    rewritten.push_back(member);
  }
  if (apply_salt(out, tenant)) {
    modified = true;
    rewritten.push_back("cache_salt");
  }

  canon::ParsedRequest& req = out.parsed;
  out.stream = req.stream;
  if (req.stream) {
    json::Value* opts = req.body.find("stream_options");
    const json::Value* inc = opts && opts->is_object() ? opts->find("include_usage") : nullptr;
    out.client_wants_usage = inc && inc->is_bool() && inc->as_bool();
    if (!out.client_wants_usage) {
      if (opts && opts->is_object()) {
        opts->set("include_usage", true);
      } else {
        req.body.set("stream_options", json::Object{{"include_usage", true}});
      }
      modified = true;
      rewritten.push_back("stream_options");
    }
  }
  if (!modified) {
    out.upstream_body_to_set() = json::SplicedJson::borrowing(body);
  } else if (rewritten_known) {
    json::append_json_spliced(req.body, source, rewritten, body, out.upstream_body_to_set());
  } else {
    // A change without a member: write it all.
    out.upstream_body_to_set() = json::SplicedJson(json::to_json(req.body));
  }
  if (Status s = analyze_request(out, options, nullptr); !s) return s.error();
  return out;
}

}  // namespace prefixgate::gateway::server
