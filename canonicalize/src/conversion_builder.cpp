#include "conversion_builder.h"

namespace prefixgate::canon {

using json::Value;

Value ConversionBuilder::content_value(const std::vector<ContentBlock>& blocks,
                                       MessageOrigin& origin) {
  const std::string field = message_field() + ".content";
  const auto text_path = [](const ContentBlock& b) {
    return b.whole ? b.path : with_key(b.path, b.text_key);
  };
  if (blocks.empty()) return Value("");
  if (blocks.size() == 1 && blocks[0].is_text) {
    origin.parts.push_back(PartOrigin{-1, text_path(blocks[0]), true});
    if (blocks[0].breakpoint) conv_.breakpoints.push_back({blocks[0].source, field, {}});
    return Value(blocks[0].text);
  }
  json::Array parts;
  for (std::size_t j = 0; j < blocks.size(); ++j) {
    const ContentBlock& b = blocks[j];
    const int part = static_cast<int>(j);
    if (b.is_text) {
      parts.push_back(json::Object{{"type", "text"}, {"text", b.text}});
      origin.parts.push_back(PartOrigin{part, text_path(b), true});
    } else {
      parts.push_back(b.part);
      origin.parts.push_back(PartOrigin{part, b.path, false});
    }
    if (b.breakpoint) {
      conv_.breakpoints.push_back({b.source, field + "[" + std::to_string(j) + "]", {}});
    }
  }
  return Value(std::move(parts));
}

void ConversionBuilder::add_content_message(std::string_view role,
                                            const std::vector<ContentBlock>& blocks,
                                            JsonPath source) {
  MessageOrigin origin{std::move(source), {}, {}};
  Value content = content_value(blocks, origin);
  messages_.push_back(json::Object{{"role", role}, {"content", std::move(content)}});
  add_origin(std::move(origin));
  open_assistant_ = role == "assistant";
}

void ConversionBuilder::add_assistant(const std::vector<ContentBlock>& texts,
                                      std::vector<ToolCallBlock> calls, JsonPath source) {
  MessageOrigin origin{std::move(source), {}, {}};
  json::Object message{{"role", "assistant"}};
  if (texts.empty() && !calls.empty()) {
    message.push_back({"content", Value()});
  } else {
    message.push_back({"content", content_value(texts, origin)});
  }
  if (!calls.empty()) {
    json::Array list;
    for (std::size_t k = 0; k < calls.size(); ++k) {
      if (calls[k].breakpoint) {
        conv_.breakpoints.push_back(
            {calls[k].source, message_field() + ".tool_calls[" + std::to_string(k) + "]", {}});
      }
      origin.tool_calls.push_back(std::move(calls[k].path));
      list.push_back(std::move(calls[k].call));
    }
    message.push_back({"tool_calls", Value(std::move(list))});
  }
  messages_.push_back(Value(std::move(message)));
  add_origin(std::move(origin));
  open_assistant_ = true;
}

void ConversionBuilder::add_tool_call(ToolCallBlock call, JsonPath source) {
  if (!open_assistant_ || messages_.empty()) {
    std::vector<ToolCallBlock> calls;
    calls.push_back(std::move(call));
    add_assistant({}, std::move(calls), std::move(source));
    return;
  }
  Value& message = messages_.back();
  // Extended where it lies when this request alone holds it (add_origin made it mutable); one a
  // kept turn shares is extended in a copy of its own.
  std::shared_ptr<const MessageOrigin>& last = conv_.messages.back();
  std::shared_ptr<MessageOrigin> origin = last.use_count() == 1
                                              ? std::const_pointer_cast<MessageOrigin>(last)
                                              : std::make_shared<MessageOrigin>(*last);
  Value* list = message.find("tool_calls");
  if (list == nullptr) {
    message.set("tool_calls", json::Array{});
    list = message.find("tool_calls");
  }
  const std::size_t k = list->as_array().size();
  if (call.breakpoint) {
    conv_.breakpoints.push_back({call.source,
                                 "messages[" + std::to_string(messages_.size() - 1) +
                                     "].tool_calls[" + std::to_string(k) + "]",
                                 {}});
  }
  origin->tool_calls.push_back(std::move(call.path));
  last = std::move(origin);
  list->as_array().push_back(std::move(call.call));
}

void ConversionBuilder::add_tool_result(std::string_view call_id,
                                        const std::vector<ContentBlock>& blocks, JsonPath source,
                                        std::string_view source_text, bool breakpoint) {
  MessageOrigin origin{std::move(source), {}, {}};
  if (breakpoint) {
    conv_.breakpoints.push_back({std::string(source_text), message_field() + ".content", {}});
  }
  Value content = content_value(blocks, origin);
  messages_.push_back(
      json::Object{{"role", "tool"}, {"tool_call_id", call_id}, {"content", std::move(content)}});
  add_origin(std::move(origin));
  open_assistant_ = false;
}

void ConversionBuilder::add_tool(const Value& list, const std::string& name,
                                 const Value* description, const Value* parameters,
                                 const Value* strict, const std::string& source_text,
                                 bool breakpoint) {
  json::Object function;
  function.reserve(4);
  if (description != nullptr) function.push_back({"description", list.share_part(*description)});
  function.push_back({"name", name});
  if (parameters != nullptr) function.push_back({"parameters", list.share_part(*parameters)});
  if (strict != nullptr) function.push_back({"strict", *strict});
  tools_.push_back(json::Object{{"function", Value(std::move(function))}, {"type", "function"}});
  if (breakpoint) conv_.breakpoints.push_back({source_text, {}, name});
}

void ConversionBuilder::mark_last_message(std::string source_text) {
  if (messages_.empty()) return;
  conv_.breakpoints.push_back(
      {std::move(source_text), "messages[" + std::to_string(messages_.size() - 1) + "]", {}});
}

void ConversionBuilder::keep_converted(const Value& tree, Mark from, std::size_t client_index) {
  if (!tree.is_shared() || conv_.breakpoints.size() != from.breakpoints) return;
  ConvertedTurn turn;
  turn.index = client_index;
  turn.open_assistant = open_assistant_;
  for (std::size_t k = from.messages; k < messages_.size(); ++k) {
    auto message = std::make_shared<const Value>(std::move(messages_[k]));
    messages_[k] = Value::shared(message);
    turn.messages.push_back(std::move(message));
    turn.origins.push_back(conv_.messages[k]);
  }
  internal::ConvertedTurnMemo::for_this_thread().keep(tree, std::move(turn));
}

namespace {

// `path`, which names the client's list entry `from` (messages[from]..., input[from]...), for
// the entry now at `to`.
void move_path(JsonPath& path, std::size_t from, std::size_t to) {
  if (path.size() >= 2 && !path[0].is_index && path[1].is_index && path[1].index == from) {
    path[1].index = to;
  }
}

}  // namespace

bool ConversionBuilder::add_kept(const Value& tree, std::size_t client_index) {
  const ConvertedTurn* kept = internal::ConvertedTurnMemo::for_this_thread().find(tree);
  if (kept == nullptr) return false;
  const ConvertedTurn& turn = *kept;
  for (std::size_t k = 0; k < turn.messages.size(); ++k) {
    messages_.push_back(Value::shared(turn.messages[k]));
    if (client_index == turn.index) {
      // Where a conversation only grows, each earlier turn stays where it was: shared as kept.
      conv_.messages.push_back(turn.origins[k]);
      continue;
    }
    MessageOrigin origin = *turn.origins[k];
    move_path(origin.source, turn.index, client_index);
    for (PartOrigin& part : origin.parts) move_path(part.source, turn.index, client_index);
    for (JsonPath& call : origin.tool_calls) move_path(call, turn.index, client_index);
    add_origin(std::move(origin));
  }
  open_assistant_ = turn.open_assistant;
  return true;
}

void ConversionBuilder::finish(json::Object& chat, json::Object options) {
  chat.push_back({"messages", Value(std::move(messages_))});
  if (!tools_.empty()) chat.push_back({"tools", Value(std::move(tools_))});
  for (json::Member& m : options) chat.push_back(std::move(m));
}

namespace internal {

ConvertedTurnMemo& ConvertedTurnMemo::for_this_thread() {
  thread_local ConvertedTurnMemo memo;
  return memo;
}

void ConvertedTurnMemo::keep(const json::Value& tree, ConvertedTurn turn) {
  std::size_t bytes = turn.messages.capacity() * sizeof(turn.messages[0]);
  for (const auto& message : turn.messages) {
    bytes += sizeof(Value) + json::internal::approx_tree_bytes(*message);
  }
  for (const auto& kept : turn.origins) {
    const MessageOrigin& origin = *kept;
    std::size_t steps = origin.source.size();
    for (const PartOrigin& part : origin.parts) steps += part.source.size() + 1;
    for (const JsonPath& call : origin.tool_calls) steps += call.size() + 1;
    bytes += sizeof(MessageOrigin) + steps * sizeof(PathStep);
  }
  SharedTreeMemo::keep(tree, std::move(turn), bytes);
}

}  // namespace internal
}  // namespace prefixgate::canon
