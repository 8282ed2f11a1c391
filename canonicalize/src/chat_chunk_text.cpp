// parse_plain_chat_chunk: a streamed chat chunk read from its text, without a tree.
// A chat upstream sends one such chunk a token; translating a stream into the Messages or
// Responses API read each one with json::parse, whose tree (a string and a member for every key
// and value, then freeing them) was a third of what relaying a token cost. This reads the chunks
// nearly every token is, a piece of text or a piece of a tool call's arguments, and gives up on
// anything else: the caller then parses the text whole, so every other chunk (logprobs, usage,
// errors, malformed text) is read as before.
//
// A scan of our own rather than simdjson's On Demand: for a chunk of a few hundred bytes its
// fixed costs (the padded copy, its first pass over the whole text, its iterators) were more than
// the reading itself. What the scan accepts, json::parse accepts too, and the reply is the same:
// the text's UTF-8 is checked as parse() checks it (simdjson's validator), strings for control
// characters, numbers and literals by parse()'s own readers, keys for repeats, and nothing but
// whitespace may follow the object. A string with a \u escape is decoded by parse() itself; a key
// with any escape is given up on.
#include <simdjson.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat_count.h"
#include "json_parse_text.h"
#include "prefixgate/canonicalize/chat_reply.h"
#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/json_token_scan.h"

namespace prefixgate::canon {
namespace {

using json::parse_text_detail::kReusableParserBytes;
using json::parse_text_detail::NumberRead;
using json::parse_text_detail::read_number;

// What a plain chunk's objects hold at most: more keys than this gives up (a plain chunk has
// about eight at its root).
constexpr std::size_t kMaxKeys = 32;

// The keys of one object met so far, to give up on a repeated one as parse() rejects it. Each is
// compared by its length and its first and last bytes first, so a key is mostly told apart from
// the others without a comparison of its bytes.
class KeysSeen {
 public:
  // False when `key` was met before in this object, or there are too many to keep.
  bool add(std::string_view key) {
    if (count_ == kMaxKeys) return false;
    const std::uint32_t mark = mark_of(key);
    for (std::size_t i = 0; i < count_; ++i) {
      if (keys_[i].mark == mark && std::string_view(keys_[i].data, keys_[i].size) == key) {
        return false;
      }
    }
    keys_[count_++] = Key{mark, key.data(), key.size()};
    return true;
  }

 private:
  // The key's length (its low bits) and its first and last bytes.
  static std::uint32_t mark_of(std::string_view key) {
    if (key.empty()) return 0;
    return static_cast<std::uint32_t>(key.size()) << 16 |
           static_cast<std::uint32_t>(static_cast<unsigned char>(key.front())) << 8 |
           static_cast<unsigned char>(key.back());
  }

  // Plain data, left unset: only the first count_ are read (an object is read a few times a
  // chunk, and clearing the array cost more than the keys' checks).
  struct Key {
    std::uint32_t mark;
    const char* data;
    std::size_t size;
  };
  Key keys_[kMaxKeys];
  std::size_t count_ = 0;
};

// The bytes a string's scan stops at: its closing quote, an escape, and the control characters
// JSON requires escaped.
constexpr std::array<bool, 256> kStringStop = [] {
  std::array<bool, 256> table{};
  for (int c = 0; c < 0x20; ++c) table[static_cast<std::size_t>(c)] = true;
  table['"'] = true;
  table['\\'] = true;
  return table;
}();

// Where a string's scan stops in text[at, size): the first closing quote, escape or control
// character (size when there is none). Sixteen bytes at a time while sixteen are left, which
// takes most strings of a chunk (keys, a token's text) in one step.
std::size_t find_string_stop(std::string_view text, std::size_t at) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i last_control = _mm_set1_epi8(0x1f);
  while (at + 16 <= text.size()) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text.data() + at));
    // A byte is at most 0x1f when the smaller of it and 0x1f is itself.
    const __m128i control = _mm_cmpeq_epi8(_mm_min_epu8(bytes, last_control), bytes);
    const __m128i stop = _mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(bytes, quote), _mm_cmpeq_epi8(bytes, backslash)), control);
    const auto mask = static_cast<unsigned>(_mm_movemask_epi8(stop));
    if (mask != 0) return at + static_cast<std::size_t>(__builtin_ctz(mask));
    at += 16;
  }
#endif
  while (at < text.size() && !kStringStop[static_cast<unsigned char>(text[at])]) ++at;
  return at;
}

// The text of one simple escape ("\n" -> '\n'); '\0' for 'u' and for any byte no escape has.
char simple_escape(char c) {
  switch (c) {
    case '"': return '"';
    case '\\': return '\\';
    case '/': return '/';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    default: return '\0';
  }
}

// A scan of a chunk's text. Each reading function takes one value after whitespace and returns
// false when the text is not what a plain chunk holds, or not what parse() accepts.
class ChunkScan : public json::JsonTokenScan {
 public:
  explicit ChunkScan(std::string_view text) : JsonTokenScan(text) {}

  // A key without escapes (one with any is given up on), and the colon after it.
  bool key(std::string_view& key) {
    if (peek() != '"') return false;
    const std::size_t begin = ++at_;
    at_ = find_string_stop(text_, at_);
    if (at_ >= text_.size() || text_[at_] != '"') return false;
    key = text_.substr(begin, at_ - begin);
    ++at_;
    return take(':');
  }

  // A string's value into `out` (its escapes undone; nullptr: checked, not kept), its opening
  // quote next.
  bool string(std::string* out) {
    const std::size_t begin = ++at_;
    at_ = find_string_stop(text_, at_);
    if (at_ >= text_.size()) return false;
    if (text_[at_] == '"') {
      if (out != nullptr) out->assign(text_.data() + begin, at_ - begin);
      ++at_;
      return true;
    }
    return escaped_string(begin, out != nullptr ? *out : scratch_);
  }

  // A scalar: a string (its value into `text`, when given), a number or a literal, checked as
  // parse() checks it. `is_null` says whether it was null. False for a container.
  bool scalar(std::string* text, bool& is_null) {
    is_null = false;
    switch (peek()) {
      case '"': return string(text);
      case '{':
      case '[':
      case '\0': return false;
      default: break;
    }
    // The literals as read_literal() spells them, without making their values.
    const std::string_view token = scalar_token();
    if (token == "null") {
      is_null = true;
      return true;
    }
    if (token == "true" || token == "false") return true;
    double ignored = 0;
    return read_number(token, ignored) == NumberRead::kOk;
  }

  // A number's token (up to the next ',', '}', ']' or whitespace), for a caller that wants its
  // value; empty when the next value is no number.
  std::string_view number_token() {
    const char first = peek();
    if (first != '-' && (first < '0' || first > '9')) return {};
    return scalar_token();
  }

 private:
  // The rest of a string from its first escape or control character at `at_`, `begin` just
  // after its opening quote. The simple escapes are undone here; a string with a \u escape is
  // decoded by parse() itself, whose rules for surrogates this need not repeat.
  bool escaped_string(std::size_t begin, std::string& out) {
    out.assign(text_.data() + begin, at_ - begin);
    while (at_ < text_.size()) {
      const char c = text_[at_];
      if (c == '"') {
        ++at_;
        return true;
      }
      if (c != '\\') {
        if (static_cast<unsigned char>(c) < 0x20) return false;
        out += c;
        ++at_;
        continue;
      }
      if (at_ + 1 >= text_.size()) return false;
      const char escape = text_[at_ + 1];
      if (escape == 'u') return unicode_string(begin, out);
      const char unescaped = simple_escape(escape);
      if (unescaped == '\0') return false;
      out += unescaped;
      at_ += 2;
    }
    return false;
  }

  // A string holding a \u escape, `begin` just after its opening quote: its end found by its
  // escapes, its value by parse().
  bool unicode_string(std::size_t begin, std::string& out) {
    std::size_t end = begin;
    while (end < text_.size() && text_[end] != '"') end += text_[end] == '\\' ? 2 : 1;
    if (end >= text_.size()) return false;
    std::optional<std::string> value =
        json::parse_text_detail::decode_string_literal(text_.substr(begin - 1, end - begin + 2));
    if (!value) return false;
    out = std::move(*value);
    at_ = end + 1;
    return true;
  }

  std::string scratch_;  // an escaped string nobody reads, decoded to be checked
};

// Calls `on_field(key)` for each member of the object whose '{' is next (each call takes the
// member's value; false gives up), and gives up on a repeated key.
template <class OnField>
bool for_each_field(ChunkScan& scan, OnField&& on_field) {
  if (!scan.take('{')) return false;
  if (scan.take('}')) return true;
  KeysSeen keys;
  do {
    std::string_view key;
    if (!scan.key(key) || !keys.add(key) || !on_field(key)) return false;
  } while (scan.take(','));
  return scan.take('}');
}

// A scalar member whose value counts only as a string (string_member in chat_reply.cpp): its
// text when it is one, "" otherwise.
bool string_field(ChunkScan& scan, std::string& out) {
  out.clear();
  bool is_null = false;
  return scan.scalar(&out, is_null);
}

bool other_scalar(ChunkScan& scan) {
  bool is_null = false;
  return scan.scalar(nullptr, is_null);
}

// A member that may be null but nothing else (usage, error): whether it was null.
bool null_only(ChunkScan& scan) {
  bool is_null = false;
  return scan.scalar(nullptr, is_null) && is_null;
}

// A tool call's `index` (count() in chat_reply.cpp): a number's count, `position` for any other
// scalar.
bool index_field(ChunkScan& scan, std::size_t position, std::size_t& index) {
  const std::string_view token = scan.number_token();
  if (token.empty()) {
    index = position;
    return other_scalar(scan);
  }
  double number = 0;
  if (read_number(token, number) != NumberRead::kOk) return false;
  index = chat_count(number);
  return true;
}

// `function`: absent and null read alike; a scalar is ignored; an object gives the name and the
// arguments' piece.
bool read_function(ChunkScan& scan, ChatToolCall& call) {
  if (scan.peek() != '{') return other_scalar(scan);
  return for_each_field(scan, [&](std::string_view key) {
    if (key == "name") return string_field(scan, call.name);
    if (key == "arguments") return string_field(scan, call.arguments);
    return other_scalar(scan);
  });
}

// One element of `tool_calls`, the `position`th: an object (anything else parse_chat_chunk
// refuses). Without an `index` of its own its position is its index.
bool read_tool_call(ChunkScan& scan, std::size_t position, ChatToolCall& call) {
  call.index = position;
  return for_each_field(scan, [&](std::string_view key) {
    if (key == "index") return index_field(scan, position, call.index);
    if (key == "id") return string_field(scan, call.id);
    if (key == "function") return read_function(scan, call);
    return other_scalar(scan);
  });
}

// `tool_calls`: null, or an array of calls (anything else parse_chat_chunk refuses).
bool read_tool_calls(ChunkScan& scan, std::vector<ChatToolCall>& calls) {
  if (scan.peek() != '[') return null_only(scan);
  scan.take('[');
  if (scan.take(']')) return true;
  do {
    if (scan.peek() != '{') return false;
    calls.emplace_back();
    if (!read_tool_call(scan, calls.size() - 1, calls.back())) return false;
  } while (scan.take(','));
  return scan.take(']');
}

bool read_delta(ChunkScan& scan, ChatReply& out) {
  // Absent and null read alike (checks::present); anything else must be the delta object.
  if (scan.peek() != '{') return null_only(scan);
  return for_each_field(scan, [&](std::string_view key) {
    if (key == "content") return string_field(scan, out.text);
    if (key == "tool_calls") return read_tool_calls(scan, out.tool_calls);
    return other_scalar(scan);
  });
}

bool read_choice(ChunkScan& scan, ChatReply& out) {
  return for_each_field(scan, [&](std::string_view key) {
    if (key == "delta") return read_delta(scan, out);
    if (key == "finish_reason") return string_field(scan, out.finish_reason);
    if (key == "stop_reason") return string_field(scan, out.stop_string);
    return other_scalar(scan);
  });
}

// `choices`: an array of at most one choice (parse_chat_chunk reads the first; more would have
// to be checked as parse() checks them).
bool read_choices(ChunkScan& scan, ChatReply& out) {
  if (!scan.take('[')) return false;
  if (scan.take(']')) return true;
  return read_choice(scan, out) && scan.take(']');
}

}  // namespace

std::optional<ChatReply> parse_plain_chat_chunk(std::string_view text) {
  if (text.size() > kReusableParserBytes || !simdjson::validate_utf8(text.data(), text.size())) {
    return std::nullopt;
  }
  ChunkScan scan(text);
  ChatReply out;
  bool has_choices = false;
  const bool plain = for_each_field(scan, [&](std::string_view key) {
    if (key == "choices") {
      has_choices = true;
      return read_choices(scan, out);
    }
    if (key == "id") return string_field(scan, out.id);
    if (key == "model") return string_field(scan, out.model);
    if (key == "usage" || key == "error") return null_only(scan);
    return other_scalar(scan);
  });
  // Without choices parse_chat_chunk fails; after the object, only whitespace.
  if (!plain || !has_choices || !scan.at_end()) return std::nullopt;
  return out;
}

}  // namespace prefixgate::canon
