// MessagesStreamWriter: chat chunks in, Anthropic Messages stream events out.
#include "json_object_writer.h"
#include "prefixgate/canonicalize/anthropic_reply.h"
#include "prefixgate/canonicalize/sse.h"
#include "reply_internal.h"

namespace prefixgate::canon {

MessagesStreamWriter::MessagesStreamWriter(MessagesReplyContext ctx) : ctx_(std::move(ctx)) {}

void MessagesStreamWriter::event(std::string_view type, json::Value data, std::string& out) {
  append_sse(out, type, json::to_json(data));
}

void MessagesStreamWriter::start(const ChatReply& first, std::string& out) {
  started_ = true;
  model_ = ctx_.model.empty() ? first.model : ctx_.model;
  const MessagesUsage usage =
      messages_usage(first.usage.value_or(ChatUsage{}), first.usage ? ctx_.breakpoint_tokens : 0);
  json::Object message{{"id", ctx_.id},
                       {"type", "message"},
                       {"role", "assistant"},
                       {"model", model_},
                       {"content", json::Array{}},
                       {"stop_reason", json::Value()},
                       {"stop_sequence", json::Value()},
                       {"usage", messages_usage_json(usage)}};
  event("message_start",
        json::Object{{"type", "message_start"}, {"message", json::Value(std::move(message))}}, out);
  event("ping", json::Object{{"type", "ping"}}, out);
}

void MessagesStreamWriter::open_block(const json::Value& content_block, Block kind,
                                      std::string& out) {
  close_block(out);
  event("content_block_start",
        json::Object{{"type", "content_block_start"},
                     {"index", count_value(next_block_)},
                     {"content_block", content_block}},
        out);
  open_ = kind;
}

void MessagesStreamWriter::close_block(std::string& out) {
  if (open_ == Block::kNone) return;
  event("content_block_stop",
        json::Object{{"type", "content_block_stop"}, {"index", count_value(next_block_)}}, out);
  open_ = Block::kNone;
  ++next_block_;
}

void MessagesStreamWriter::add(const ChatReply& chunk, std::string& out) {
  if (finished_) return;
  if (!started_) start(chunk, out);
  if (!chunk.text.empty()) {
    if (open_ != Block::kText)
      open_block(json::Object{{"type", "text"}, {"text", ""}}, Block::kText, out);
    // Every token's event: written as it goes (json_object_writer.h), not built as a tree.
    sse_json_event(out, "content_block_delta")
        .number("index", next_block_)
        .open("delta")
        .string("type", "text_delta")
        .string("text", chunk.text)
        .close()
        .end();
  }
  for (const ChatToolCall& call : chunk.tool_calls) {
    // A call's first piece carries its id and name; its arguments follow in pieces. Calls come
    // one after another (as vLLM and OpenAI send them): a piece of another call starts its block.
    if (open_ != Block::kTool || call.index != open_tool_index_) {
      open_block(
          json::Object{{"type", "tool_use"},
                       {"id", call.id.empty() ? fallback_tool_id(ctx_.id, call.index) : call.id},
                       {"name", call.name},
                       {"input", json::Object{}}},
          Block::kTool, out);
      open_tool_index_ = call.index;
      saw_tool_call_ = true;
    }
    if (!call.arguments.empty()) {
      sse_json_event(out, "content_block_delta")
          .number("index", next_block_)
          .open("delta")
          .string("type", "input_json_delta")
          .string("partial_json", call.arguments)
          .close()
          .end();
    }
  }
  if (!chunk.finish_reason.empty()) end_.finish_reason = chunk.finish_reason;
  if (!chunk.stop_string.empty()) end_.stop_string = chunk.stop_string;
  if (chunk.usage) usage_ = chunk.usage;
}

void MessagesStreamWriter::finish(std::string& out) {
  if (finished_) return;
  if (!started_) start(ChatReply{}, out);
  close_block(out);
  finished_ = true;
  ChatReply end = end_;
  if (saw_tool_call_) end.tool_calls.push_back(ChatToolCall{});
  const MessagesStop stop = messages_stop(end, ctx_.stop_sequences);
  const MessagesUsage usage = messages_usage(usage_.value_or(ChatUsage{}), ctx_.breakpoint_tokens);
  event("message_delta",
        json::Object{
            {"type", "message_delta"},
            {"delta", json::Object{{"stop_reason", stop.reason},
                                   {"stop_sequence",
                                    stop.sequence ? json::Value(*stop.sequence) : json::Value()}}},
            {"usage", messages_usage_json(usage)}},
        out);
  event("message_stop", json::Object{{"type", "message_stop"}}, out);
}

void MessagesStreamWriter::fail(int status, std::string_view message, std::string& out) {
  if (finished_) return;
  finished_ = true;
  append_sse(out, "error", messages_error_body(status, message));
}

}  // namespace prefixgate::canon
