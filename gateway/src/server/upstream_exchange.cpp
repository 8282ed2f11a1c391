#include "server/upstream_exchange.h"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "prefixgate/serving/socket_io.h"
#include "server/upstream_pool.h"

namespace prefixgate::gateway::server {
namespace {
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t kReadBufferBytes = 16 * 1024;
// Interim answers (1xx) passed over before an answer; one more is a broken replica.
constexpr int kMaxInterimAnswers = 8;
}  // namespace

const char* upstream_failure_name(UpstreamFailure f) {
  switch (f) {
    case UpstreamFailure::kNone: return "none";
    case UpstreamFailure::kConnect: return "connect";
    case UpstreamFailure::kSend: return "send";
    case UpstreamFailure::kTimeout: return "timeout";
    case UpstreamFailure::kReceive: return "receive";
  }
  return "unknown";
}

Exchange::~Exchange() {
  if (stream_) {
    beast::error_code ec;
    stream_->socket().close(ec);
  }
}

Awaitable<UpstreamFailure> Exchange::open(Request& req) {
  req.set(http::field::host, ctx_.host_headers[replica_]);
  req.keep_alive(true);
  req.prepare_payload();
  buffers_.head.clear();
  serving::append_head(req, buffers_.head);
  return send(BodyPieces{asio::buffer(req.body().data(), req.body().size())});
}

Awaitable<UpstreamFailure> Exchange::open(const UpstreamPost& post) {
  serving::HeadText head(buffers_.head, http::verb::post, post.target, 11);
  head.set(http::field::content_type, "application/json");
  head.set(http::field::accept, post.accept);
  head.set("x-request-id", post.request_id);
  head.set(http::field::user_agent, "prefixgate");
  head.set(http::field::host, ctx_.host_headers[replica_]);
  head.keep_alive(true);
  head.prepare_payload(post.body.size());
  head.end();
  BodyPieces body{};
  std::size_t n = 0;
  post.body.for_each_piece(
      [&](std::string_view piece) { body[n++] = asio::buffer(piece.data(), piece.size()); });
  return send(body);
}

Awaitable<UpstreamFailure> Exchange::send(BodyPieces body) {
  bool was_pooled = false;
  UpstreamFailure f = UpstreamFailure::kNone;
  f = co_await attempt(body, true, was_pooled);
  // A pooled connection the replica closed while we were writing is not the replica's fault.
  if ((f == UpstreamFailure::kSend || f == UpstreamFailure::kReceive) && was_pooled) {
    f = co_await attempt(body, false, was_pooled);
  }
  co_return f;
}

Awaitable<UpstreamFailure> Exchange::attempt(const BodyPieces& body, bool allow_pooled,
                                             bool& was_pooled) {
  // (Plain statements around each co_await: GCC 12 miscompiles co_await inside conditions.)
  const auto executor = co_await asio::this_coro::executor;
  stream_.reset();
  buffers_.buffer.clear();
  // Room for a whole typical response header and body in one read (a flat_buffer's reads are
  // sized by its free capacity, 512 bytes when empty).
  buffers_.buffer.reserve(kReadBufferBytes);
  parser_.emplace();
  chunked_.reset();
  was_pooled = false;
  if (allow_pooled) {
    stream_ = ctx_.pool->take_idle(replica_, executor);
    was_pooled = stream_ != nullptr;
  }
  if (!stream_) {
    stream_ = std::make_unique<beast::tcp_stream>(executor);
    stream_->expires_after(ctx_.config.timeouts.connect);
    auto [ec] = co_await stream_->async_connect(ctx_.endpoints[replica_], kTuple);
    if (ec == beast::error::timeout) co_return UpstreamFailure::kTimeout;
    if (ec) co_return UpstreamFailure::kConnect;
    stream_->socket().set_option(tcp::no_delay(true), ec);
  }
  serving::TextBuffers request{asio::buffer(buffers_.head)};
  std::copy(body.begin(), body.end(), request.begin() + 1);
  beast::error_code wec;
  if (serving::send_text_leaves_rest(*stream_, request, wec)) {
    // What the socket did not take at once is written under the stream's timer; the rest of
    // the time (nearly always) the stream's timer is not touched.
    stream_->expires_after(first_byte_);
    wec = co_await serving::write_text_rest(*stream_, request);
  }
  if (wec == beast::error::timeout) co_return UpstreamFailure::kTimeout;
  if (wec) co_return UpstreamFailure::kSend;
  // The answer's first bytes, read on the socket itself under the first-byte deadline (the
  // stream would start and cancel a timer for it), then its header parsed here. Asio (1.26)
  // tries the read at once, and as the answer comes a round trip later at the earliest it
  // usually finds nothing (EAGAIN) before Asio waits for readiness: one system call a request
  // that nginx, which takes a short read for a drained socket, does not make. Waiting first
  // (async_wait) would cost an epoll_ctl instead.
  // The header, parsed as it arrives (nearly always in the first read), all of it read under
  // the first-byte deadline.
  if (!buffers_.deadline) buffers_.deadline.emplace(executor);
  buffers_.deadline->arm(stream_->socket(), first_byte_);
  for (int interim = 0;; ++interim) {
    beast::error_code rec;
    std::size_t used = 0;
    while (!parser_->header(buffered(), used, rec)) {
      if (rec) break;
      auto [ec, got] = co_await stream_->socket().async_read_some(
          buffers_.buffer.prepare(kReadBufferBytes), kTuple);
      if (ec) {
        const bool waited_out = buffers_.deadline->expired();
        buffers_.deadline->disarm();
        // e.g. a pooled connection the replica closed
        co_return waited_out ? UpstreamFailure::kTimeout : UpstreamFailure::kReceive;
      }
      buffers_.buffer.commit(got);
    }
    if (rec) {
      buffers_.deadline->disarm();
      co_return UpstreamFailure::kReceive;
    }
    buffers_.buffer.consume(used);
    // An interim answer (100 Continue, 103 Early Hints) comes before the answer and is no answer
    // to relay: a client must take any number of them (RFC 9110 section 15.2). Bounded, so a
    // replica cannot hold the exchange with them for ever.
    const unsigned status = parser_->result_int();
    if (status < 100 || status >= 200 || status == 101) {
      buffers_.deadline->disarm();
      co_return UpstreamFailure::kNone;
    }
    if (interim == kMaxInterimAnswers) {
      buffers_.deadline->disarm();
      co_return UpstreamFailure::kReceive;
    }
    parser_.emplace();
  }
}

std::string_view Exchange::buffered() const {
  const auto bytes = buffers_.buffer.data();
  return {static_cast<const char*>(bytes.data()), bytes.size()};
}

bool Exchange::decode_chunked(std::string& out) {
  return serving::decode_buffered(*chunked_, buffers_.buffer, out) !=
         serving::ChunkedBody::Result::kError;
}

Awaitable<bool> Exchange::read_some(std::string& out) {
  if (done()) co_return true;
  // A chunked body (every streamed answer) is decoded here, the chunk's data straight into
  // `out`: Beast's parser took each chunk through its general machinery and copied it twice.
  if (!chunked_ && parser_->chunked()) chunked_.emplace();
  std::unique_ptr<char[]>& chunk = buffers_.chunk;
  if (!chunked_) {
    if (!chunk) chunk = std::make_unique_for_overwrite<char[]>(kChunkBytes);
    parser_->lend_body(chunk.get(), kChunkBytes);
  }
  // A streamed answer is read an event at a time, hundreds a request, so each read is the
  // socket's own under the lazy idle deadline, not Beast's read on the timed stream: that one
  // started and cancelled a timer per read and ran its read and transfer operations around the
  // socket's, several times the instructions of the read itself.
  for (;;) {
    if (chunked_ && buffers_.buffer.size() > 0) {
      const std::size_t before = out.size();
      if (!decode_chunked(out)) co_return false;
      if (out.size() > before || chunked_->done()) co_return true;
    } else if (buffers_.buffer.size() > 0) {
      // Body bytes that came with the header or an earlier read: taken without a read.
      beast::error_code ec;
      buffers_.buffer.consume(parser_->body(buffered(), ec));
      if (ec) co_return false;
      const std::size_t got = kChunkBytes - parser_->body_room();
      if (got > 0 || parser_->is_done()) {
        out.append(chunk.get(), got);
        co_return true;
      }
    }
    if (!buffers_.deadline) buffers_.deadline.emplace(stream_->get_executor());
    buffers_.deadline->arm(stream_->socket(), ctx_.config.timeouts.idle);
    auto [ec, got] = co_await stream_->socket().async_read_some(
        buffers_.buffer.prepare(kReadBufferBytes), kTuple);
    buffers_.deadline->disarm();
    if (ec == asio::error::eof) {
      // An answer without a length ends where the replica closes; any other (a chunked one
      // among them) is cut short.
      if (chunked_) co_return false;
      beast::error_code eof_ec;
      parser_->put_eof(eof_ec);
      co_return !eof_ec;
    }
    if (ec) co_return false;  // a failure, or the idle deadline passed
    buffers_.buffer.commit(got);
  }
}

Awaitable<bool> Exchange::read_all(std::string& out, std::size_t max_bytes) {
  bool ok = true;
  while (ok && !done()) {
    ok = co_await read_some(out);
    ok = ok && out.size() <= max_bytes;
  }
  co_return ok;
}

void Exchange::finish() {
  if (!stream_) return;
  if (parser_ && done() && parser_->keep_alive() && buffers_.buffer.size() == 0) {
    // No expiry to undo: each operation on the stream sets its own just before it starts.
    ctx_.pool->give_back(replica_, std::move(stream_));
  }
  stream_.reset();
}

}  // namespace prefixgate::gateway::server
