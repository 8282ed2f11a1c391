// The replicas and gateways `compare` starts for itself: N prefixgate-engine processes (sim or
// cpu device) on OS-picked loopback ports, and `gateways` prefixgate gateways in front of them
// with one routing policy (several: independent instances, each with its own index and
// predictions, all following every engine's kv_events, as behind a plain load balancer). Logs go to
// files under `log_dir`. Everything is stopped (SIGTERM, then SIGKILL) when the Fleet is destroyed.
//
//   bench::Fleet fleet(options);
//   if (auto s = fleet.start_engines(); !s) fail(s.error().message);
//   auto gateways = fleet.start_gateways("cache_aware", "tag");   // Result<vector<HttpTarget>>
//   ... run the workload against *gateway ...
//   fleet.stop();                                        // fresh caches for the next policy
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "http_client.h"
#include "prefixgate/base/status.h"
#include "prefixgate/process/process.h"

namespace prefixgate::bench {

struct FleetOptions {
  std::size_t replicas = 2;
  std::string device = "sim";  // sim | cpu
  // GPU:MODEL, or a comma-separated list for a mixed fleet: replica i runs profile i mod n.
  std::string sim_profile = "h100:llama3-8b";
  std::string sim_speedup = "1";
  std::string model = "builtin:tiny";
  std::size_t kv_cache_tokens = 0;            // 0: the engine's default
  std::size_t max_model_len = 0;              // 0: the engine's default
  std::vector<std::string> engine_args = {};  // extra flags for every engine
  std::string gateway_config = {};            // a YAML file for every gateway ("": none)
  std::size_t gateways = 1;                   // gateway instances over the same engines
  bool peers = false;  // with gateways > 1: they share their sends (--peer-listen / --peer)
  // How the gateway is told to follow the engines: prefixgate (their /v1/kv_events), vllm (they
  // publish vLLM's ZeroMQ KV events, the gateway subscribes as to vLLM), openai (no events).
  std::string upstream_kind = "prefixgate";
  std::string engine_bin = {};
  std::string gateway_bin = {};
  std::string log_dir = {};
};

// Replica `replica`'s profile from --sim-profile's comma-separated list (i mod n).
std::string sim_profile_of(const std::string& profiles, std::size_t replica);

class Fleet {
 public:
  explicit Fleet(FleetOptions options);
  ~Fleet();
  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;

  Status start_engines();
  // Starts `gateways` gateways over the running engines and waits until each sees all of them
  // healthy.
  Result<std::vector<HttpTarget>> start_gateways(const std::string& policy, const std::string& tag);
  void stop();
  // SIGKILL engine i, then start it again on the same port with an empty cache (the gateways
  // keep their upstream URLs). Not for vllm upstreams (their ZeroMQ ports are OS-picked).
  Status restart_engine(std::size_t i);

  std::size_t replicas() const { return options_.replicas; }
  // The running processes' ids (-1: none): for sampling their memory and descriptors.
  pid_t engine_pid(std::size_t i) const;
  pid_t gateway_pid(std::size_t g) const;
  std::uint16_t engine_port(std::size_t i) const { return engine_ports_.at(i); }

 private:
  FleetOptions options_;
  std::vector<std::string> engine_args(std::size_t i, std::uint16_t port) const;
  std::vector<std::uint16_t> engine_ports_;
  std::size_t restarts_ = 0;
  std::vector<std::unique_ptr<proc::Process>> engines_;
  std::vector<std::string> upstreams_;
  Result<HttpTarget> start_gateway(const std::string& policy, const std::string& log_tag,
                                   const std::vector<std::string>& extra_args = {});

  std::vector<std::unique_ptr<proc::Process>> gateways_;
  std::size_t generation_ = 0;
};

// The directory holding this executable (for the sibling prefixgate binaries).
std::string executable_dir();

}  // namespace prefixgate::bench
