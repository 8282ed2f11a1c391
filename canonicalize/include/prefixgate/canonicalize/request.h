// The OpenAI request model: `/v1/chat/completions` and `/v1/completions` bodies, validated.
//
// A ParsedRequest keeps the whole body as an order-preserving json::Value (so a proxy can pass
// every field it does not understand through untouched) and, beside it, a typed view of what
// prefix caching depends on: messages, tools, the completion prompt, cache salt, model.
//
//   auto req = canon::parse_request(body_bytes, canon::Endpoint::kChatCompletions);
//   if (!req) return reply(http_status(req.error()), serving::openai_error_body(req.error()));
//   for (const canon::Message& m : req->messages) ...
//
// Validation follows the OpenAI API reference: wrong types of known fields, missing required
// fields and unknown roles are kInvalidValue/kWrongType/kMissingField errors whose `param` names
// the field ("messages[1].content[0].text").
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/base/status.h"
#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/shared_text.h"
#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::canon {

enum class Endpoint { kChatCompletions, kCompletions };

enum class Role { kSystem, kDeveloper, kUser, kAssistant, kTool, kFunction };
const char* role_name(Role role);

// One piece of a message's content. Text parts carry text; other parts (image_url, input_audio,
// file, ...) carry their JSON so that two requests with different images never look alike.
struct ContentPart {
  std::string type;   // "text", "image_url", ...
  SharedText text;    // for text-like parts ("text", "refusal"); copies share it
  json::Value value;  // the whole part as sent; null for content sent as a plain string
  bool is_text() const { return type == "text" || type == "refusal"; }
};

struct Message {
  Role role = Role::kUser;
  std::vector<ContentPart> parts;  // content as parts; a string content is one text part
  bool content_is_string = false;  // the client sent content as a plain string
  std::optional<std::string> name;
  std::optional<std::string> tool_call_id;
  json::Value tool_calls;  // array as sent, or null
  std::size_t index = 0;   // position in `messages`

  // The text of all text parts, concatenated (what a chat template renders).
  std::string text() const;
};

// One function the model may call: from `tools[i]` ({"type":"function","function":{...}}) or
// from the legacy `functions[i]`.
struct ToolDef {
  std::string name;
  std::string path;  // "tools[3]" or "functions[0]"
};

// The compact JSON text of one tool list (`tools` or `functions`) as canonicalization left it,
// and where each definition lies in it. Rendering and the forwarded body take a definition's text
// from here instead of serializing it again (see canonicalize_in_place).
struct ToolListText {
  std::string key;                                             // "tools" or "functions"
  std::string json;                                            // json::to_json of the list
  std::vector<std::pair<std::uint32_t, std::uint32_t>> items;  // [begin, end) of each definition

  std::string_view item(std::size_t i) const {
    return std::string_view(json).substr(items[i].first, items[i].second - items[i].first);
  }
};

// A completion prompt: text, or token ids a client already tokenized.
struct Prompt {
  std::string text;
  std::vector<TokenId> token_ids;
  bool is_tokens = false;
};

struct ParsedRequest {
  Endpoint endpoint = Endpoint::kChatCompletions;
  json::Value body;   // every field, in the client's order
  std::string model;  // empty when absent
  bool stream = false;
  std::string cache_salt;         // `cache_salt`, empty when absent: requests with different salts
                                  // never share cached prefixes
  std::vector<Message> messages;  // chat completions
  std::vector<ToolDef> tools;     // chat completions
  std::vector<Prompt> prompts;    // completions: one per prompt in a batch
  // Set by canonicalize_in_place when it was given the client's bytes: the text of each tool
  // list it left in `body`. Whoever changes a tool list afterwards must clear this.
  std::vector<std::shared_ptr<const ToolListText>> tool_texts;
};

// The text of `body[key]` as canonicalization left it, or nullptr when it is not known.
const ToolListText* tool_list_text(const ParsedRequest& request, std::string_view key);
// Sets request.tool_texts from the tool lists now in its body, for a request whose lists did not
// come through canonicalize_in_place with the client's bytes (one converted from another API):
// rendering and the body sent upstream then serialize each list once between them.
void keep_tool_list_texts(ParsedRequest& request);

struct RequestLimits {
  std::size_t max_body_bytes = 16u << 20;
  std::size_t max_depth = 64;
  std::size_t max_messages = 100000;
  // json::ParseLimits::readable_past_end of the body: what its buffer holds past its end.
  std::size_t readable_past_end = 0;
};

// Parses and validates a request body for `endpoint`.
Result<ParsedRequest> parse_request(std::string_view body, Endpoint endpoint,
                                    const RequestLimits& limits = {});
// The same, also giving each top-level member's bytes in `body` (views into it), so that a
// proxy can forward unchanged members as sent (json::append_json_reusing).
Result<ParsedRequest> parse_request(std::string_view body, Endpoint endpoint,
                                    const RequestLimits& limits,
                                    std::vector<json::SourceMember>& source);
// Validates an already-parsed body (e.g. one that canonicalization rewrote).
Result<ParsedRequest> parse_request_value(json::Value body, Endpoint endpoint,
                                          const RequestLimits& limits = {});

// For files of unknown kind: a body with `messages` is a chat request, one with `prompt` a
// completion request.
std::optional<Endpoint> guess_endpoint(const json::Value& body);

}  // namespace prefixgate::canon
