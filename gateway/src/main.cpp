// prefixgate: the OpenAI-compatible proxy with cache-aware routing.
//
//   prefixgate --listen 127.0.0.1:8080 --upstream http://127.0.0.1:9001
//              --upstream http://127.0.0.1:9002 --policy cache_aware
//   prefixgate --upstream 'http://10.0.0.5:8000;kind=vllm;kv_events=tcp://10.0.0.5:5557'
//   prefixgate --config prefixgate.yaml          # everything else; flags override the file
//
// Exit status: 0 after a clean shutdown (SIGTERM/SIGINT drain in-flight requests), 1 when the
// socket or a model cannot be set up, 2 for invalid flags or configuration.
// PREFIXGATE_API_KEYS adds API keys; PREFIXGATE_ADMIN_KEY sets the admin key (admin_key:).
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "config.h"
#include "server/gateway.h"

#ifdef PREFIXGATE_WITH_MIMALLOC
#include <mimalloc.h>
#endif

namespace gw = prefixgate::gateway;

namespace {

int invalid(const prefixgate::Error& e) {
  std::cerr << "prefixgate: invalid configuration"
            << (e.param.empty() ? std::string() : " (" + e.param + ")") << ": " << e.message
            << std::endl;
  return 2;
}

// PREFIXGATE_API_KEYS: comma-separated keys, each "KEY" or "KEY:TENANT" (an isolated tenant).
void add_env_keys(gw::GatewayConfig& cfg) {
  const char* env = std::getenv("PREFIXGATE_API_KEYS");
  if (!env) return;
  std::string_view rest(env);
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (item.empty()) continue;
    gw::ApiKey key;
    const std::size_t colon = item.find(':');
    key.key = std::string(item.substr(0, colon));
    if (colon != std::string_view::npos) {
      key.tenant = std::string(item.substr(colon + 1));
      key.isolate = true;
    }
    cfg.tenants.api_keys.push_back(std::move(key));
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path, listen, policy, log_level;
  std::vector<std::string> upstreams;
  std::size_t threads = 0;
  std::string tokenizer_cache;
  std::string admin_listen;
  std::string peer_listen;
  std::vector<std::string> peer_addresses;
  CLI::App app{"prefixgate: an OpenAI-compatible proxy that routes by cached prefix and load"};
  app.add_option("--config", config_path, "YAML configuration file");
  app.add_option("--listen", listen, "HOST:PORT to listen on (port 0 picks a free one)");
  app.add_option("--upstream", upstreams,
                 "upstream replica http://HOST:PORT, then any upstream key as ;key=value "
                 "(kind, kv_events, kv_events_replay, data_parallel_size, load_interval_ms, "
                 "capacity_blocks, model); repeatable");
  app.add_option("--policy", policy,
                 "round_robin, random, least_load, power_of_two, consistent_hash, cache_aware, "
                 "sglang_cache_aware (SGLang's router), dynamo_kv (Dynamo's KV router)");
  app.add_option("--threads", threads, "I/O threads (0: one per core)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error");
  app.add_option("--tokenizer-cache", tokenizer_cache,
                 "on or off: the segment cache of prompt tokens (tokenizer_cache.enabled)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option(
      "--admin-listen", admin_listen,
      "HOST:PORT for the admin routes (/metrics, /stats, /dashboard, "
      "/prefixgate/explain), off --listen (admin_listen); the key: PREFIXGATE_ADMIN_KEY");
  app.add_option("--peer-listen", peer_listen,
                 "IP:PORT (UDP) on which this gateway hears its peers' sends (peers.listen)");
  app.add_option("--peer", peer_addresses,
                 "HOST:PORT of another gateway's --peer-listen, to share sends with; repeatable "
                 "(peers.addresses)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  gw::GatewayConfig cfg;
  if (!config_path.empty()) {
    auto loaded = gw::load_config_file(config_path);
    if (!loaded) return invalid(loaded.error());
    cfg = std::move(*loaded);
  }
  if (!listen.empty()) {
    if (auto st = gw::parse_listen(listen, cfg); !st) return invalid(st.error());
  }
  if (!upstreams.empty()) {
    cfg.upstreams.clear();
    for (const std::string& u : upstreams) {
      auto up = gw::parse_upstream_spec(u, "--upstream");
      if (!up) return invalid(up.error());
      cfg.upstreams.push_back(*up);
    }
  }
  if (!policy.empty()) cfg.policy = policy;
  if (threads > 0) cfg.threads = threads;
  if (!log_level.empty()) cfg.log_level = log_level;
  if (!tokenizer_cache.empty()) cfg.tokenizer_cache.enabled = tokenizer_cache == "on";
  add_env_keys(cfg);
  if (!peer_listen.empty()) {
    if (auto st = gw::parse_peer_listen(peer_listen, "--peer-listen", cfg.peers); !st) {
      return invalid(st.error());
    }
  }
  if (!peer_addresses.empty()) {
    cfg.peers.addresses.clear();
    for (const std::string& a : peer_addresses) {
      if (auto st = gw::check_peer_address(a, "--peer"); !st) return invalid(st.error());
      cfg.peers.addresses.push_back(a);
    }
  }
  if (!admin_listen.empty()) {
    if (auto st = gw::parse_admin_listen(admin_listen, "--admin-listen", cfg.admin); !st) {
      return invalid(st.error());
    }
  }
  // The environment wins over the file: a key kept out of a file that is checked in.
  if (const char* key = std::getenv("PREFIXGATE_ADMIN_KEY"); key != nullptr && *key != '\0') {
    if (auto st = gw::set_admin_key(key, "PREFIXGATE_ADMIN_KEY", cfg.admin); !st) {
      return invalid(st.error());
    }
  }
  if (auto st = gw::validate(cfg); !st) return invalid(st.error());
  const auto level = spdlog::level::from_str(cfg.log_level);
  if (level == spdlog::level::off && cfg.log_level != "off") {
    return invalid(prefixgate::make_error(prefixgate::ErrorCode::kInvalidValue,
                                          "unknown log level '" + cfg.log_level + "'",
                                          "log_level"));
  }
  spdlog::set_level(level);
#ifdef PREFIXGATE_WITH_MIMALLOC
  // Also what keeps the linker from dropping the library that replaces malloc.
  spdlog::debug("allocator: mimalloc {}", mi_version());
#endif

  const std::string host = cfg.host;
  const std::string admin_host = cfg.admin.host;
  const std::string peer_host = cfg.peers.host;
  gw::server::Gateway gateway(std::move(cfg), {.handle_signals = true});
  auto port = gateway.start();
  if (!port) {
    const auto& e = port.error();
    if (e.param.starts_with("listen") || e.param == "admin_listen") {
      spdlog::error("{}", e.message);
      return 1;
    }
    return invalid(e);
  }
  std::cout << "listening on http://" << host << ":" << *port << std::endl;
  if (gateway.admin_port() != 0) {  // after the line above: tools take the first as the API's
    std::cout << "admin routes listening on http://" << admin_host << ":" << gateway.admin_port()
              << std::endl;
  }
  if (gateway.peer_port() != 0) {
    std::cout << "peers listening on udp://" << peer_host << ":" << gateway.peer_port()
              << std::endl;
  }
  gateway.run();
  spdlog::info("drained; bye");
  return 0;
}
