// One request/response exchange with an upstream replica over a pooled or fresh connection:
// send, wait for the response header under the first-byte deadline, then read the body piece
// by piece under the idle deadline (the caller forwards each piece before reading the next,
// which is the backpressure).
//
//   Exchange ex(ctx, replica);
//   if (auto f = co_await ex.open(upstream_request); f != UpstreamFailure::kNone) retry();
//   for (std::string piece; co_await ex.read_some(piece) && !piece.empty(); ) forward(piece);
//   ex.finish();   // a complete keep-alive response returns the connection to the pool
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "prefixgate/canonicalize/json_splice.h"
#include "prefixgate/serving/chunked_body.h"
#include "server/context.h"
#include "server/upstream_answer_parser.h"

namespace prefixgate::gateway::server {

enum class UpstreamFailure { kNone, kConnect, kSend, kTimeout, kReceive };

// A completion's request to a replica: POST `target` with a JSON body. Exchange::open() writes
// its head as text, the bytes of the Beast request it stands for (Content-Type, Accept,
// x-request-id, User-Agent, then Host and Content-Length), without a Beast field per field.
// The views are of the client's request and its RequestInfo, which outlive it.
struct UpstreamPost {
  std::string_view target;
  std::string_view accept;  // the client's Accept, "*/*" when it sent none
  std::string_view request_id;
  json::SplicedJson body;  // its pieces go out with the head in one gathered write
};
const char* upstream_failure_name(UpstreamFailure f);

class Exchange {
 public:
  // `scratch`: buffers to borrow (a client connection's); nullptr: the Exchange's own.
  Exchange(GatewayContext& ctx, ReplicaId replica, ExchangeBuffers* scratch = nullptr)
      : ctx_(ctx),
        replica_(replica),
        first_byte_(ctx.config.timeouts.first_byte),
        buffers_(scratch != nullptr ? *scratch : own_buffers_) {}
  ~Exchange();

  // Sends `req` (Host and keep-alive are set here) and reads the response header.
  Awaitable<UpstreamFailure> open(Request& req);
  Awaitable<UpstreamFailure> open(const UpstreamPost& post);
  // The answer's status and Content-Type, once open() has returned kNone.
  const UpstreamAnswerParser& answer() const { return *parser_; }

  // Appends the next piece of the body to `out`. False on an error or a timeout; at the end of
  // the body it returns true with nothing appended and done() holds.
  Awaitable<bool> read_some(std::string& out);
  bool done() const { return chunked_ ? chunked_->done() : parser_->is_done(); }
  // Reads the rest of the body into `out` (bounded by max_bytes).
  Awaitable<bool> read_all(std::string& out, std::size_t max_bytes);
  // Returns the connection to the pool when the response was complete and keep-alive.
  void finish();
  ReplicaId replica() const { return replica_; }
  // Overrides timeouts.first_byte (health checks answer at once or not at all).
  void set_first_byte_timeout(std::chrono::milliseconds t) { first_byte_ = t; }

 private:
  // Sends buffers_.head (the request's head as text) and the body's pieces, in one gathered write
  // where the socket takes it at once.
  using BodyPieces = std::array<asio::const_buffer, std::tuple_size_v<serving::TextBuffers> - 1>;
  Awaitable<UpstreamFailure> send(BodyPieces body);  // by value: a coroutine's frame keeps it
  Awaitable<UpstreamFailure> attempt(const BodyPieces& body, bool allow_pooled, bool& was_pooled);

  GatewayContext& ctx_;
  ReplicaId replica_;
  std::chrono::milliseconds first_byte_;
  std::unique_ptr<beast::tcp_stream> stream_;  // a pooled one, or one of its own
  ExchangeBuffers own_buffers_;
  ExchangeBuffers& buffers_;
  std::optional<UpstreamAnswerParser> parser_;
  // A chunked body's decoder, set at its first read: the parser reads the header only.
  std::optional<serving::ChunkedBody> chunked_;
  // The bytes read and not yet taken.
  std::string_view buffered() const;
  // Appends what the buffered bytes complete of a chunked body to `out`; false when they are
  // malformed.
  bool decode_chunked(std::string& out);
  static constexpr std::size_t kChunkBytes = 16 * 1024;
};

}  // namespace prefixgate::gateway::server
