// prefixgate-engine's HTTP server: the OpenAI API, /metrics, /health and /v1/kv_events over
// one EngineLoop, and optionally the same cache events in vLLM's ZeroMQ protocol. Beast and Asio
// stay behind this header, so main() and tests compile fast.
//
//   server::Server srv(options, served_model, engine_config, std::move(device));
//   auto port = srv.start();            // binds; port 0 picks a free one
//   if (!port) return fail(port.error());
//   std::thread t([&] { srv.run(); });  // serves until request_shutdown(), then drains
//   srv.request_shutdown();
//   t.join();
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "prefixgate/base/status.h"
#include "prefixgate/engine/device.h"
#include "prefixgate/engine/engine_loop.h"
#include "prefixgate/serving/options.h"
#include "server/openai_protocol.h"

namespace prefixgate::engine::server {

struct ServerOptions {
  // Listen address, I/O threads, limits and timeouts, as for every server of ours.
  serving::ServerOptions http = engine_http_defaults();
  std::chrono::milliseconds load_report_interval{100};  // kv_events "load" lines
  // vLLM's KV-event protocol (ZeroMQ PUB, optional replay ROUTER); "" publishes nothing.
  std::string kv_events_endpoint;
  std::string kv_events_replay_endpoint;
  std::size_t kv_events_buffer_batches = 10000;

  static serving::ServerOptions engine_http_defaults() {
    serving::ServerOptions o;
    o.server_name = "prefixgate-engine";
    return o;
  }
};

class Server {
 public:
  Server(ServerOptions options, ServedModel model, EngineConfig engine_config,
         std::unique_ptr<Device> device);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens (and binds the KV-event sockets, when configured). Returns the bound port.
  Result<std::uint16_t> start();
  // The KV-event endpoints as bound ("" when not published, or no replay socket).
  std::string kv_events_endpoint() const;
  std::string kv_events_replay_endpoint() const;
  // Serves on http.threads threads until a shutdown request, then drains and returns.
  void run();
  // Any thread (or a signal when handle_signals): stop accepting, let in-flight requests finish
  // up to drain_timeout, then make run() return.
  void request_shutdown();

  EngineLoop& engine();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prefixgate::engine::server
