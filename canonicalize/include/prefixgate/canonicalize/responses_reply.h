// Replies in the OpenAI Responses shape made from a Chat Completions reply (chat_reply.h): a
// whole response object, and a stream of the Responses API's semantic events fed chat chunks.
// Errors keep OpenAI's shape (serving/errors.h).
//
//   canon::ResponsesReplyContext ctx{.id = "resp_01", .model = request.model,
//                                    .created_at = now_s, .echo = canon::responses_echo(body)};
//   std::string body = canon::responses_body(*canon::parse_chat_reply(chat), ctx);
//
//   canon::ResponsesStreamWriter writer(ctx);           // per chat chunk, then the end:
//   writer.add(*canon::parse_chat_chunk(chunk), out);   // response.created, ...output_text.delta
//   writer.finish(out);                                 // ...done events, response.completed
//
// output: a message item ({"type": "message", "content": [{"type": "output_text"}]}) when there
// is text or no tool call, then one function_call item per tool call (call_id = the chat call's
// id). status: completed, or incomplete with incomplete_details.reason max_output_tokens
// (finish_reason length) or content_filter. usage: input_tokens, input_tokens_details
// .cached_tokens (prompt tokens served from the prefix cache), output_tokens, total_tokens.
// Every streamed event carries sequence_number, counting from 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "prefixgate/canonicalize/chat_reply.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::canon {

struct ResponsesReplyContext {
  std::string id = {};     // "resp_..."
  std::string model = {};  // as the client named it; the chat reply's when empty
  std::int64_t created_at = 0;
  json::Object echo = {};  // the request fields a response repeats (responses_echo())
};

// instructions, max_output_tokens, parallel_tool_calls, temperature, tool_choice, tools,
// top_p, metadata, user as the request set them (null or the API's default when it did not),
// and store false, text.format text, truncation disabled, previous_response_id null.
json::Object responses_echo(const json::Value& request_body);
json::Value responses_usage_json(const ChatUsage& usage);

// The response object, status completed or incomplete.
std::string responses_body(const ChatReply& reply, const ResponsesReplyContext& ctx);

// Fed the chat chunks of one reply in order, writes its Responses event stream.
class ResponsesStreamWriter {
 public:
  explicit ResponsesStreamWriter(ResponsesReplyContext ctx);

  // The first call opens the response (response.created, response.in_progress); text opens or
  // continues a message item (output_item.added, content_part.added, output_text.delta), a tool
  // call's pieces a function_call item (function_call_arguments.delta).
  void add(const ChatReply& chunk, std::string& out);
  // Closes the open item (its .done events) and the response: response.completed, or
  // response.incomplete, with the whole response.
  void finish(std::string& out);
  // An `error` event in place of the rest of the stream.
  void fail(std::string_view code, std::string_view message, std::string& out);

  const std::optional<ChatUsage>& usage() const { return usage_; }
  bool finished() const { return finished_; }

 private:
  enum class Item { kNone, kMessage, kCall };
  // An event whose data is the whole response object (created, in_progress, completed).
  void response_event(std::string_view type, std::string_view status, std::string& out);
  void close_item(std::string& out);
  void event(std::string_view type, json::Object data, std::string& out);

  ResponsesReplyContext ctx_;
  std::string echo_;  // ctx_.echo as JSON members, written once for the three response events
  bool started_ = false;
  bool finished_ = false;
  std::uint64_t sequence_ = 0;
  Item open_ = Item::kNone;
  std::size_t open_call_index_ = 0;
  json::Array output_;    // closed items
  json::Object current_;  // the open item
  std::string text_;      // the open message's text
  std::string model_;
  std::string finish_reason_;
  std::optional<ChatUsage> usage_;
};

}  // namespace prefixgate::canon
