#include "prefixgate/serving/chunked_body.h"

#include <algorithm>
#include <cstring>

#include "prefixgate/base/hex_digit.h"

namespace prefixgate::serving {
namespace {

// A size line: its hex digits, then nothing, or an extension after ';' (with spaces or tabs
// before it, RFC 9112's BWS). False for anything else.
bool read_size(std::string_view line, std::uint64_t& size) {
  std::size_t digits = 0;
  size = 0;
  for (; digits < line.size(); ++digits) {
    const int d = hex_digit(line[digits]);
    if (d < 0) break;
    if (size >> 60 != 0) return false;  // past 64 bits
    size = size << 4 | static_cast<std::uint64_t>(d);
  }
  if (digits == 0) return false;
  std::string_view rest = line.substr(digits);
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
  return rest.empty() ? digits == line.size() : rest.front() == ';';
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
