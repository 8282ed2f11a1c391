// ResponsesStreamWriter: chat chunks in, Responses API semantic events out.
#include <utility>  // std::as_const

#include "json_object_writer.h"
#include "prefixgate/canonicalize/responses_reply.h"
#include "prefixgate/canonicalize/sse.h"
#include "reply_internal.h"

namespace prefixgate::canon {
namespace {

json::Value output_text(std::string_view text) {
  return json::Object{{"type", "output_text"},
                      {"text", text},
                      {"annotations", json::Array{}},
                      {"logprobs", json::Array{}}};
}

}  // namespace

ResponsesStreamWriter::ResponsesStreamWriter(ResponsesReplyContext ctx)
    : ctx_(std::move(ctx)), echo_(echo_members(ctx_.echo)) {}

void ResponsesStreamWriter::event(std::string_view type, json::Object data, std::string& out) {
  json::Object e{{"type", type}};
  for (json::Member& m : data) e.push_back(std::move(m));
  e.push_back({"sequence_number", json::Value(static_cast<double>(sequence_++))});
  append_sse(out, type, json::to_json(json::Value(std::move(e))));
}

void ResponsesStreamWriter::response_event(std::string_view type, std::string_view status,
                                           std::string& out) {
  JsonObjectWriter event = sse_json_event(out, type);
  event.open("response");
  write_response_members(event, ctx_, echo_, model_, status, output_,
                         status == "in_progress" ? std::nullopt : usage_, finish_reason_);
  event.close().number("sequence_number", sequence_++).end();
}

void ResponsesStreamWriter::close_item(std::string& out) {
  const json::Value index = count_value(output_.size());
  if (open_ == Item::kMessage) {
    const std::string id = message_item_id(ctx_.id);
    event("response.output_text.done",
          {{"item_id", id},
           {"output_index", index},
           {"content_index", 0},
           {"text", text_},
           {"logprobs", json::Array{}}},
          out);
    event("response.content_part.done",
          {{"item_id", id},
           {"output_index", index},
           {"content_index", 0},
           {"part", output_text(text_)}},
          out);
    current_.push_back({"content", json::Array{output_text(text_)}});
  } else if (open_ == Item::kCall) {
    json::Value item(current_);
    event("response.function_call_arguments.done",
          {{"item_id", *item.find("id")},
           {"output_index", index},
           {"name", *item.find("name")},
           {"arguments", *item.find("arguments")}},
          out);
  } else {
    return;
  }
  json::Value item(std::move(current_));
  item.set("status", "completed");
  event("response.output_item.done", {{"output_index", index}, {"item", item}}, out);
  output_.push_back(std::move(item));
  current_ = {};
  text_.clear();
  open_ = Item::kNone;
}

void ResponsesStreamWriter::add(const ChatReply& chunk, std::string& out) {
  if (finished_) return;
  if (!started_) {
    started_ = true;
    model_ = ctx_.model.empty() ? chunk.model : ctx_.model;
    response_event("response.created", "in_progress", out);
    response_event("response.in_progress", "in_progress", out);
  }
  if (!chunk.text.empty()) {
    const std::string id = message_item_id(ctx_.id);
    if (open_ != Item::kMessage) {
      close_item(out);
      current_ = json::Object{
          {"id", id}, {"type", "message"}, {"status", "in_progress"}, {"role", "assistant"}};
      json::Value added(current_);
      added.set("content", json::Array{});
      event("response.output_item.added",
            {{"output_index", count_value(output_.size())}, {"item", std::move(added)}}, out);
      event("response.content_part.added",
            {{"item_id", id},
             {"output_index", count_value(output_.size())},
             {"content_index", 0},
             {"part", output_text("")}},
            out);
      open_ = Item::kMessage;
    }
    text_ += chunk.text;
    // Every token's event: written as it goes (json_object_writer.h), not built as a tree.
    sse_json_event(out, "response.output_text.delta")
        .string("item_id", id)
        .number("output_index", output_.size())
        .number("content_index", 0)
        .string("delta", chunk.text)
        .json("logprobs", "[]")
        .number("sequence_number", sequence_++)
        .end();
  }
  for (const ChatToolCall& call : chunk.tool_calls) {
    if (open_ != Item::kCall || call.index != open_call_index_) {
      close_item(out);
      const std::size_t k = output_.size();
      current_ = json::Object{{"id", call_item_id(ctx_.id, k)},
                              {"type", "function_call"},
                              {"status", "in_progress"},
                              {"call_id", call.id.empty() ? fallback_call_id(ctx_.id, k) : call.id},
                              {"name", call.name},
                              {"arguments", ""}};
      event("response.output_item.added",
            {{"output_index", count_value(k)}, {"item", json::Value(current_)}}, out);
      open_ = Item::kCall;
      open_call_index_ = call.index;
    }
    if (!call.arguments.empty()) {
      json::Value& arguments = current_.back().value;  // "arguments" is the last member
      arguments.as_string() += call.arguments;
      sse_json_event(out, "response.function_call_arguments.delta")
          .string("item_id", std::as_const(current_.front().value).as_string())
          .number("output_index", output_.size())
          .string("delta", call.arguments)
          .number("sequence_number", sequence_++)
          .end();
    }
  }
  if (!chunk.finish_reason.empty()) finish_reason_ = chunk.finish_reason;
  if (chunk.usage) usage_ = chunk.usage;
}

void ResponsesStreamWriter::finish(std::string& out) {
  if (finished_) return;
  if (!started_) add(ChatReply{}, out);
  close_item(out);
  if (output_.empty()) {  // no text and no call: an empty message, as the whole body has
    open_ = Item::kMessage;
    current_ = json::Object{{"id", message_item_id(ctx_.id)},
                            {"type", "message"},
                            {"status", "in_progress"},
                            {"role", "assistant"}};
    json::Value added(current_);
    added.set("content", json::Array{});
    event("response.output_item.added", {{"output_index", 0}, {"item", std::move(added)}}, out);
    event("response.content_part.added",
          {{"item_id", message_item_id(ctx_.id)},
           {"output_index", 0},
           {"content_index", 0},
           {"part", output_text("")}},
          out);
    close_item(out);
  }
  finished_ = true;
  if (!usage_) usage_ = ChatUsage{};
  const std::string_view status = response_status(finish_reason_);
  response_event(status == "completed" ? "response.completed" : "response.incomplete", status, out);
}

void ResponsesStreamWriter::fail(std::string_view code, std::string_view message,
                                 std::string& out) {
  if (finished_) return;
  finished_ = true;
  event("error", {{"code", code}, {"message", message}, {"param", json::Value()}}, out);
}

}  // namespace prefixgate::canon
