// Any bytes as a chunked body (a request's, or an upstream's answer): serving::ChunkedBody decodes
// them whole and a byte at a time to the same data, end and error, and wherever Beast's parser
// takes them as a whole chunked body, ChunkedBody ends at the same byte with the same data.
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "prefixgate/serving/chunked_body.h"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using prefixgate::serving::ChunkedBody;

struct Decoded {
  ChunkedBody::Result result = ChunkedBody::Result::kMore;
  std::string data;
  std::size_t used = 0;
};

// `body` arriving `step` bytes at a time (0: at once), each call given what the last left.
Decoded decode(std::string_view body, std::size_t step) {
  ChunkedBody decoder;
  Decoded d;
  std::size_t given = 0;
  do {
    given = step == 0 ? body.size() : std::min(body.size(), given + step);
    std::size_t used = 0;
    d.result = decoder.decode(body.substr(d.used, given - d.used), d.data, used);
    d.used += used;
  } while (d.result == ChunkedBody::Result::kMore && given < body.size());
  return d;
}

[[noreturn]] void fail(const char* what, std::string_view body) {
  std::fprintf(stderr, "fuzz_chunked_body: %s (%zu bytes)\n", what, body.size());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const Decoded whole = decode(body, 0);
  const Decoded bytewise = decode(body, 1);
  if (whole.result != bytewise.result || whole.data != bytewise.data ||
      whole.used != bytewise.used) {
    fail("whole and a byte at a time differ", body);
  }
  if (whole.result == ChunkedBody::Result::kDone && whole.used > body.size()) {
    fail("took more than it was given", body);
  }

  const std::string head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
  const std::string message = head + std::string(body);
  http::response_parser<http::string_body> parser;
  parser.eager(true);
  parser.body_limit(boost::none);
  beast::error_code ec;
  const std::size_t used = parser.put(boost::asio::buffer(message), ec);
  if (!ec && parser.is_done()) {
    if (whole.result != ChunkedBody::Result::kDone)
      fail("Beast ends a body ChunkedBody does not", body);
    if (whole.data != parser.get().body()) fail("data differs from Beast's", body);
    if (whole.used != used - head.size()) fail("ends at another byte than Beast", body);
  }
  return 0;
}
