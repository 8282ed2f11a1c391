// What an HTTP server of ours listens on and the limits it enforces (serving/server.h). Apart
// from the server so that the engine's and the gateway's option structs can hold one without
// their users compiling Beast.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace prefixgate::serving {

struct ServerOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;                  // 0: the OS picks one
  std::size_t threads = 2;                 // 0: one per hardware thread
  std::string server_name = "prefixgate";  // the Server header
  std::size_t max_body_bytes = 16u << 20;
  std::size_t max_header_bytes = 64u << 10;
  std::size_t max_connections = 10000;
  std::chrono::milliseconds idle_timeout{60000};  // keep-alive wait for the next request
  // From a request's first byte to its last (headers and body): past it, 408 and close.
  std::chrono::milliseconds request_timeout{30000};
  std::chrono::milliseconds write_timeout{30000};  // per write
  std::chrono::milliseconds drain_timeout{30000};  // in-flight requests on shutdown
  std::chrono::milliseconds linger_timeout{2000};  // reading a refused request's rest
  bool handle_signals = false;                     // SIGINT/SIGTERM start a graceful shutdown
};

}  // namespace prefixgate::serving
