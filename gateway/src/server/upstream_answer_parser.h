// The parser of a replica's answer: its HTTP/1.1 or 1.0 header, keeping only what the gateway reads
// of it (the status, the first Content-Type, how the body is framed and whether the connection
// stays open), and a body of a length, or one that ends where the replica closes, written into a
// buffer the caller lends. A chunked body is the caller's, decoded by serving::ChunkedBody.
//
// Beast's parser (basic_parser) took about 550 instructions a field of a replica's header: each
// name's characters checked one at a time, looked up among the 400 names Beast knows, each value
// scanned one character at a time (its faster scan needs SSE 4.2 at build time). This one finds
// the header's end and each line's with memchr and checks names and values against tables:
// about a fifth of that. It takes what Beast's parser takes of the answers replicas send (the
// tests compare the two over answers of every shape, in any pieces) and refuses, as Beast's
// does, what would let a malformed answer be read as another: a bare LF, a field without a name
// or with a space before its colon, a folded line, Content-Length twice with two values or beside
// Transfer-Encoding, a length that is not digits.
//
//   UpstreamAnswerParser answer;
//   std::size_t used = 0;
//   if (answer.header(bytes, used, ec)) consume(used);  // false, no error: more bytes first
//   answer.result(); answer.content_type(); answer.chunked();
//   answer.lend_body(chunk, size);                       // a body of a length or up to EOF:
//   consume(answer.body(bytes, ec));                     // taken into the chunk, up to its room
//   std::size_t got = size - answer.body_room();
//   answer.put_eof(ec);                                  // the replica closed: the end, or short
#pragma once

#include <array>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/status.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace prefixgate::gateway::server {

class UpstreamAnswerParser {
 public:
  using error_code = boost::beast::error_code;

  // A header longer than this is refused (http::error::header_limit), Beast's default for a
  // response's.
  static constexpr std::size_t kMaxHeaderBytes = 8192;

  // Reads the header from the start of `in`. True once it is whole: `used` is its length, the
  // empty line's CRLF included. False with no error while it is not (give it again with more
  // bytes after); false with `ec` (an http::error) for a malformed header or a long one.
  bool header(std::string_view in, std::size_t& used, error_code& ec);
  bool is_header_done() const { return header_done_; }

  unsigned result_int() const { return status_; }
  boost::beast::http::status result() const { return boost::beast::http::int_to_status(status_); }
  unsigned version() const { return version_; }  // 10 or 11
  // The first Content-Type field's value ("" when there is none).
  std::string_view content_type() const;
  // The body is chunked: the caller decodes it (serving::ChunkedBody), not body().
  bool chunked() const { return chunked_; }
  // The connection may carry another request once this answer is read whole: HTTP/1.1 without
  // `Connection: close`, HTTP/1.0 with `Connection: keep-alive`, and a body that does not end
  // where the replica closes.
  bool keep_alive() const;

  // Where the body's next bytes go: at most `size` of them.
  void lend_body(char* data, std::size_t size) {
    body_data_ = data;
    body_room_ = size;
  }
  // What is left of the lent buffer.
  std::size_t body_room() const { return body_room_; }
  // Takes body bytes from the start of `in` into the lent buffer, as many as fit and the body
  // has; returns how many. Bytes after the body's end are not taken.
  std::size_t body(std::string_view in, error_code& ec);
  // The replica closed the connection: the end of a body that lasts until then, or one cut
  // short (http::error::partial_message).
  void put_eof(error_code& ec);
  // The whole answer is read (a chunked body's end is the caller's to see).
  bool is_done() const { return header_done_ && !chunked_ && !until_eof_ && left_ == 0; }

 private:
  // One field of the header; false and `ec` when it is malformed.
  bool field(std::string_view name, std::string_view value, error_code& ec);

  bool header_done_ = false;
  unsigned status_ = 0;
  unsigned version_ = 11;
  bool chunked_ = false;
  bool until_eof_ = false;         // the body ends where the replica closes (and has not yet)
  bool needs_eof_ = false;         // the body ends where the replica closes: the connection goes
  bool close_ = false;             // Connection: close
  bool keep_alive_field_ = false;  // Connection: keep-alive
  bool has_length_ = false;
  bool has_transfer_encoding_ = false;
  std::uint64_t left_ = 0;  // of a body of a length, the bytes still to come
  bool has_content_type_ = false;
  // A Content-Type fits here (application/json; charset=utf-8 is 31 bytes); a longer one, rare,
  // goes to the string.
  std::array<char, 64> content_type_short_{};
  std::size_t content_type_size_ = 0;
  std::string content_type_long_;
  char* body_data_ = nullptr;
  std::size_t body_room_ = 0;
};

}  // namespace prefixgate::gateway::server
