// The body of an HTTP/1.1 message sent with `Transfer-Encoding: chunked` (RFC 9112 section 7.1),
// decoded as its bytes arrive, in any pieces. Both servers read chunked request bodies with it,
// and the gateway an upstream's streamed answer, relayed an event at a time. Beast's parser
// takes a chunk through its general machinery (its parse state, the body reader's callbacks, a
// copy into the body's buffer before the caller's), several times what finding a chunk's size
// line and copying its data costs; and Beast 1.81's asserts on a last chunk that arrives in
// pieces (serving/src/request_reader.h).
//
//   serving::ChunkedBody body;
//   std::size_t used = 0;
//   switch (body.decode(bytes_read, data_out, used)) {  // `used` bytes of the input are taken
//     case ChunkedBody::Result::kMore: ...              // read more (what is left waits)
//     case ChunkedBody::Result::kDone: ...              // the last chunk and the trailers ended it
//     case ChunkedBody::Result::kError: ...             // malformed: the message is unusable
//   }
//
// What it reads: chunk sizes in hex (up to 64 bits), extensions after ';' (checked against
// RFC 9112's grammar as Beast's parser checks them, then passed over), CRLF line ends, a CRLF
// after each chunk's data, the last chunk (size 0) and its trailer fields (each must be a
// `name:` line or a folded continuation; passed over) up to the empty line. A bare LF (outside
// an extension's quoted string), a size without digits or one too large, an extension or a
// trailer line that fits no grammar, or anything but CRLF after a chunk's data is an error, as
// Beast's parser has it; nothing Beast's parser takes is an error here (fuzz_chunked_body).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace prefixgate::serving {

class ChunkedBody {
 public:
  enum class Result { kMore, kDone, kError };

  // Decodes what it can of `in`, appending chunk data to `out`; `used` says how many bytes of
  // `in` it took (the rest is an incomplete line: give it again with more bytes after it).
  // kDone once the message's end is taken (nothing after it is taken), kError for good.
  Result decode(std::string_view in, std::string& out, std::size_t& used);
  bool done() const { return state_ == State::kDone; }

  // A line of a size, an extension or a trailer longer than this is an error (Beast's limit on
  // a chunk header is of the same order).
  static constexpr std::size_t kMaxLineBytes = 4096;

 private:
  enum class State { kSize, kData, kDataEnd, kTrailer, kDone, kError };
  // A whole line (up to its CRLF) at the start of `in`: its length without the CRLF, or npos
  // while the line is not complete; an error through `bad` for a line too long, or a bare LF
  // unless the line is a size line (whose extension may hold one: its size is checked apart).
  static std::size_t line_length(std::string_view in, bool size_line, bool& bad);
  Result fail() {
    state_ = State::kError;
    return Result::kError;
  }

  State state_ = State::kSize;
  std::uint64_t left_ = 0;  // data bytes of the current chunk not yet taken
};

}  // namespace prefixgate::serving
