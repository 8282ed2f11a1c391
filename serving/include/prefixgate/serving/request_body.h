// The body type of the requests the servers read: a std::string, as Beast's string_body, read
// by appending each received buffer.
//
// string_body's reader grows the string with resize(), which zero-fills every byte before the
// received bytes are copied over them: a second pass over each request body (a 30 KB agent turn
// is 30 KB of memset). This reader reserves the announced length once and appends. It reserves
// kReadablePastEnd bytes more, which the JSON parser may read past a body's end: with them it
// parses the body where it lies instead of copying it (readable_past_end()). Writing is
// string_body's.
#pragma once

#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/optional/optional.hpp>
#include <cstddef>
#include <cstdint>
#include <string>

namespace prefixgate::serving {

// The JSON parser's padding (json::kParsePadding; serving does not depend on canonicalize).
inline constexpr std::size_t kReadablePastEnd = 64;

// Bytes of `body`'s buffer past its end: json::ParseLimits::readable_past_end for it.
inline std::size_t readable_past_end(const std::string& body) {
  return body.capacity() - body.size();
}

struct RequestBody {
  using value_type = std::string;

  static std::uint64_t size(const value_type& body) { return body.size(); }

  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(boost::beast::http::header<isRequest, Fields>&, value_type& body) : body_(body) {}

    void init(const boost::optional<std::uint64_t>& length, boost::beast::error_code& ec) {
      if (length) {
        if (*length > body_.max_size() - kReadablePastEnd) {
          ec = boost::beast::http::error::buffer_overflow;
          return;
        }
        body_.reserve(static_cast<std::size_t>(*length) + kReadablePastEnd);
      }
      ec = {};
    }

    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, boost::beast::error_code& ec) {
      std::size_t n = 0;
      for (const auto b : boost::beast::buffers_range_ref(buffers)) {
        body_.append(static_cast<const char*>(b.data()), b.size());
        n += b.size();
      }
      ec = {};
      return n;
    }

    void finish(boost::beast::error_code& ec) { ec = {}; }

   private:
    value_type& body_;
  };

  using writer = boost::beast::http::string_body::writer;
};

}  // namespace prefixgate::serving
