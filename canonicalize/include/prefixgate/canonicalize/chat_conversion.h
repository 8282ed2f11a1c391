// Requests of the other APIs agents speak (Anthropic Messages, anthropic.h; OpenAI Responses,
// responses_api.h) as the Chat Completions request each is equivalent to, and what ties the two
// together: which field of the client's request every chat field came from (to name it in
// reports, and to carry canonicalization back into the client's request), and where the
// client's cache breakpoints (Anthropic's cache_control) fall in the rendered prompt.
//
// Everything downstream (canonicalization, chat templates, tokenizers, block hashes) sees only
// the chat request, so the same conversation sent through any of the APIs renders into the same
// tokens and shares cached prefixes.
//
//   auto m = canon::parse_messages_request(body);                           // anthropic.h
//   auto chat = canon::parse_request_value(m->chat.body, canon::Endpoint::kChatCompletions);
//   auto prompt = canon::analyze_prompt(*chat, model);
//   std::size_t declared = canon::breakpoint_tokens(m->chat, *chat, *prompt);
//   canon::source_field(m->chat, "messages[0].content");                   // "system"
//   canon::write_back(m->chat, *chat, m->body);   // after canonicalize_in_place(*chat, ...)
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/prompt.h"
#include "prefixgate/canonicalize/request.h"

namespace prefixgate::canon {

// The request shapes prefixgate serves.
enum class Api { kChatCompletions, kCompletions, kMessages, kResponses };
// "chat", "completions", "messages", "responses" (what --api flags take).
const char* api_name(Api api);
std::optional<Api> api_from_name(std::string_view name);
// "/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/responses".
const char* api_path(Api api);
// The API of a request path (exactly one of the above), nullopt for any other path.
std::optional<Api> api_for_path(std::string_view path);
// For a body of unknown kind: `input` or `instructions` without `messages` is a Responses
// request; `messages` with an Anthropic-only feature (a top-level `system`, `stop_sequences`,
// `metadata`, `anthropic_version`, a content block of type tool_use, tool_result or image with a
// `source`, a `cache_control`, a tool with `input_schema`) is a Messages request; other
// `messages` are chat, `prompt` a completion. A Messages body without any of those features is
// taken as chat, which converts to itself.
std::optional<Api> guess_api(const json::Value& body);

// One step of a path into a JSON document: a member name or an array index.
struct PathStep {
  std::string key;
  std::size_t index = 0;
  bool is_index = false;
};
using JsonPath = std::vector<PathStep>;
// "messages[2].content[0].text" (json.h's path syntax).
std::string path_text(const JsonPath& path);

// Where one part of a chat message came from: its string content (part -1) or content part
// `part`. `source` is the client's string for text (what write_back() replaces), or the block.
struct PartOrigin {
  int part = -1;
  JsonPath source;
  bool is_text = true;
};

// Where one chat message came from ("system", "messages[3]", or for a tool message the
// tool_result block "messages[3].content[1]"), its parts, and its tool calls.
struct MessageOrigin {
  JsonPath source;
  std::vector<PartOrigin> parts;
  std::vector<JsonPath> tool_calls;  // per entry of the chat message's tool_calls
};

// A cache breakpoint the client declared (Anthropic's cache_control): the prompt up to the end
// of this field is what the client says will repeat. On a tool definition it is named by the
// tool's name, since canonicalization may move tools.
struct Breakpoint {
  std::string source;      // the client's field: "system[1]", "tools[2]", "messages[4].content[0]"
  std::string chat_field;  // "messages[0].content[1]", "messages[5].tool_calls[0]"; "" for a tool
  std::string tool_name;   // a tool definition's breakpoint
};

struct ChatConversion {
  Api api = Api::kMessages;
  json::Value body;  // the Chat Completions request
  // One per entry of body.messages. Immutable once made, so that a turn converted for an earlier
  // request and added again (ConversionBuilder::add_kept) shares its origins instead of copying
  // their paths on every request.
  std::vector<std::shared_ptr<const MessageOrigin>> messages;
  // body.tools[i] is the client's tools[i]; this is the client's name for its parameters
  // ("input_schema", "parameters").
  std::string tool_schema_key;
  std::vector<Breakpoint> breakpoints;  // in Anthropic's prompt order: tools, system, messages
};

// The client's field behind a chat field (a rendered segment's source): "messages[0].content"
// -> "system", "messages[3].content[1]" -> "messages[2].content[1].text", "tools[2].function"
// -> "tools[2]"; a field it cannot map ("template") is returned as it is.
std::string source_field(const ChatConversion& conversion, std::string_view chat_field);

// Carries a canonicalized chat request's changes back into the client's body, so that
// converting that body again gives the canonical chat body: tools in the canonical order, each
// with the canonical schema and description; message texts as rewritten (timestamps rounded,
// whitespace normalized). Fields canonicalization never touches are left alone. `canonical` is
// the chat request parsed from conversion.body after canonicalize_in_place(). Returns the
// client's top-level members it changed ("tools", "system", "messages", ...), each once, so a
// proxy can forward the others as the client's bytes. With `tools` false
// the tool list is left to the caller (one that kept the canonical list's client form from an
// earlier request with the same tools).
std::vector<std::string> write_back(const ChatConversion& conversion,
                                    const ParsedRequest& canonical, json::Value& client_body,
                                    bool tools = true);

// Byte offsets in the rendered prompt where the client's breakpoints end, ascending: the end of
// the last segment rendered from the breakpoint's field (or, for a part the template leaves out,
// such as an image, from its message). `chat` is the request the prompt was rendered from.
std::vector<std::size_t> breakpoint_bytes(const ChatConversion& conversion,
                                          const ParsedRequest& chat, const RenderedPrompt& prompt);
// Prompt tokens up to the last breakpoint: the prefix the client declared stable (0 without a
// breakpoint).
std::size_t breakpoint_tokens(const ChatConversion& conversion, const ParsedRequest& chat,
                              const AnalyzedPrompt& prompt);

}  // namespace prefixgate::canon
