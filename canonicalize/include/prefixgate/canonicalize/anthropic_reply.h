// Replies in the Anthropic Messages shape made from a Chat Completions reply (chat_reply.h): a
// whole message, a stream of Messages events fed chat chunks, and error bodies.
//
//   canon::MessagesReplyContext ctx{.id = "msg_01", .model = request.model,
//                                   .stop_sequences = request.stop_sequences,
//                                   .breakpoint_tokens = declared};
//   std::string body = canon::messages_body(*canon::parse_chat_reply(chat), ctx);
//
//   canon::MessagesStreamWriter writer(ctx);       // per chat chunk, then the end:
//   writer.add(*canon::parse_chat_chunk(chunk), out);  // message_start, content_block_* ...
//   writer.finish(out);                             // message_delta, message_stop
//
// Usage: cache_read_input_tokens is the prompt tokens served from the prefix cache (the chat
// usage's cached_tokens); cache_creation_input_tokens is the prompt tokens up to the client's
// last cache breakpoint (cache_control) that were not served from cache: the declared-stable
// prefix this request computed and left in the cache (0 without a breakpoint);
// input_tokens is the rest of the prompt, so the three add up to the prompt.
// stop_reason: finish_reason stop -> end_turn, or stop_sequence (with stop_sequence set) when the
// reply names a stop string of the request; length -> max_tokens; tool_calls (or tool calls
// present) -> tool_use; content_filter -> refusal. A tool call's arguments become `input` parsed
// as JSON ({} when they are not a JSON object).
// Streams: the events of Anthropic's streaming format in order; message_start carries the usage
// known when the first chunk came (the prompt's, from the engine; zeros through a chat
// upstream, which reports usage last), and message_delta the whole usage, which the SDKs take
// as final.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/base/status.h"
#include "prefixgate/canonicalize/chat_reply.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::canon {

struct MessagesReplyContext {
  std::string id = {};     // "msg_..."
  std::string model = {};  // as the client named it; the chat reply's when empty
  std::vector<std::string> stop_sequences = {};
  std::size_t breakpoint_tokens = 0;  // prompt tokens up to the last cache breakpoint
};

struct MessagesUsage {
  std::size_t input_tokens = 0;
  std::size_t cache_creation_input_tokens = 0;
  std::size_t cache_read_input_tokens = 0;
  std::size_t output_tokens = 0;
};
MessagesUsage messages_usage(const ChatUsage& usage, std::size_t breakpoint_tokens);
json::Value messages_usage_json(const MessagesUsage& usage);

struct MessagesStop {
  std::string reason;                   // end_turn, max_tokens, stop_sequence, tool_use, refusal
  std::optional<std::string> sequence;  // the stop sequence, for stop_sequence
};
MessagesStop messages_stop(const ChatReply& reply, const std::vector<std::string>& stop_sequences);

// {"id", "type": "message", "role": "assistant", "model", "content": [text, tool_use...],
//  "stop_reason", "stop_sequence", "usage"}.
std::string messages_body(const ChatReply& reply, const MessagesReplyContext& ctx);

// Anthropic's error type for an HTTP status: invalid_request_error (400 and other 4xx),
// authentication_error (401), permission_error (403), not_found_error (404),
// request_too_large (413), rate_limit_error (429), api_error (500 and other 5xx),
// overloaded_error (503, 529).
const char* messages_error_type(int status);
// {"type": "error", "error": {"type", "message"}}.
std::string messages_error_body(int status, std::string_view message);
// The message of an OpenAI-shaped error body ({"error": {"message"}}), else the body itself.
std::string error_message_of(std::string_view body);

// Fed the chat chunks of one reply in order, writes its Messages stream.
class MessagesStreamWriter {
 public:
  explicit MessagesStreamWriter(MessagesReplyContext ctx);

  // The events this chunk makes: the first opens the message (message_start, ping), text opens
  // or continues a text block, a tool call's pieces a tool_use block (input_json_delta).
  void add(const ChatReply& chunk, std::string& out);
  // Closes the open block and the message: message_delta (stop reason, usage), message_stop.
  void finish(std::string& out);
  // An `error` event in place of the rest of the stream.
  void fail(int status, std::string_view message, std::string& out);

  // The chat usage seen so far (the last chunk with one).
  const std::optional<ChatUsage>& usage() const { return usage_; }
  bool finished() const { return finished_; }

 private:
  enum class Block { kNone, kText, kTool };
  void start(const ChatReply& first, std::string& out);
  void close_block(std::string& out);
  void open_block(const json::Value& content_block, Block kind, std::string& out);
  void event(std::string_view type, json::Value data, std::string& out);

  MessagesReplyContext ctx_;
  bool started_ = false;
  bool finished_ = false;
  Block open_ = Block::kNone;
  std::size_t next_block_ = 0;       // index of the next content block
  std::size_t open_tool_index_ = 0;  // the chat index of the open tool_use block
  bool saw_tool_call_ = false;
  std::string model_;
  ChatReply end_;  // finish_reason and stop string, as they arrive
  std::optional<ChatUsage> usage_;
};

}  // namespace prefixgate::canon
