// prefixgate's HTTP server: the OpenAI API in front of a set of upstream replicas, with
// cache-aware routing, /health and /metrics. Beast and Asio stay behind this header, so main()
// and tests compile fast.
//
//   server::Gateway gw(config);
//   auto port = gw.start();             // binds (port 0 picks one), loads models, starts checks
//   if (!port) return fail(port.error());
//   std::thread t([&] { gw.run(); });   // serves until request_shutdown(), then drains
//   gw.request_shutdown();
//   t.join();
#pragma once

#include <cstdint>
#include <memory>

#include "config.h"
#include "prefixgate/base/status.h"

namespace prefixgate::gateway::server {

struct GatewayOptions {
  bool handle_signals = false;  // SIGINT/SIGTERM start a graceful drain
};

class Gateway {
 public:
  explicit Gateway(GatewayConfig config, GatewayOptions options = {});
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // Loads models and the policy, resolves upstreams, binds and listens. Returns the port.
  Result<std::uint16_t> start();
  // After start(): the port of admin_listen's listener (the admin routes), 0 without one.
  std::uint16_t admin_port() const;
  // After start(): the UDP port peer gateways send to (peers.listen), 0 without peers.
  std::uint16_t peer_port() const;
  // Serves on the configured threads until a shutdown request, then drains and returns.
  void run();
  // Any thread: stop accepting, let in-flight requests finish up to timeouts.drain, stop.
  void request_shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prefixgate::gateway::server
