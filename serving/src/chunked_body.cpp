#include "prefixgate/serving/chunked_body.h"

#include <algorithm>
#include <cstring>

#include "prefixgate/base/hex_digit.h"

namespace prefixgate::serving {
namespace {

// RFC 9110's tchar: what a token (a header field's or a chunk extension's name) is made of.
bool is_token_char(char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return c != '\0' && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

// What follows a chunk's size on its line: nothing, or extensions (RFC 9112 section 7.1.1),
//   chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
// with a value a token or a quoted string, taken as Beast's parser takes them: a quoted string
// ends at its first unescaped '"' (what lies between is not checked), and a name with no value
// may not be followed by white space. A request's extensions are not used, but a line they do
// not fit is malformed, and a proxy that passes over what its peers refuse invites smuggling.
bool valid_extensions(std::string_view s) {
  std::size_t i = 0;
  const auto white = [&] {
    const std::size_t from = i;
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    return i > from;
  };
  const auto token = [&] {
    const std::size_t from = i;
    while (i < s.size() && is_token_char(s[i])) ++i;
    return i > from;
  };
  while (i < s.size()) {
    white();
    if (i == s.size() || s[i] != ';') return false;
    for (;;) {  // at a ';'
      ++i;
      white();
      if (!token()) return false;
      const bool white_after_name = white();
      if (i < s.size() && s[i] == ';') continue;
      if (i == s.size() || s[i] != '=') return i == s.size() && !white_after_name;
      ++i;
      white();
      if (i == s.size()) return false;
      if (s[i] != '"') {
        if (!token()) return false;
        break;
      }
      for (++i;; ++i) {  // the quoted string, up to its closing '"'
        if (i >= s.size()) return false;
        if (s[i] == '"') break;
        if (s[i] == '\\') ++i;
      }
      ++i;
      break;
    }
  }
  return true;
}

// A size line: its hex digits, then nothing or extensions. False for anything else.
bool read_size(std::string_view line, std::uint64_t& size) {
  std::size_t digits = 0;
  size = 0;
  for (; digits < line.size(); ++digits) {
    const int d = hex_digit(line[digits]);
    if (d < 0) break;
    if (size >> 60 != 0) return false;  // past 64 bits
    size = size << 4 | static_cast<std::uint64_t>(d);
  }
  return digits > 0 && valid_extensions(line.substr(digits));
}

// A trailer field's line: a name, then ':' (its value is not used), or a continuation line
// (obsolete folding: it starts with white space). Passed over either way, but a line that is
// neither ends no field: the message is malformed.
bool valid_trailer(std::string_view line) {
  if (line.front() == ' ' || line.front() == '\t') return true;
  std::size_t name = 0;
  while (name < line.size() && is_token_char(line[name])) ++name;
  return name > 0 && name < line.size() && line[name] == ':';
}

}  // namespace

std::size_t ChunkedBody::line_length(std::string_view in, bool size_line, bool& bad) {
  bad = false;
  const std::size_t window = std::min(in.size(), kMaxLineBytes + 2);
  for (std::size_t from = 0; from < window;) {
    const void* lf = std::memchr(in.data() + from, '\n', window - from);
    if (lf == nullptr) break;
    const auto at = static_cast<std::size_t>(static_cast<const char*>(lf) - in.data());
    if (at > 0 && in[at - 1] == '\r') return at - 1;
    // A bare LF ends nothing. A size line's extension may hold one (inside a quoted string,
    // as Beast's parser takes it), and the size before it is checked on its own; anywhere else
    // it is an error.
    if (!size_line) {
      bad = true;
      return std::string_view::npos;
    }
    from = at + 1;
  }
  bad = in.size() > kMaxLineBytes + 1;
  return std::string_view::npos;
}

ChunkedBody::Result ChunkedBody::decode(std::string_view in, std::string& out, std::size_t& used) {
  used = 0;
  for (;;) {
    const std::string_view rest = in.substr(used);
    switch (state_) {
      case State::kDone: return Result::kDone;
      case State::kError: return Result::kError;
      case State::kData: {
        const auto take = static_cast<std::size_t>(std::min<std::uint64_t>(left_, rest.size()));
        out.append(rest.data(), take);
        used += take;
        left_ -= take;
        if (left_ > 0) return Result::kMore;
        state_ = State::kDataEnd;
        break;
      }
      case State::kDataEnd: {
        // The CRLF after a chunk's data, which may come a byte at a time.
        if (rest.empty()) return Result::kMore;
        if (rest[0] != '\r') return fail();
        if (rest.size() == 1) return Result::kMore;
        if (rest[1] != '\n') return fail();
        used += 2;
        state_ = State::kSize;
        break;
      }
      case State::kSize:
      case State::kTrailer: {
        bool bad = false;
        const std::size_t length = line_length(rest, state_ == State::kSize, bad);
        if (bad) return fail();
        if (length == std::string_view::npos) return Result::kMore;
        const std::string_view line = rest.substr(0, length);
        used += length + 2;
        if (state_ == State::kTrailer) {
          // Trailer fields are passed over; the empty line ends the message.
          if (line.empty()) {
            state_ = State::kDone;
            return Result::kDone;
          }
          if (!valid_trailer(line)) return fail();
          break;
        }
        std::uint64_t size = 0;
        if (!read_size(line, size)) return fail();
        left_ = size;
        state_ = size == 0 ? State::kTrailer : State::kData;
        break;
      }
    }
  }
}

}  // namespace prefixgate::serving
