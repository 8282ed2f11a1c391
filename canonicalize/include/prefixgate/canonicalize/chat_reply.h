// What a Chat Completions reply says, read from a whole response or from one chunk of its
// stream: the text, the tool calls, why it stopped, and the usage. The Messages and Responses
// replies (anthropic_reply.h, responses_reply.h) are made from this, whether the chat reply came
// from an upstream over HTTP (parsed here) or from the engine itself (filled in directly).
//
//   auto reply = canon::parse_chat_reply(*json::parse(body));
//   if (!reply) return bad_gateway(reply.error());
//   for (const json::Value& chunk : chunks) writer.add(*canon::parse_chat_chunk(chunk), out);
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/base/status.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::canon {

struct ChatUsage {
  std::size_t prompt_tokens = 0;
  std::size_t completion_tokens = 0;
  std::size_t cached_tokens = 0;  // prompt_tokens_details.cached_tokens
  bool operator==(const ChatUsage&) const = default;
};

struct ChatToolCall {
  std::size_t index = 0;  // position among the reply's calls (a stream's `index`)
  std::string id = {};
  std::string name = {};
  std::string arguments = {};  // JSON text (a piece of it, in a chunk)
  bool operator==(const ChatToolCall&) const = default;
};

// A whole reply, or what one stream chunk adds to it.
struct ChatReply {
  std::string id = {};
  std::string model = {};
  std::string text = {};
  std::vector<ChatToolCall> tool_calls = {};
  std::string finish_reason = {};  // "stop", "length", "tool_calls", ...; "" until the end
  // The stop string that ended the reply, where the server says (vLLM's and prefixgate-engine's
  // choices[].stop_reason); "" otherwise.
  std::string stop_string = {};
  std::optional<ChatUsage> usage = {};
  bool operator==(const ChatReply&) const = default;
};

// A chat.completion body (its first choice). kInternal when it is not one: the upstream's fault.
Result<ChatReply> parse_chat_reply(const json::Value& body);
// A chat.completion.chunk (its first choice's delta; a usage chunk has no choice).
Result<ChatReply> parse_chat_chunk(const json::Value& chunk);
// A chat.completion.chunk read from its text without building a tree, when it is the plain
// kind nearly every token's chunk is, a piece of text or of tool calls: no logprobs, usage object
// or error, at most one choice, and no container but `choices`, the choice, its `delta`, and the
// delta's `tool_calls` with each call and its `function`. For such a text it gives what
// parse_chat_chunk(*json::parse(text)) gives; nullopt for any other text, valid or not, which
// the caller then parses whole.
std::optional<ChatReply> parse_plain_chat_chunk(std::string_view text);
// {"prompt_tokens", "completion_tokens", "prompt_tokens_details": {"cached_tokens"}}.
std::optional<ChatUsage> parse_chat_usage(const json::Value& usage);

}  // namespace prefixgate::canon
