// An immutable text whose copies share one buffer.
//
// A message's text is copied with the message: the message memo (message_memo.h) hands each
// request a copy of the messages it keeps for a conversation's earlier turns, and copying their
// texts was a pass over every earlier turn's bytes on every request. A SharedText copies a
// reference instead. It reads as a std::string_view; assigning a new text replaces the buffer,
// never changes one that a copy may share.
//
//   ContentPart part{"text", std::string(body_text), {}};
//   ContentPart copy = part;             // no bytes copied
//   std::string_view t = copy.text;      // the same bytes as part.text
//   copy.text = rewritten;               // part.text is unchanged
#pragma once

#include <cstddef>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

namespace prefixgate::canon {

class SharedText {
 public:
  SharedText() = default;
  SharedText(std::string text)  // NOLINT(google-explicit-constructor): a text is a SharedText
      : text_(text.empty() ? nullptr : std::make_shared<const std::string>(std::move(text))) {}
  SharedText(std::string_view text) : SharedText(std::string(text)) {}  // NOLINT
  SharedText(const char* text) : SharedText(std::string(text)) {}       // NOLINT

  std::string_view view() const { return text_ ? std::string_view(*text_) : std::string_view(); }
  operator std::string_view() const { return view(); }  // NOLINT: reads as its text
  std::size_t size() const { return text_ ? text_->size() : 0; }
  bool empty() const { return size() == 0; }

  friend bool operator==(const SharedText& a, const SharedText& b) { return a.view() == b.view(); }
  friend std::ostream& operator<<(std::ostream& os, const SharedText& t) { return os << t.view(); }

 private:
  std::shared_ptr<const std::string> text_;  // null for the empty text
};

}  // namespace prefixgate::canon
