// A position in a JSON text and the steps the tree-free readers take over it
// (json::visit_member_fields, parse_plain_chat_chunk, the gateway's engine-event line scan):
// whitespace passed over, a byte taken, a scalar's token cut out. What each value means, and
// what is checked of it, is theirs.
//
//   class UsageScan : public json::JsonTokenScan {   // a reader adds its own values
//     using JsonTokenScan::JsonTokenScan;
//   };
//   UsageScan scan(text);
//   if (!scan.take('{')) return false;               // '{' after any whitespace, taken
//   std::string_view token = scan.scalar_token();    // "12", "true", "null" as written
//   bool whole = scan.at_end();                      // only whitespace left
#pragma once

#include <cstddef>
#include <string_view>

namespace prefixgate::json {

class JsonTokenScan {
 public:
  explicit JsonTokenScan(std::string_view text) : text_(text) {}

  // Whether `c` comes next, after whitespace; taken when it does.
  bool take(char c) {
    skip_whitespace();
    if (at_ >= text_.size() || text_[at_] != c) return false;
    ++at_;
    return true;
  }

  // The next value's first byte after whitespace ('\0' at the end).
  char peek() {
    skip_whitespace();
    return at_ < text_.size() ? text_[at_] : '\0';
  }

  // Whether only whitespace is left.
  bool at_end() {
    skip_whitespace();
    return at_ == text_.size();
  }

  // A scalar's token after whitespace: up to the next ',', '}', ']' or whitespace (empty when
  // one of those comes first).
  std::string_view scalar_token() {
    skip_whitespace();
    const std::size_t begin = at_;
    while (at_ < text_.size() && !ends_token(text_[at_])) ++at_;
    return text_.substr(begin, at_ - begin);
  }

 protected:
  static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
  static bool ends_token(char c) { return c == ',' || c == '}' || c == ']' || is_space(c); }

  void skip_whitespace() {
    // Most tokens follow the last at once: any byte above a space is no whitespace.
    if (at_ < text_.size() && static_cast<unsigned char>(text_[at_]) > ' ') return;
    while (at_ < text_.size() && is_space(text_[at_])) ++at_;
  }

  std::string_view text_;
  std::size_t at_ = 0;
};

}  // namespace prefixgate::json
