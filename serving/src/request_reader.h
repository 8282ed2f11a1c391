// Reads one request from a connection whose first bytes are already in its buffer: the header
// first (so the caller can refuse a transfer coding before any body is read), then the body.
//
//   RequestReader reader(c, deadline, options.request_timeout, read_room);
//   beast::error_code ec;
//   if (!reader.header_buffered(parser, ec) && !ec) ec = co_await reader.header(parser);
//   ... 400/431/408 (reader.timed_out()) on ec; refuse what the header alone rules out ...
//   if (!reader.body_buffered(parser, max_body, ec) && !ec) ec = co_await reader.body(...);
//   reader.finish();                                         // before the handler runs
//
// The *_buffered calls parse what the buffer holds in the caller: a request that arrived whole
// (nearly every one) costs no coroutine frame and no wait.
//
// A chunked body is decoded by ChunkedBody into the parser's message, not by Beast's parser:
// Beast 1.81's chunk parser asserts (basic_parser.ipp, `n >= 5`) when a last chunk shorter than
// five bytes is given to it twice, which its own read loop does when the chunk arrives in
// pieces; ChunkedBody takes a chunk in any pieces. A Content-Length body is Beast's, whose
// body_limit refuses an announced length over the limit before any of it is read.
//
// Waits are reads on the socket under the request's deadline, armed at the first wait (a request
// that arrived whole arms nothing) and held until finish(): headers or a body dribbled a byte at
// a time (slowloris) run out of it and get 408.
#pragma once

#include <boost/beast/http/parser.hpp>
#include <chrono>
#include <cstddef>

#include "prefixgate/serving/chunked_body.h"
#include "prefixgate/serving/http.h"
#include "prefixgate/serving/request_body.h"
#include "prefixgate/serving/socket_deadline.h"

namespace prefixgate::serving {

using RequestParser = http::request_parser<RequestBody>;

class RequestReader {
 public:
  RequestReader(Connection& c, SocketDeadline& deadline, std::chrono::milliseconds timeout,
                std::size_t read_room)
      : c_(c), deadline_(deadline), timeout_(timeout), read_room_(read_room) {}
  ~RequestReader() { finish(); }
  RequestReader(const RequestReader&) = delete;
  RequestReader& operator=(const RequestReader&) = delete;

  // What the buffer holds, parsed without a wait: true when the part is read or `ec` says why
  // it cannot be; false, with no error, when more bytes are needed (then co_await the reads).
  bool header_buffered(RequestParser& parser, beast::error_code& ec);
  bool body_buffered(RequestParser& parser, std::size_t max_body_bytes, beast::error_code& ec);
  // The rest of the part, read under the deadline. Errors as Beast's reads give them:
  // http::error::header_limit, body_limit, bad_chunk, the parser's others for malformed HTTP,
  // partial_message when the client ended the stream mid-request, operation_aborted when the
  // deadline passed (timed_out()).
  Awaitable<beast::error_code> header(RequestParser& parser);
  Awaitable<beast::error_code> body(RequestParser& parser, std::size_t max_body_bytes);
  // Whether the client waits for a go-ahead before it sends the body (`Expect: 100-continue`,
  // HTTP/1.1): curl asks for one with a body over 1 MB, and waits a second without it.
  static bool expects_continue(const Request& req);
  // The go-ahead, `100 Continue`, under the connection's write timeout. Sent only when the body
  // has still to come (RFC 9110 section 10.1.1), so once a request at most.
  Awaitable<beast::error_code> send_continue();
  // Disarms the deadline: the handler's own reads and writes must not run under it.
  void finish();
  bool timed_out() const { return timed_out_; }

 private:
  // One read of up to `room` more bytes into the connection's buffer.
  Awaitable<beast::error_code> read_more(std::size_t room);
  // The room for the next read of a body: the rest of a Content-Length body in one read where
  // it fits.
  std::size_t body_room(const RequestParser& parser) const;

  Connection& c_;
  SocketDeadline& deadline_;
  std::chrono::milliseconds timeout_;
  std::size_t read_room_;
  bool armed_ = false;
  bool timed_out_ = false;
  ChunkedBody chunked_;  // a chunked body's decoder, across reads
};

}  // namespace prefixgate::serving
