// prefixgate-engine's HTTP server: the OpenAI API, /metrics, /health and /v1/kv_events over
// one EngineLoop. Beast and Asio stay behind this header, so main() and tests compile fast.
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

#include "prefixgate/canonicalize/status.h"
#include "prefixgate/engine/device.h"
#include "prefixgate/engine/engine_loop.h"
#include "server/openai_protocol.h"

namespace prefixgate::engine::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;  // 0: the OS picks one
  std::size_t io_threads = 2;
  std::size_t max_body_bytes = 16u << 20;
  std::chrono::milliseconds idle_timeout{60000};        // keep-alive wait for the next request
  std::chrono::milliseconds write_timeout{30000};       // per write
  std::chrono::milliseconds drain_timeout{30000};       // in-flight requests on shutdown
  std::chrono::milliseconds load_report_interval{100};  // kv_events "load" lines
  bool handle_signals = false;                          // SIGINT/SIGTERM start a graceful shutdown
};

class Server {
 public:
  Server(ServerOptions options, ServedModel model, EngineConfig engine_config,
         std::unique_ptr<Device> device);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens. Returns the bound port.
  canon::Result<std::uint16_t> start();
  // Serves on io_threads threads until a shutdown request, then drains and returns.
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
