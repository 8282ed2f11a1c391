// parse_plain_chat_chunk: a streamed chat chunk read with simdjson On Demand, without a tree.
// A chat upstream sends one such chunk a token; translating a stream into the Messages or
// Responses API read each one with json::parse, whose tree (a string and a member for every key
// and value, then freeing them) was a third of what relaying a token cost. This reads the chunks
// nearly every token is, a piece of text or a piece of a tool call's arguments, and gives up on
// anything else: the caller then parses the text whole, so every other chunk (logprobs, usage,
// errors, malformed text) is read as before. What it accepts, json::parse accepts too, and the
// reply is the same: every value is read and checked as parse() checks it, and keys are checked
// for repeats, so a chunk parse() would reject is given up on here too.
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat_count.h"
#include "json_parse_text.h"
#include "prefixgate/canonicalize/chat_reply.h"

namespace prefixgate::canon {
namespace {

namespace ondemand = simdjson::ondemand;
using namespace json::parse_text_detail;

// What a plain chunk's objects hold at most: more keys than this gives up (a plain chunk has
// about eight at its root).
constexpr std::size_t kMaxKeys = 32;

// The keys of one object met so far, to give up on a repeated one as parse() rejects it.
class KeysSeen {
 public:
  // False when `key` was met before in this object, or there are too many to keep.
  bool add(std::string_view key) {
    if (count_ == keys_.size()) return false;
    if (std::find(keys_.begin(), keys_.begin() + count_, key) != keys_.begin() + count_) {
      return false;
    }
    keys_[count_++] = key;
    return true;
  }

 private:
  std::array<std::string_view, kMaxKeys> keys_{};
  std::size_t count_ = 0;
};

// A scalar as parse() reads it: a string's escapes, a number's grammar and range, a literal's
// spelling. `text` receives a string's value (unescaped, valid until the next document) and is
// left empty for other scalars; `is_null` says whether the value was null. False for a container
// or a value parse() would reject.
bool read_scalar(ondemand::value& value, std::string_view& text, bool& is_null) {
  text = {};
  is_null = false;
  ondemand::json_type type;
  if (value.type().get(type)) return false;
  switch (type) {
    case ondemand::json_type::string: return !value.get_string().get(text);
    case ondemand::json_type::number: {
      double ignored = 0;
      return read_number(trim_trailing_whitespace(value.raw_json_token()), ignored) ==
             NumberRead::kOk;
    }
    case ondemand::json_type::boolean:
    case ondemand::json_type::null: {
      const std::optional<json::Value> literal =
          read_literal(trim_trailing_whitespace(value.raw_json_token()));
      is_null = literal && literal->is_null();
      return literal.has_value();
    }
    case ondemand::json_type::array:
    case ondemand::json_type::object: return false;
  }
  return false;
}

// Calls `on_field(key, value)` for each member of `object` (which returns false to give up),
// and gives up on a repeated key.
template <class OnField>
bool for_each_field(ondemand::object& object, OnField&& on_field) {
  KeysSeen keys;
  for (auto result : object) {
    ondemand::field field;
    std::string_view key;
    if (std::move(result).get(field) || field.unescaped_key().get(key)) return false;
    if (!keys.add(key) || !on_field(key, field.value())) return false;
  }
  return true;
}

// A scalar member whose value counts only as a string (string_member in chat_reply.cpp): its
// text when it is one, "" otherwise.
bool string_field(ondemand::value& value, std::string& out) {
  std::string_view text;
  bool is_null = false;
  if (!read_scalar(value, text, is_null)) return false;
  out.assign(text);
  return true;
}

bool other_scalar(ondemand::value& value) {
  std::string_view text;
  bool is_null = false;
  return read_scalar(value, text, is_null);
}

// A member that may be null but nothing else (tool_calls, usage, error): whether it was null.
bool null_only(ondemand::value& value) {
  std::string_view text;
  bool is_null = false;
  return read_scalar(value, text, is_null) && is_null;
}

bool holds_null(ondemand::value& value) {
  ondemand::json_type type;
  return !value.type().get(type) && type == ondemand::json_type::null;
}

// A tool call's `index` (count() in chat_reply.cpp): a number's count, `position` for any other
// scalar.
bool index_field(ondemand::value& value, std::size_t position, std::size_t& index) {
  ondemand::json_type type;
  if (value.type().get(type)) return false;
  if (type != ondemand::json_type::number) {
    index = position;
    return other_scalar(value);
  }
  double number = 0;
  if (read_number(trim_trailing_whitespace(value.raw_json_token()), number) != NumberRead::kOk) {
    return false;
  }
  index = chat_count(number);
  return true;
}

// `function`: absent and null read alike; a scalar is ignored; an object gives the name and the
// arguments' piece.
bool read_function(ondemand::value& value, ChatToolCall& call) {
  ondemand::json_type type;
  if (value.type().get(type)) return false;
  if (type != ondemand::json_type::object) return other_scalar(value);
  ondemand::object function;
  if (value.get_object().get(function)) return false;
  return for_each_field(function, [&](std::string_view key, ondemand::value& v) {
    if (key == "name") return string_field(v, call.name);
    if (key == "arguments") return string_field(v, call.arguments);
    return other_scalar(v);
  });
}

// One element of `tool_calls`, the `position`th: an object (anything else parse_chat_chunk
// refuses). Without an `index` of its own its position is its index.
bool read_tool_call(ondemand::value& value, std::size_t position, ChatToolCall& call) {
  ondemand::object object;
  if (value.get_object().get(object)) return false;
  call.index = position;
  return for_each_field(object, [&](std::string_view key, ondemand::value& v) {
    if (key == "index") return index_field(v, position, call.index);
    if (key == "id") return string_field(v, call.id);
    if (key == "function") return read_function(v, call);
    return other_scalar(v);
  });
}

// `tool_calls`: null, or an array of calls (anything else parse_chat_chunk refuses).
bool read_tool_calls(ondemand::value& value, std::vector<ChatToolCall>& calls) {
  if (holds_null(value)) return null_only(value);
  ondemand::array array;
  if (value.get_array().get(array)) return false;
  for (auto element : array) {
    ondemand::value call;
    if (std::move(element).get(call)) return false;
    calls.emplace_back();
    if (!read_tool_call(call, calls.size() - 1, calls.back())) return false;
  }
  return true;
}

bool read_delta(ondemand::value& value, ChatReply& out) {
  ondemand::object delta;
  if (value.get_object().get(delta)) return false;
  return for_each_field(delta, [&](std::string_view key, ondemand::value& v) {
    if (key == "content") return string_field(v, out.text);
    if (key == "tool_calls") return read_tool_calls(v, out.tool_calls);
    return other_scalar(v);
  });
}

bool read_choice(ondemand::value& value, ChatReply& out) {
  ondemand::object choice;
  if (value.get_object().get(choice)) return false;
  return for_each_field(choice, [&](std::string_view key, ondemand::value& v) {
    if (key == "delta") {
      // Absent and null read alike (checks::present); anything else must be the delta object.
      return holds_null(v) ? null_only(v) : read_delta(v, out);
    }
    if (key == "finish_reason") return string_field(v, out.finish_reason);
    if (key == "stop_reason") return string_field(v, out.stop_string);
    return other_scalar(v);
  });
}

// `choices`: an array of at most one choice (parse_chat_chunk reads the first; more would have
// to be checked as parse() checks them).
bool read_choices(ondemand::value& value, ChatReply& out) {
  ondemand::array choices;
  if (value.get_array().get(choices)) return false;
  std::size_t n = 0;
  for (auto element : choices) {
    ondemand::value choice;
    if (++n > 1 || std::move(element).get(choice) || !read_choice(choice, out)) return false;
  }
  return true;
}

}  // namespace

std::optional<ChatReply> parse_plain_chat_chunk(std::string_view text) {
  if (text.size() > kReusableParserBytes) return std::nullopt;
  thread_local ondemand::parser parser;
  thread_local std::string buffer;
  ondemand::document doc;
  ondemand::object root;
  if (parser.iterate(padded_in(buffer, text)).get(doc) || doc.get_object().get(root)) {
    return std::nullopt;
  }
  ChatReply out;
  bool has_choices = false;
  const bool plain = for_each_field(root, [&](std::string_view key, ondemand::value& v) {
    if (key == "choices") {
      has_choices = true;
      return read_choices(v, out);
    }
    if (key == "id") return string_field(v, out.id);
    if (key == "model") return string_field(v, out.model);
    if (key == "usage" || key == "error") return null_only(v);
    return other_scalar(v);
  });
  // Without choices parse_chat_chunk fails. After the object, only whitespace: the iterator is
  // then past the last token (OUT_OF_BOUNDS), as parse() checks it.
  const char* location = nullptr;
  if (!plain || !has_choices || doc.current_location().get(location) != simdjson::OUT_OF_BOUNDS) {
    return std::nullopt;
  }
  return out;
}

}  // namespace prefixgate::canon
