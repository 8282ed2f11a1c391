// Any bytes as a replica's answer to the gateway's UpstreamAnswerParser: the header read whole and
// as it grows a byte at a time to the same outcome; a header it takes is one Beast's response
// parser takes too, read the same way (status, first Content-Type, chunked, keep-alive, where a
// close always closes); and a body of a length is never taken past its end.
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/upstream_answer_parser.h"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using prefixgate::gateway::server::UpstreamAnswerParser;

struct Header {
  bool ok = false;
  bool error = false;
  std::size_t used = 0;
};

[[noreturn]] void fail(const char* what, std::string_view answer) {
  std::fprintf(stderr, "fuzz_upstream_answer: %s (%zu bytes)\n", what, answer.size());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view answer(reinterpret_cast<const char*>(data), size);

  UpstreamAnswerParser whole;
  Header w;
  beast::error_code ec;
  w.ok = whole.header(answer, w.used, ec);
  w.error = static_cast<bool>(ec);

  // The same bytes arriving one at a time, the header asked for after each.
  UpstreamAnswerParser grown;
  Header g;
  for (std::size_t n = 0; n <= answer.size(); ++n) {
    ec = {};
    g.ok = grown.header(answer.substr(0, n), g.used, ec);
    g.error = static_cast<bool>(ec);
    if (g.ok || g.error) break;
  }
  if (w.ok != g.ok || w.error != g.error || w.used != g.used) {
    fail("whole and a byte at a time differ", answer);
  }
  if (!w.ok) return 0;
  if (w.used > answer.size() || !answer.substr(0, w.used).ends_with("\r\n\r\n")) {
    fail("the header does not end with its empty line", answer);
  }
  if (whole.result_int() != grown.result_int() || whole.chunked() != grown.chunked() ||
      whole.keep_alive() != grown.keep_alive() || whole.content_type() != grown.content_type()) {
    fail("whole and a byte at a time read different headers", answer);
  }

  // Beast's response parser takes the same header, and reads it the same way.
  http::response_parser<http::empty_body> beast_parser;
  beast_parser.eager(false);
  beast_parser.body_limit(boost::none);  // a replica's answer is relayed, not held: no limit
  ec = {};
  const std::size_t beast_used = beast_parser.put(boost::asio::buffer(answer.data(), w.used), ec);
  if (ec || !beast_parser.is_header_done() || beast_used != w.used) {
    fail("takes a header Beast's parser refuses", answer);
  }
  const unsigned status = beast_parser.get().result_int();
  if (whole.result_int() != status) fail("another status than Beast's", answer);
  const auto type = beast_parser.get().find(http::field::content_type);
  const std::string_view beast_type =
      type == beast_parser.get().end() ? std::string_view() : std::string_view(type->value());
  if (whole.content_type() != beast_type) fail("another Content-Type than Beast's", answer);
  const bool has_body = status / 100 != 1 && status != 204 && status != 304;
  if (has_body && whole.chunked() != beast_parser.chunked()) {
    fail("chunked where Beast's is not, or not where it is", answer);
  }
  // Beast keeps an HTTP/1.0 connection that names keep-alive even when it names close too; a
  // close always closes (RFC 9112, 9.3), as the gateway's parser reads it.
  bool close_token = false;
  for (auto [it, end] = beast_parser.get().equal_range(http::field::connection); it != end; ++it) {
    for (const auto token : http::token_list{it->value()}) {
      if (beast::iequals(token, "close")) close_token = true;
    }
  }
  if (whole.keep_alive() != (beast_parser.keep_alive() && !close_token)) {
    fail("another keep-alive than Beast's", answer);
  }

  // A body of a length: never more than the length, whatever follows.
  if (!whole.chunked()) {
    std::string room(64, '\0');
    std::string_view rest = answer.substr(w.used);
    std::size_t taken = 0;
    for (;;) {
      whole.lend_body(room.data(), room.size());
      const std::size_t n = whole.body(rest, ec);
      if (ec) fail("an error from body()", answer);
      if (n == 0) break;
      taken += n;
      rest.remove_prefix(n);
    }
    const auto length = beast_parser.content_length();
    if (has_body && length && taken > *length) fail("a body taken past its length", answer);
    if (has_body && length && taken < *length && !rest.empty()) {
      fail("a body not taken while it lasts", answer);
    }
  }
  return 0;
}
