#include "http_client.h"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <cstdlib>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

double seconds_since(BenchClock::time_point zero) {
  return std::chrono::duration<double>(BenchClock::now() - zero).count();
}

std::string error_kind(const beast::error_code& ec, const char* what) {
  if (ec == beast::error::timeout) return "timeout";
  return what;
}

// The body with stream fields added: `{"stream":true,"stream_options":{...},` + the rest for
// the chat APIs; Messages and Responses streams always end with their usage.
std::string streaming_body(Api api, const std::string& body) {
  std::string out = api == Api::kMessages || api == Api::kResponses
                        ? R"({"stream":true)"
                        : R"({"stream":true,"stream_options":{"include_usage":true})";
  if (body.size() > 2) out += ',';
  out.append(body, 1, std::string::npos);
  return out;
}

std::size_t size_field(const json::Value* v) {
  if (v == nullptr || !v->is_number() || v->as_number().value < 0) return 0;
  return static_cast<std::size_t>(v->as_number().value);
}

// A piece of generated content arrived: time to first token, or the gap since the last.
void on_content(BenchClock::time_point zero, RequestRecord& rec, double& last_chunk_s) {
  const double now = seconds_since(zero);
  if (rec.first_token_s < 0) {
    rec.first_token_s = now;
  } else {
    rec.gaps_s.push_back(now - last_chunk_s);
  }
  last_chunk_s = now;
}

// A chat or completions chunk: content in choices[0], the usage chunk at the end.
void on_chat_event(const json::Value& doc, BenchClock::time_point zero, RequestRecord& rec,
                   double& last_chunk_s, bool& saw_usage) {
  if (const json::Value* choices = doc.find("choices");
      choices != nullptr && choices->is_array() && !choices->as_array().empty()) {
    const json::Value& c = choices->as_array().front();
    const json::Value* text = c.find("text");
    if (text == nullptr) {
      if (const json::Value* delta = c.find("delta")) text = delta->find("content");
    }
    if (text != nullptr && text->is_string() && !text->as_string().empty()) {
      on_content(zero, rec, last_chunk_s);
    }
  }
  if (const json::Value* usage = doc.find("usage"); usage != nullptr && usage->is_object()) {
    saw_usage = true;
    rec.prompt_tokens = size_field(usage->find("prompt_tokens"));
    rec.completion_tokens = size_field(usage->find("completion_tokens"));
    if (const json::Value* d = usage->find("prompt_tokens_details"); d != nullptr) {
      rec.cached_tokens = size_field(d->find("cached_tokens"));
    }
  }
}

// A Messages event: content_block_delta carries content; message_delta the whole usage, whose
// prompt is input + cache_read + cache_creation input tokens.
void on_messages_event(const json::Value& doc, std::string_view type, BenchClock::time_point zero,
                       RequestRecord& rec, double& last_chunk_s, bool& saw_usage) {
  if (type == "content_block_delta") {
    on_content(zero, rec, last_chunk_s);
  } else if (type == "message_delta") {
    const json::Value* usage = doc.find("usage");
    if (usage == nullptr || !usage->is_object()) return;
    saw_usage = true;
    rec.cached_tokens = size_field(usage->find("cache_read_input_tokens"));
    rec.prompt_tokens = size_field(usage->find("input_tokens")) + rec.cached_tokens +
                        size_field(usage->find("cache_creation_input_tokens"));
    rec.completion_tokens = size_field(usage->find("output_tokens"));
  }
}

// A Responses event: text and argument deltas carry content; the last event its response's
// usage, with input_tokens_details.cached_tokens.
void on_responses_event(const json::Value& doc, std::string_view type, BenchClock::time_point zero,
                        RequestRecord& rec, double& last_chunk_s, bool& saw_usage) {
  if (type == "response.output_text.delta" || type == "response.function_call_arguments.delta") {
    on_content(zero, rec, last_chunk_s);
  } else if (type == "response.completed" || type == "response.incomplete") {
    const json::Value* response = doc.find("response");
    const json::Value* usage = response != nullptr ? response->find("usage") : nullptr;
    if (usage == nullptr || !usage->is_object()) return;
    saw_usage = true;
    rec.prompt_tokens = size_field(usage->find("input_tokens"));
    rec.completion_tokens = size_field(usage->find("output_tokens"));
    if (const json::Value* d = usage->find("input_tokens_details"); d != nullptr) {
      rec.cached_tokens = size_field(d->find("cached_tokens"));
    }
  }
}

// One server-sent event's data. Returns false on an error event or unparsable data.
bool on_event(Api api, std::string_view data, BenchClock::time_point zero, RequestRecord& rec,
              double& last_chunk_s, bool& saw_usage) {
  if (data == "[DONE]") return true;
  auto doc = json::parse(data);
  if (!doc || !doc->is_object()) {
    rec.error = "bad_response";
    return false;
  }
  const json::Value* type = doc->find("type");
  const std::string_view kind =
      type != nullptr && type->is_string() ? std::string_view(type->as_string()) : "";
  if (doc->find("error") != nullptr || kind == "error" || kind == "response.failed") {
    rec.error = "stream_error";
    return false;
  }
  if (api == Api::kMessages) {
    on_messages_event(*doc, kind, zero, rec, last_chunk_s, saw_usage);
  } else if (api == Api::kResponses) {
    on_responses_event(*doc, kind, zero, rec, last_chunk_s, saw_usage);
  } else {
    on_chat_event(*doc, zero, rec, last_chunk_s, saw_usage);
  }
  return true;
}

}  // namespace

Result<HttpTarget> parse_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) {
    return make_error(ErrorCode::kInvalidValue, "'" + url + "': expected http://HOST:PORT[/PATH]");
  }
  std::string rest = url.substr(scheme.size());
  HttpTarget t;
  const std::size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    t.base_path = rest.substr(slash);
    while (!t.base_path.empty() && t.base_path.back() == '/') t.base_path.pop_back();
    rest.resize(slash);
  }
  const std::size_t colon = rest.rfind(':');
  t.host = rest.substr(0, colon);
  if (colon != std::string::npos) {
    const std::string port = rest.substr(colon + 1);
    unsigned value = 0;
    auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || p != port.data() + port.size() || value == 0 || value > 65535) {
      return make_error(ErrorCode::kInvalidValue, "'" + url + "': bad port '" + port + "'");
    }
    t.port = static_cast<std::uint16_t>(value);
  }
  if (t.host.empty()) {
    return make_error(ErrorCode::kInvalidValue, "'" + url + "': no host");
  }
  asio::io_context ioc;
  tcp::resolver resolver(ioc);
  beast::error_code ec;
  auto results = resolver.resolve(t.host, std::to_string(t.port), ec);
  if (ec || results.empty()) {
    return make_error(ErrorCode::kInvalidValue, "'" + url + "': cannot resolve " + t.host);
  }
  t.endpoint = results.begin()->endpoint();
  return t;
}

asio::awaitable<void> send_streaming(const HttpTarget& target, const Turn& turn,
                                     BenchClock::time_point zero, std::chrono::milliseconds timeout,
                                     RequestRecord& rec) {
  auto executor = co_await asio::this_coro::executor;
  beast::tcp_stream stream(executor);
  stream.expires_after(timeout);
  rec.sent_s = seconds_since(zero);
  auto finish = [&](std::string error) {
    rec.error = std::move(error);
    rec.done_s = seconds_since(zero);
  };

  auto [cec] = co_await stream.async_connect(target.endpoint, kTuple);
  if (cec) {
    finish(error_kind(cec, "connect"));
    co_return;
  }
  // Beast writes the header and the body separately: without TCP_NODELAY, Nagle holds the body
  // until the server's delayed ACK (40 ms on Linux), which would show up as TTFT.
  beast::error_code nodelay_ec;
  stream.socket().set_option(tcp::no_delay(true), nodelay_ec);
  http::request<http::string_body> req{http::verb::post, target.base_path + api_path(turn.api), 11};
  req.set(http::field::host, target.host);
  req.set(http::field::content_type, "application/json");
  req.keep_alive(false);
  req.body() = streaming_body(turn.api, turn.body);
  req.prepare_payload();
  auto [wec, wn] = co_await http::async_write(stream, req, kTuple);
  if (wec) {
    finish(error_kind(wec, "write"));
    co_return;
  }

  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);
  auto [hec, hn] = co_await http::async_read_header(stream, buffer, parser, kTuple);
  if (hec) {
    finish(error_kind(hec, "read"));
    co_return;
  }
  const auto& head = parser.get();
  if (auto it = head.find("x-prefixgate-replica"); it != head.end()) {
    rec.replica = std::string(it->value());
  }
  if (auto it = head.find("x-prefixgate-route-reason"); it != head.end()) {
    rec.route_reason = std::string(it->value());
  }
  const int status = static_cast<int>(head.result_int());

  std::string events;  // unconsumed SSE text
  double last_chunk_s = 0;
  bool saw_usage = false;
  bool failed = false;
  char chunk[16384];
  while (!parser.is_done()) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof chunk;
    // read_some: returns as soon as some body arrived (async_read would wait for a full buffer).
    auto [rec_ec, n] = co_await http::async_read_some(stream, buffer, parser, kTuple);
    if (rec_ec && rec_ec != http::error::need_buffer) {
      finish(error_kind(rec_ec, "read"));
      co_return;
    }
    const std::size_t got = sizeof chunk - parser.get().body().size;
    if (status != 200) {  // drain an error body, keeping its start to say what went wrong
      rec.error_detail.append(
          chunk, std::min(got, 512 - std::min<std::size_t>(rec.error_detail.size(), 512)));
      continue;
    }
    events.append(chunk, got);
    // Events end with a blank line; the engine and the gateway write "\n\n".
    for (std::size_t end; !failed && (end = events.find("\n\n")) != std::string::npos;) {
      std::string_view event(events.data(), end);
      for (std::size_t pos = 0; pos < event.size();) {
        std::size_t eol = event.find('\n', pos);
        if (eol == std::string_view::npos) eol = event.size();
        std::string_view line = event.substr(pos, eol - pos);
        if (line.rfind("data:", 0) == 0) {
          line.remove_prefix(5);
          if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
          if (!on_event(turn.api, line, zero, rec, last_chunk_s, saw_usage)) failed = true;
        }
        pos = eol + 1;
      }
      events.erase(0, end + 2);
    }
  }
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  if (status != 200) {
    finish("http_" + std::to_string(status));
  } else if (failed) {
    finish(rec.error);
  } else if (!saw_usage) {
    finish("bad_response");
  } else {
    finish("");
  }
}

SimpleReply http_get(const HttpTarget& target, const std::string& path,
                     std::chrono::milliseconds timeout) {
  asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  SimpleReply reply;
  http::request<http::empty_body> req{http::verb::get, target.base_path + path, 11};
  req.set(http::field::host, target.host);
  // The gateways the bench starts inherit PREFIXGATE_ADMIN_KEY, and /metrics then needs it.
  if (const char* key = std::getenv("PREFIXGATE_ADMIN_KEY"); key != nullptr && *key != '\0') {
    req.set(http::field::authorization, std::string("Bearer ") + key);
  }
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  stream.expires_after(timeout);
  stream.async_connect(target.endpoint, [&](beast::error_code ec) {
    if (ec) return;
    http::async_write(stream, req, [&](beast::error_code wec, std::size_t) {
      if (wec) return;
      http::async_read(stream, buffer, parser, [&](beast::error_code rec, std::size_t) {
        if (!rec) {
          reply.status = static_cast<int>(parser.get().result_int());
          reply.body = parser.get().body();
        }
      });
    });
  });
  ioc.run();
  return reply;
}

}  // namespace prefixgate::bench
