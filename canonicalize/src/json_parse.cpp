// json::parse: simdjson On Demand into an order-preserving json::Value tree.
//
// simdjson's stage 1 validates UTF-8 and finds the structural characters; we then walk the
// document once, recursively, copying every value out (On Demand's views die with the parser).
// What simdjson does not check for us, we check here:
//   - nesting depth (On Demand has no depth limit outside its development checks), checked
//     before each descent so a 100k-deep `[[[[...` never reaches the recursion;
//   - the number grammar (we never call get_double(): RFC 8259 section 6 is checked on the raw
//     token and the double comes from std::from_chars, so integers beyond uint64 still parse);
//   - the literals true/false/null, also on the raw token;
//   - trailing content after a scalar root, and after a container root;
//   - duplicate keys, compared after unescaping.
// simdjson 3.0.1 rejects lone surrogate escapes ("\ud800", "\udc00", "\udc00\ud800") with the
// same STRING_ERROR as a bad escape such as "\x"; on that error path we rescan the raw string to
// tell the two apart, so a lone surrogate is kInvalidUtf8 and a bad escape kInvalidJson.
#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "prefixgate/base/check.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::json {
namespace {

namespace ondemand = simdjson::ondemand;

// Documents up to this size reuse a per-thread parser (simdjson's advice: reuse parsers, their
// buffers are sized to the largest input seen). Larger ones get a parser of their own, so a
// thread does not keep tens of MiB of index buffers alive after one big request.
constexpr std::size_t kReusableParserBytes = std::size_t{1} << 20;

// Keys shown in error messages are cut to this many bytes (on a code point boundary).
constexpr std::size_t kMaxKeyInMessage = 64;

// Objects with more members than this are checked for duplicates by sorting, not pairwise.
constexpr std::size_t kPairwiseDuplicateCheckMax = 32;

bool is_json_whitespace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string_view trim_trailing_whitespace(std::string_view s) {
  while (!s.empty() && is_json_whitespace(s.back())) s.remove_suffix(1);
  return s;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// RFC 8259 section 6: number = [ minus ] int [ frac ] [ exp ], int = zero / ( digit1-9 *DIGIT ).
bool is_json_number(std::string_view s) {
  std::size_t i = 0;
  const std::size_t n = s.size();
  if (i < n && s[i] == '-') ++i;
  if (i >= n) return false;
  if (s[i] == '0') {
    ++i;
  } else if (is_digit(s[i])) {
    while (i < n && is_digit(s[i])) ++i;
  } else {
    return false;
  }
  if (i < n && s[i] == '.') {
    ++i;
    if (i >= n || !is_digit(s[i])) return false;
    while (i < n && is_digit(s[i])) ++i;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
    if (i >= n || !is_digit(s[i])) return false;
    while (i < n && is_digit(s[i])) ++i;
  }
  return i == n;
}

// For a grammatical number that std::from_chars found out of range: whether it is too large
// (rather than too small). Out-of-range values have a decimal exponent beyond +-300, so the
// sign of a saturating estimate of it is reliable.
bool number_overflows(std::string_view s) {
  std::size_t i = (!s.empty() && s[0] == '-') ? 1 : 0;
  std::int64_t int_digits = 0;  // significant digits before the point
  std::int64_t leading_fraction_zeros = 0;
  bool seen_nonzero = false;
  for (; i < s.size() && is_digit(s[i]); ++i) {
    if (s[i] != '0') seen_nonzero = true;
    if (seen_nonzero) ++int_digits;
  }
  if (i < s.size() && s[i] == '.') {
    for (++i; i < s.size() && is_digit(s[i]); ++i) {
      if (!seen_nonzero && s[i] == '0') ++leading_fraction_zeros;
      if (s[i] != '0') seen_nonzero = true;
    }
  }
  std::int64_t exponent = 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    bool negative = false;
    if (s[i] == '+' || s[i] == '-') negative = s[i++] == '-';
    for (; i < s.size(); ++i)
      exponent = std::min<std::int64_t>(exponent * 10 + (s[i] - '0'), 1'000'000);
    if (negative) exponent = -exponent;
  }
  // The value is about 10^(int_digits - 1 + exponent), or 10^(exponent - zeros - 1) when < 1.
  const std::int64_t magnitude =
      int_digits > 0 ? int_digits - 1 + exponent : exponent - leading_fraction_zeros - 1;
  return magnitude > 0;
}

// Offset of the first byte that is not part of well-formed UTF-8 (Unicode 15, table 3-7), or
// s.size(). Only used to say where simdjson's UTF8_ERROR is.
std::size_t first_invalid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      len = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      len = 3;
      if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
      if (b0 == 0xED) hi = 0x9F;  // no UTF-16 surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      len = 4;
      if (b0 == 0xF0) lo = 0x90;
      if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    } else {
      return i;
    }
    if (i + len > s.size()) return i;
    const auto b1 = static_cast<unsigned char>(s[i + 1]);
    if (b1 < lo || b1 > hi) return i;
    for (std::size_t k = 2; k < len; ++k) {
      const auto bk = static_cast<unsigned char>(s[i + k]);
      if (bk < 0x80 || bk > 0xBF) return i;
    }
    i += len;
  }
  return s.size();
}

// Offset of the first control character that JSON requires escaped (RFC 8259 section 7: inside
// a string, U+0000..U+001F; outside, anything but the four whitespace bytes). Only used to say
// where simdjson's UNESCAPED_CHARS is.
std::size_t first_unescaped_control(std::string_view s) {
  bool in_string = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      } else if (c < 0x20) {
        return i;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c < 0x20 && !is_json_whitespace(static_cast<char>(c))) {
      return i;
    }
  }
  return s.size();
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The code unit of a `\uXXXX` escape starting at s[i] (the backslash), or -1.
int unicode_escape_at(std::string_view s, std::size_t i) {
  if (i + 6 > s.size() || s[i] != '\\' || s[i + 1] != 'u') return -1;
  int unit = 0;
  for (std::size_t k = i + 2; k < i + 6; ++k) {
    const int h = hex_value(s[k]);
    if (h < 0) return -1;
    unit = unit * 16 + h;
  }
  return unit;
}

// Why simdjson rejected a string, whose body (after the opening quote) starts at `body`.
// Returns the offset within `body` of a lone surrogate escape and sets *lone_surrogate, or the
// offset of the first invalid escape. `body` runs to the end of the input; the closing quote
// ends the scan.
std::size_t classify_string_error(std::string_view body, bool* lone_surrogate) {
  *lone_surrogate = false;
  for (std::size_t i = 0; i < body.size() && body[i] != '"'; ++i) {
    if (body[i] != '\\') continue;
    if (i + 1 >= body.size()) return i;
    const char e = body[i + 1];
    if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
        e == 't') {
      ++i;
      continue;
    }
    const int unit = unicode_escape_at(body, i);
    if (unit < 0) return i;
    if (unit >= 0xD800 && unit <= 0xDBFF) {
      // RFC 8259 section 7: a high surrogate must be followed by an escaped low surrogate.
      const int next = unicode_escape_at(body, i + 6);
      if (next < 0xDC00 || next > 0xDFFF) {
        *lone_surrogate = true;
        return i;
      }
      i += 11;
    } else if (unit >= 0xDC00 && unit <= 0xDFFF) {
      *lone_surrogate = true;
      return i;
    } else {
      i += 5;
    }
  }
  return 0;  // simdjson and this scan disagree; point at the string itself
}

// A key for an error message: quoted, cut at kMaxKeyInMessage bytes on a code point boundary.
std::string describe_key(std::string_view key) {
  std::string out = "\"";
  if (key.size() <= kMaxKeyInMessage) {
    out += key;
  } else {
    std::size_t cut = kMaxKeyInMessage;
    while (cut > 0 && (static_cast<unsigned char>(key[cut]) & 0xC0) == 0x80) --cut;
    out += key.substr(0, cut);
    out += "...";
  }
  out += '"';
  return out;
}

// "invalid number (at byte 12)": what is wrong, then where.
std::string located(std::string_view what, std::size_t offset, std::size_t input_size) {
  std::string message(what);
  if (offset < input_size) {
    message += " (at byte " + std::to_string(offset) + ")";
  } else {
    message += " (at end of input)";
  }
  return message;
}

const char* describe_simdjson_error(simdjson::error_code code) {
  switch (code) {
    case simdjson::EMPTY: return "no JSON value (empty or only whitespace)";
    case simdjson::TAPE_ERROR:
      return "unexpected character, or a missing or misplaced comma, colon or bracket";
    case simdjson::INCOMPLETE_ARRAY_OR_OBJECT:
      return "unbalanced brackets, or content after the JSON value";
    case simdjson::UNCLOSED_STRING: return "unterminated string";
    case simdjson::STRING_ERROR: return "invalid escape sequence in string";
    case simdjson::UNESCAPED_CHARS: return "control character not allowed here (escape it)";
    case simdjson::TRAILING_CONTENT: return "content after the JSON value";
    case simdjson::INCORRECT_TYPE: return "expected a value";
    case simdjson::T_ATOM_ERROR:
    case simdjson::F_ATOM_ERROR:
    case simdjson::N_ATOM_ERROR: return "invalid literal (expected true, false or null)";
    case simdjson::NUMBER_ERROR: return "invalid number";
    default: return simdjson::error_message(code);
  }
}

std::string_view raw_token(ondemand::value& node) {
  return node.raw_json_token();
}

std::string_view raw_token(ondemand::document& node) {
  std::string_view token;
  // Only fails on a dead iterator, which type() has already ruled out; an empty token then
  // fails the checks that follow.
  if (node.raw_json_token().get(token)) return {};
  return token;
}

// One key seen in the object being built: its unescaped text (a view into simdjson's string
// buffer, stable for the whole parse) and the offset of its opening quote.
struct SeenKey {
  std::string_view key;
  std::size_t offset;
};

// The stacks a parse builds containers on: each array's elements and each object's members
// collect here and then move into a vector allocated once at its final size, instead of
// growing one (and moving it) per doubling. Kept per thread between parses; a parse that left
// them far larger than usual gives the memory back.
struct ParseScratch {
  std::vector<Member> members;
  std::vector<Value> items;

  void trim() {
    constexpr std::size_t kKeep = 4096;
    members.clear();
    items.clear();
    if (members.capacity() > kKeep) members.shrink_to_fit();
    if (items.capacity() > kKeep) items.shrink_to_fit();
  }
};

class TreeBuilder {
 public:
  TreeBuilder(std::string_view input, const ParseLimits& limits, ondemand::document& doc,
              std::vector<MemberSpan>* root_members, ParseScratch& scratch)
      : input_(input),
        max_depth_(limits.max_depth),
        doc_(doc),
        root_members_(root_members),
        scratch_(scratch) {}

  bool build_root(Value& out) {
    ondemand::json_type type;
    if (auto err = doc_.type().get(type)) return fail_simdjson(err);
    const bool container =
        type == ondemand::json_type::array || type == ondemand::json_type::object;
    if (!container) {
      // A scalar root: simdjson's root getters check trailing content only for some types,
      // so check it here for all: only whitespace may follow the token.
      const std::string_view token = trim_trailing_whitespace(raw_token(doc_));
      const std::size_t end = offset_of(token.data()) + token.size();
      for (std::size_t i = end; i < input_.size(); ++i) {
        if (!is_json_whitespace(input_[i])) {
          return fail(ErrorCode::kInvalidJson, i,
                      describe_simdjson_error(simdjson::TRAILING_CONTENT));
        }
      }
    }
    if (!build(doc_, type, out, 0)) return false;
    if (container) {
      // OUT_OF_BOUNDS means the iterator is past the last token; anything else is more input.
      const char* location = nullptr;
      if (doc_.current_location().get(location) != simdjson::OUT_OF_BOUNDS) {
        return fail(ErrorCode::kInvalidJson, location ? offset_of(location) : input_.size(),
                    describe_simdjson_error(simdjson::TRAILING_CONTENT));
      }
    }
    return true;
  }

  Error take_error() { return std::move(error_); }

 private:
  // `depth` is the number of containers around `node`. Node is ondemand::document for the root
  // and ondemand::value below it.
  template <class Node>
  bool build(Node& node, ondemand::json_type type, Value& out, std::size_t depth) {
    switch (type) {
      case ondemand::json_type::array: return build_array(node, out, depth);
      case ondemand::json_type::object: return build_object(node, out, depth);
      case ondemand::json_type::string: return build_string(node, out);
      case ondemand::json_type::number: return build_number(raw_token(node), out);
      case ondemand::json_type::boolean:
      case ondemand::json_type::null: return build_literal(raw_token(node), out);
    }
    return fail(ErrorCode::kInvalidJson, current_offset(), "unexpected value");
  }

  template <class Node>
  bool build_array(Node& node, Value& out, std::size_t depth) {
    // Checked before descending: the recursion is never deeper than max_depth.
    if (depth + 1 > max_depth_) return fail_too_deep();
    ondemand::array array;
    if (auto err = node.get_array().get(array)) return fail_simdjson(err);
    // The elements go on the shared stack (nested containers push theirs above and take them
    // off before the next element), then into an array allocated once at its final size.
    const std::size_t base = scratch_.items.size();
    for (auto element : array) {
      ondemand::value child;
      if (auto err = std::move(element).get(child)) return fail_simdjson(err);
      ondemand::json_type type;
      if (auto err = child.type().get(type)) return fail_simdjson(err);
      Value item;
      if (!build(child, type, item, depth + 1)) {
        prepend_path_index(scratch_.items.size() - base, error_.param);
        return false;
      }
      scratch_.items.push_back(std::move(item));
    }
    out = Value(take(scratch_.items, base));
    return true;
  }

  template <class Node>
  bool build_object(Node& node, Value& out, std::size_t depth) {
    if (depth + 1 > max_depth_) return fail_too_deep();
    ondemand::object object;
    if (auto err = node.get_object().get(object)) return fail_simdjson(err);
    // This object's keys occupy seen_keys_[base, ...) and its members scratch_.members[
    // members_base, ...); nested objects push theirs above and pop them before our next key.
    const std::size_t base = seen_keys_.size();
    const std::size_t members_base = scratch_.members.size();
    for (auto result : object) {
      ondemand::field field;
      if (auto err = std::move(result).get(field)) return fail_simdjson(err);
      const char* quote = field.key().raw() - 1;
      std::string_view key;
      if (auto err = field.unescaped_key().get(key)) {
        return fail_string(err, offset_of(quote));
      }
      seen_keys_.push_back(SeenKey{key, offset_of(quote)});
      ondemand::value& child = field.value();
      ondemand::json_type type;
      if (auto err = child.type().get(type)) return fail_simdjson(err);
      Member member{std::string(key), Value()};
      // The value's first byte. A scalar is its own token; a string or container, once built,
      // leaves the iterator on the ',' or '}' after it: the span is what lies between, less
      // trailing whitespace.
      const bool record = depth == 0 && root_members_ != nullptr;
      const std::string_view token = record ? raw_token(child) : std::string_view();
      const std::size_t begin = record ? offset_of(token.data()) : 0;
      if (!build(child, type, member.value, depth + 1)) {
        prepend_path_key(key, error_.param);
        return false;
      }
      if (record) {
        const bool scalar = type == ondemand::json_type::number ||
                            type == ondemand::json_type::boolean ||
                            type == ondemand::json_type::null;
        std::size_t end =
            scalar ? begin + trim_trailing_whitespace(token).size() : current_offset();
        while (end > begin && is_json_whitespace(input_[end - 1])) --end;
        root_members_->push_back(MemberSpan{begin, end});
      }
      scratch_.members.push_back(std::move(member));
      seen_keys_.resize(base + (scratch_.members.size() - members_base));
    }
    if (const SeenKey* duplicate = find_duplicate(base)) {
      fail(ErrorCode::kDuplicateKey, duplicate->offset,
           "duplicate key " + describe_key(duplicate->key) + " in object");
      prepend_path_key(duplicate->key, error_.param);
      return false;
    }
    seen_keys_.resize(base);
    out = Value(take(scratch_.members, members_base));
    return true;
  }

  // The elements of `stack` from `base` on, moved into a vector of exactly their number.
  template <class T>
  static std::vector<T> take(std::vector<T>& stack, std::size_t base) {
    const auto first = stack.begin() + static_cast<std::ptrdiff_t>(base);
    std::vector<T> out(std::make_move_iterator(first), std::make_move_iterator(stack.end()));
    stack.erase(first, stack.end());
    return out;
  }

  // The first key of seen_keys_[base, end) that repeats an earlier one, in document order.
  const SeenKey* find_duplicate(std::size_t base) const {
    const SeenKey* begin = seen_keys_.data() + base;
    const std::size_t n = seen_keys_.size() - base;
    if (n <= kPairwiseDuplicateCheckMax) {
      for (std::size_t j = 1; j < n; ++j) {
        for (std::size_t i = 0; i < j; ++i) {
          if (begin[i].key == begin[j].key) return &begin[j];
        }
      }
      return nullptr;
    }
    // Sorting, not hashing: a fixed-seed hash of client-chosen keys invites collisions, and
    // std::sort is O(n log n) whatever the keys.
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return begin[a].key < begin[b].key; });
    const SeenKey* first_duplicate = nullptr;
    for (std::size_t k = 1; k < n; ++k) {
      // stable_sort keeps equal keys in document order, so order[k] repeats order[k - 1].
      if (begin[order[k]].key == begin[order[k - 1]].key &&
          (first_duplicate == nullptr || begin + order[k] < first_duplicate)) {
        first_duplicate = begin + order[k];
      }
    }
    return first_duplicate;
  }

  template <class Node>
  bool build_string(Node& node, Value& out) {
    const std::size_t quote = offset_of(raw_token(node).data());
    std::string_view text;
    if (auto err = node.get_string().get(text)) return fail_string(err, quote);
    out = Value(std::string(text));
    return true;
  }

  bool build_number(std::string_view token, Value& out) {
    const std::size_t at = offset_of(token.data());
    token = trim_trailing_whitespace(token);
    if (!is_json_number(token)) {
      return fail(ErrorCode::kInvalidJson, at, describe_simdjson_error(simdjson::NUMBER_ERROR));
    }
    double value = 0;
    // from_chars is locale-independent and correctly rounded, and unlike simdjson's
    // get_double() keeps no limit on digits; it takes a leading '-' but the grammar allows no '+'.
    const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
    if (ec == std::errc::result_out_of_range) {
      if (number_overflows(token)) {
        // ECMAScript's JSON.parse would make this Infinity, which neither JSON nor RFC 8785
        // (section 3.2.2.3) can write back.
        return fail(ErrorCode::kInvalidValue, at, "number is too large for a double");
      }
      value = token[0] == '-' ? -0.0 : 0.0;  // underflow rounds to zero, as in ECMAScript
    } else if (ec != std::errc() || end != token.data() + token.size()) {
      return fail(ErrorCode::kInvalidJson, at, describe_simdjson_error(simdjson::NUMBER_ERROR));
    }
    out = Value(Number{value, std::string(token)});
    return true;
  }

  bool build_literal(std::string_view token, Value& out) {
    const std::size_t at = offset_of(token.data());
    token = trim_trailing_whitespace(token);
    if (token == "true") {
      out = Value(true);
    } else if (token == "false") {
      out = Value(false);
    } else if (token == "null") {
      out = Value();
    } else {
      return fail(ErrorCode::kInvalidJson, at, describe_simdjson_error(simdjson::N_ATOM_ERROR));
    }
    return true;
  }

  // A string (value or key) whose opening quote is at `quote` failed to unescape.
  bool fail_string(simdjson::error_code err, std::size_t quote) {
    if (err != simdjson::STRING_ERROR) return fail_simdjson(err);
    bool lone_surrogate = false;
    const std::size_t at =
        quote + 1 + classify_string_error(input_.substr(quote + 1), &lone_surrogate);
    if (lone_surrogate) {
      return fail(ErrorCode::kInvalidUtf8, at,
                  "unpaired UTF-16 surrogate escape " + std::string(input_.substr(at, 6)) +
                      " (not a Unicode character)");
    }
    return fail(ErrorCode::kInvalidJson, at, describe_simdjson_error(err));
  }

  bool fail_too_deep() {
    return fail(ErrorCode::kTooDeep, current_offset(),
                "nesting deeper than " + std::to_string(max_depth_) + " levels");
  }

  bool fail_simdjson(simdjson::error_code err) {
    const ErrorCode code =
        err == simdjson::UTF8_ERROR ? ErrorCode::kInvalidUtf8 : ErrorCode::kInvalidJson;
    return fail(code, current_offset(), describe_simdjson_error(err));
  }

  bool fail(ErrorCode code, std::size_t offset, std::string_view what) {
    error_ = make_error(code, located(what, offset, input_.size()));
    return false;
  }

  std::size_t current_offset() {
    const char* location = nullptr;
    if (doc_.current_location().get(location) || location == nullptr) return input_.size();
    return offset_of(location);
  }

  std::size_t offset_of(const char* p) const {
    PG_DCHECK(p >= input_.data() && p <= input_.data() + input_.size());
    return static_cast<std::size_t>(p - input_.data());
  }

  std::string_view input_;  // the padded copy simdjson is reading
  std::size_t max_depth_;
  ondemand::document& doc_;
  std::vector<SeenKey> seen_keys_;
  std::vector<MemberSpan>* root_members_;  // recorded when not null
  ParseScratch& scratch_;
  Error error_{ErrorCode::kInvalidJson, {}, {}};
};

Error too_large(std::size_t bytes, std::size_t limit) {
  return make_error(ErrorCode::kTooLarge, "JSON body is " + std::to_string(bytes) +
                                              " bytes; the limit is " + std::to_string(limit));
}

// Allocation failed, or simdjson's 4 GiB ceiling: only when max_bytes allows huge bodies.
Error too_large_to_parse(std::size_t bytes) {
  return make_error(ErrorCode::kTooLarge,
                    "JSON body of " + std::to_string(bytes) + " bytes is too large to parse");
}

Error from_iterate_error(simdjson::error_code err, std::string_view input) {
  std::size_t at = input.size();
  ErrorCode code = ErrorCode::kInvalidJson;
  if (err == simdjson::UTF8_ERROR) {
    code = ErrorCode::kInvalidUtf8;
    at = first_invalid_utf8(input);
  } else if (err == simdjson::UNESCAPED_CHARS) {
    at = first_unescaped_control(input);
  } else if (err == simdjson::CAPACITY || err == simdjson::MEMALLOC) {
    return too_large_to_parse(input.size());
  }
  const std::string_view what =
      err == simdjson::UTF8_ERROR ? "bytes that are not UTF-8" : describe_simdjson_error(err);
  return make_error(code, located(what, at, input.size()));
}

Result<Value> parse_with(ondemand::parser& parser, simdjson::padded_string_view padded,
                         const ParseLimits& limits, std::vector<MemberSpan>* root_members) {
  const std::string_view input(padded.data(), padded.length());
  ondemand::document doc;
  if (auto err = parser.iterate(padded).get(doc)) return from_iterate_error(err, input);
  thread_local ParseScratch scratch;
  struct Trim {
    ParseScratch& s;
    ~Trim() { s.trim(); }  // also after a failed parse, which leaves elements on the stacks
  } trim{scratch};
  TreeBuilder builder(input, limits, doc, root_members, scratch);
  Value root;
  if (!builder.build_root(root)) return builder.take_error();
  return root;
}

Result<Value> parse_text(std::string_view text, const ParseLimits& limits,
                         std::vector<MemberSpan>* root_members) {
  if (text.size() > limits.max_bytes) return too_large(text.size(), limits.max_bytes);
  // On Demand reads up to SIMDJSON_PADDING bytes past the end: it needs its own padded copy.
  // Usual sizes are copied into the thread's buffer (no allocation per request), larger ones
  // into a copy of their own, so that one huge body does not keep its memory for the thread's
  // life.
  if (text.size() <= kReusableParserBytes) {
    thread_local ondemand::parser reused;
    thread_local std::string buffer;
    buffer.assign(text);
    buffer.append(simdjson::SIMDJSON_PADDING, '\0');
    return parse_with(reused,
                      simdjson::padded_string_view(buffer.data(), text.size(), buffer.size()),
                      limits, root_members);
  }
  const simdjson::padded_string padded(text);
  if (padded.data() == nullptr) return too_large_to_parse(text.size());
  ondemand::parser once;
  return parse_with(once, padded, limits, root_members);
}

}  // namespace

Result<Value> parse(std::string_view text, const ParseLimits& limits) {
  return parse_text(text, limits, nullptr);
}

std::optional<Value> parse_member(std::string_view text, std::string_view key,
                                  const ParseLimits& limits) {
  if (text.size() > limits.max_bytes) return std::nullopt;
  const simdjson::padded_string padded(text);
  if (padded.data() == nullptr) return std::nullopt;
  // As parse(): the thread's parser for usual sizes, a parser of its own for a larger text (so
  // that one huge answer does not keep its buffers for the thread's life).
  thread_local ondemand::parser reused;
  std::optional<ondemand::parser> once;
  ondemand::parser& parser = text.size() <= kReusableParserBytes ? reused : once.emplace();
  ondemand::document doc;
  ondemand::object root;
  if (parser.iterate(padded).get(doc) || doc.get_object().get(root)) return std::nullopt;
  for (auto result : root) {
    ondemand::field field;
    std::string_view name;
    if (std::move(result).get(field) || field.unescaped_key().get(name)) return std::nullopt;
    if (name != key) continue;  // the loop skips the value
    // The member's text: containers report theirs; a scalar is its token (less the whitespace
    // before whatever follows it).
    ondemand::value& value = field.value();
    ondemand::json_type type;
    if (value.type().get(type)) return std::nullopt;
    std::string_view raw;
    if (type == ondemand::json_type::object) {
      ondemand::object object;
      if (value.get_object().get(object) || object.raw_json().get(raw)) return std::nullopt;
    } else if (type == ondemand::json_type::array) {
      ondemand::array array;
      if (value.get_array().get(array) || array.raw_json().get(raw)) return std::nullopt;
    } else {
      raw = trim_trailing_whitespace(raw_token(value));
    }
    auto parsed = parse(raw, limits);
    if (!parsed) return std::nullopt;
    return std::move(*parsed);
  }
  return std::nullopt;
}

Result<Value> parse(std::string_view text, const ParseLimits& limits,
                    std::vector<MemberSpan>& root_members) {
  root_members.clear();
  auto parsed = parse_text(text, limits, &root_members);
  if (!parsed) root_members.clear();
  return parsed;
}

}  // namespace prefixgate::json
