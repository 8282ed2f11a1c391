// The parser of a replica's answer: Beast's HTTP/1 parser, which does the framing (a length,
// chunks, the end of a message, keep-alive), keeping of the header only what the gateway reads of
// it (the status and Content-Type), and writing the body into a buffer the caller lends, as
// Beast's buffer_body does.
//
// Beast's response_parser stores every field of the header as an element of its own, one
// allocation each (and one free), about 260 instructions a field: on every request, for fields
// nothing reads (a replica's Date, Server, Content-Length, its request id).
//
//   UpstreamAnswerParser answer;
//   serving::parse_buffered(answer, buffer, serving::ParseUntil::kHeader, ec);
//   answer.result(); answer.content_type();           // the header, once it is parsed
//   answer.lend_body(chunk, size);                    // then the body, a buffer at a time:
//   serving::parse_buffered(answer, buffer, serving::ParseUntil::kMessage, ec);
//   std::size_t got = size - answer.body_room();      // need_buffer: the chunk is full
#pragma once

#include <array>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/status.hpp>
#include <cstddef>
#include <string>
#include <string_view>

namespace prefixgate::gateway::server {

class UpstreamAnswerParser : public boost::beast::http::basic_parser<false> {
 public:
  UpstreamAnswerParser() { body_limit(boost::none); }  // streamed through, never held whole

  unsigned result_int() const { return status_; }
  boost::beast::http::status result() const { return boost::beast::http::int_to_status(status_); }
  // The first Content-Type field's value ("" when there is none).
  std::string_view content_type() const;

  // Where the body's next bytes go: at most `size` of them, after which parsing stops with
  // http::error::need_buffer until another buffer is lent.
  void lend_body(char* data, std::size_t size) {
    body_data_ = data;
    body_room_ = size;
  }
  // What is left of the lent buffer.
  std::size_t body_room() const { return body_room_; }

 private:
  using string_view = boost::beast::string_view;
  using error_code = boost::beast::error_code;

  void on_request_impl(boost::beast::http::verb, string_view, string_view, int,
                       error_code&) override {}
  void on_response_impl(int code, string_view, int, error_code&) override {
    status_ = static_cast<unsigned>(code);
  }
  void on_field_impl(boost::beast::http::field name, string_view, string_view value,
                     error_code&) override;
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>&, error_code&) override {}
  std::size_t on_body_impl(string_view body, error_code& ec) override { return take(body, ec); }
  void on_chunk_header_impl(std::uint64_t, string_view, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, string_view body, error_code& ec) override {
    return take(body, ec);
  }
  void on_finish_impl(error_code&) override {}

  // Copies what fits of `body` into the lent buffer; need_buffer when not all of it did.
  std::size_t take(string_view body, error_code& ec);

  unsigned status_ = 0;
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
