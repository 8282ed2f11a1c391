// The server tests' HTTP client (test_client.h), compiled once for every test file that uses it.
#include "engine_server/test_client.h"

namespace prefixgate::engine::server::testing {

Client::Client(std::uint16_t port, std::chrono::seconds timeout)
    : stream_(ioc_), timeout_(timeout) {
  stream_.expires_after(timeout_);
  beast::error_code ec;
  stream_.socket().connect({asio::ip::make_address("127.0.0.1"), port}, ec);
  connected_ = !ec;
  reset_parser();
}

Client::~Client() = default;

template <class Start>
bool Client::run(Start start) {
  bool ok = false;
  stream_.expires_after(timeout_);
  start([&](beast::error_code ec, std::size_t) { ok = !ec; });
  ioc_.restart();
  ioc_.run();
  return ok;
}

bool Client::send(http::verb verb, const std::string& target, const std::string& body,
                  const std::string& raw_content_type) {
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, "127.0.0.1");
  if (!body.empty() || verb == http::verb::post) {
    req.set(http::field::content_type, raw_content_type);
    req.body() = body;
    req.prepare_payload();
  }
  return run([&](auto done) { http::async_write(stream_, req, done); });
}

bool Client::read_header() {
  return run([&](auto done) { http::async_read_header(stream_, buffer_, *parser_, done); });
}

bool Client::read_some() {
  if (parser_->is_done()) return false;
  return run([&](auto done) { http::async_read_some(stream_, buffer_, *parser_, done); });
}

HttpReply Client::read_all() {
  HttpReply r;
  r.ok = run([&](auto done) { http::async_read(stream_, buffer_, *parser_, done); });
  r.status = static_cast<int>(parser_->get().result_int());
  r.body = parser_->get().body();
  r.content_type = std::string(parser_->get()[http::field::content_type]);
  return r;
}

void Client::close() {
  beast::error_code ec;
  stream_.socket().close(ec);
}

void Client::reset_parser() {
  parser_.emplace();
  parser_->body_limit(64u << 20);
}

HttpReply request(std::uint16_t port, http::verb verb, const std::string& target,
                  const std::string& body) {
  Client c(port);
  if (!c.connected() || !c.send(verb, target, body)) return {};
  return c.read_all();
}

}  // namespace prefixgate::engine::server::testing
