#include "server/upstream_answer_parser.h"

#include <algorithm>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <cstring>

#include "prefixgate/serving/http.h"

namespace prefixgate::gateway::server {
namespace {

namespace http = boost::beast::http;

// Characters of a field name (RFC 9110 `token`) and of a field value or reason phrase (VCHAR,
// obs-text, space and tab), as lookup tables.
constexpr std::array<bool, 256> make_table(bool value_chars) {
  std::array<bool, 256> t{};
  for (int c = 0; c < 256; ++c) {
    if (value_chars) {
      t[c] = c == '\t' || (c >= 0x20 && c != 0x7f);
    } else {
      t[c] =
          (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
    }
  }
  return t;
}
constexpr std::array<bool, 256> kTokenChar = make_table(false);
constexpr std::array<bool, 256> kValueChar = make_table(true);

bool all_of(std::string_view s, const std::array<bool, 256>& table) {
  for (const char c : s) {
    if (!table[static_cast<unsigned char>(c)]) return false;
  }
  return true;
}

// Calls f(element) for each non-empty element of a comma-separated list of tokens, trimmed;
// false, having called it for none, when an element is not a token (as Beast's parser refuses
// such a Connection or Transfer-Encoding).
template <class F>
bool for_each_token(std::string_view list, F&& f) {
  for (std::string_view rest = list;;) {
    const std::size_t comma = rest.find(',');
    if (!all_of(serving::trim_ows(rest.substr(0, comma)), kTokenChar)) return false;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view element = serving::trim_ows(list.substr(0, comma));
    if (!element.empty()) f(element);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return true;
}

bool fail(boost::beast::error_code& ec, http::error e) {
  ec = e;
  return false;
}

}  // namespace

std::string_view UpstreamAnswerParser::content_type() const {
  if (content_type_size_ > content_type_short_.size()) return content_type_long_;
  return std::string_view(content_type_short_.data(), content_type_size_);
}

bool UpstreamAnswerParser::keep_alive() const {
  const bool open = version_ >= 11 ? !close_ : keep_alive_field_ && !close_;
  return open && !needs_eof_;
}

bool UpstreamAnswerParser::header(std::string_view in, std::size_t& used, error_code& ec) {
  used = 0;
  const std::size_t end = in.find("\r\n\r\n");
  if (end == std::string_view::npos || end + 4 > kMaxHeaderBytes) {
    if (in.size() >= kMaxHeaderBytes) return fail(ec, http::error::header_limit);
    return false;
  }
  // Each line of the head ends with its CRLF; a line ends at its first LF.
  const std::string_view head = in.substr(0, end + 2);
  std::size_t at = 0;
  const auto next_line = [&](std::string_view& line) {
    const void* lf = std::memchr(head.data() + at, '\n', head.size() - at);
    const std::size_t nl = static_cast<std::size_t>(static_cast<const char*>(lf) - head.data());
    if (nl == at || head[nl - 1] != '\r') return fail(ec, http::error::bad_line_ending);
    line = head.substr(at, nl - 1 - at);
    at = nl + 1;
    return true;
  };

  // The status line: HTTP/1.0 or 1.1, a space, three digits, a space and the reason (maybe
  // empty).
  std::string_view line;
  if (!next_line(line)) return false;
  if (line.size() < 13 || !line.starts_with("HTTP/1.") || (line[7] != '0' && line[7] != '1') ||
      line[8] != ' ') {
    return fail(ec, http::error::bad_version);
  }
  version_ = 10 + static_cast<unsigned>(line[7] - '0');
  unsigned status = 0;
  for (std::size_t i = 9; i < 12; ++i) {
    if (line[i] < '0' || line[i] > '9') return fail(ec, http::error::bad_status);
    status = status * 10 + static_cast<unsigned>(line[i] - '0');
  }
  if (status < 100) return fail(ec, http::error::bad_status);
  if (line[12] != ' ' || !all_of(line.substr(13), kValueChar)) {
    return fail(ec, http::error::bad_reason);
  }
  status_ = status;

  // The fields: a token, a colon, the value between optional spaces. A line that starts with
  // a space (obs-fold) has no name: refused.
  while (at < head.size()) {
    if (!next_line(line)) return false;
    const std::size_t colon = line.find(':');
    if (colon == 0 || colon == std::string_view::npos ||
        !all_of(line.substr(0, colon), kTokenChar)) {
      return fail(ec, http::error::bad_field);
    }
    const std::string_view value = serving::trim_ows(line.substr(colon + 1));
    if (!all_of(value, kValueChar)) return fail(ec, http::error::bad_value);
    if (!field(line.substr(0, colon), value, ec)) return false;
  }

  // The body's framing (RFC 9112 section 6.3): none after 1xx, 204 and 304; chunked when that
  // is the last transfer coding, else up to the close; a length; else up to the close.
  if (status_ / 100 == 1 || status_ == 204 || status_ == 304) {
    chunked_ = false;
    left_ = 0;
  } else if (has_transfer_encoding_) {
    until_eof_ = !chunked_;
  } else if (!has_length_) {
    until_eof_ = true;
  }
  needs_eof_ = until_eof_;
  header_done_ = true;
  used = end + 4;
  return true;
}

bool UpstreamAnswerParser::field(std::string_view name, std::string_view value, error_code& ec) {
  switch (name.size()) {
    case 10:
      if (boost::beast::iequals(name, "connection")) {
        const bool tokens = for_each_token(value, [&](std::string_view token) {
          if (boost::beast::iequals(token, "close")) close_ = true;
          if (boost::beast::iequals(token, "keep-alive")) keep_alive_field_ = true;
        });
        if (!tokens) return fail(ec, http::error::bad_value);
      }
      return true;
    case 12:
      if (boost::beast::iequals(name, "content-type") && !has_content_type_) {
        has_content_type_ = true;
        content_type_size_ = value.size();
        if (value.size() <= content_type_short_.size()) {
          std::memcpy(content_type_short_.data(), value.data(), value.size());
        } else {
          content_type_long_.assign(value.data(), value.size());
        }
      }
      return true;
    case 14: {
      if (!boost::beast::iequals(name, "content-length")) return true;
      // Digits only, at most 19 of them (under 2^63), the same value if sent twice, and never
      // beside a transfer coding: any of those could frame the answer two ways.
      if (value.empty() || value.size() > 19 || has_transfer_encoding_) {
        return fail(ec, http::error::bad_content_length);
      }
      std::uint64_t length = 0;
      for (const char c : value) {
        if (c < '0' || c > '9') return fail(ec, http::error::bad_content_length);
        length = length * 10 + static_cast<std::uint64_t>(c - '0');
      }
      if (has_length_ && length != left_) return fail(ec, http::error::bad_content_length);
      has_length_ = true;
      left_ = length;
      return true;
    }
    case 17: {
      if (!boost::beast::iequals(name, "transfer-encoding")) return true;
      if (has_length_) return fail(ec, http::error::bad_transfer_encoding);
      has_transfer_encoding_ = true;
      // Whether chunked is the last coding of all the fields' lists together.
      // Chunked must be the last coding: any after it, in this field or another, is refused,
      // and so is another Transfer-Encoding field after it, even an empty one (as Beast's
      // parser refuses them).
      bool after_chunked = chunked_;
      const bool tokens = for_each_token(value, [&](std::string_view coding) {
        after_chunked = after_chunked || chunked_;
        chunked_ = boost::beast::iequals(coding, "chunked");
      });
      if (!tokens || after_chunked) return fail(ec, http::error::bad_transfer_encoding);
      return true;
    }
    default: return true;
  }
}

std::size_t UpstreamAnswerParser::body(std::string_view in, error_code& ec) {
  ec = {};
  if (!header_done_ || chunked_ || is_done() || body_data_ == nullptr) return 0;
  std::size_t n = std::min(in.size(), body_room_);
  if (!until_eof_) n = static_cast<std::size_t>(std::min<std::uint64_t>(n, left_));
  std::memcpy(body_data_, in.data(), n);
  body_data_ += n;
  body_room_ -= n;
  if (!until_eof_) left_ -= n;
  return n;
}

void UpstreamAnswerParser::put_eof(error_code& ec) {
  ec = {};
  if (header_done_ && until_eof_) {
    until_eof_ = false;  // the end of a body that lasts until the close
    return;
  }
  if (!is_done()) ec = http::error::partial_message;
}

}  // namespace prefixgate::gateway::server
