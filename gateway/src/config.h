// The gateway's configuration: what a YAML file and the command line can set, with defaults
// that put the gateway in front of prefixgate-engine replicas serving their embedded model.
//
//   auto cfg = gateway::load_config_file("prefixgate.yaml");   // or GatewayConfig{} + flags
//   if (!cfg) { print(cfg.error().param, cfg.error().message); exit(2); }
//   cfg->upstreams.push_back(*gateway::parse_upstream_url("http://127.0.0.1:9001"));
//   cfg->upstreams.push_back(*gateway::parse_upstream_spec(
//       "http://10.0.0.5:8000;kind=vllm;kv_events=tcp://10.0.0.5:5557"));
//   if (auto ok = gateway::validate(*cfg); !ok) ...
//
// Every error names the offending key in Error::param ("upstreams[1].kind").
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/base/status.h"
#include "prefixgate/gateway/admission.h"
#include "prefixgate/gateway/prefix_index.h"

namespace prefixgate::gateway {

struct UpstreamConfig {
  std::string url;  // http://HOST:PORT as given
  std::string host;
  std::uint16_t port = 0;
  ReplicaKind kind = ReplicaKind::kPrefixgate;
  // LRU bound of predictions made without events (openai upstreams; vllm and sglang ones while
  // their event stream is down).
  std::size_t capacity_blocks = 65536 / 16;
  // vllm and sglang: the engine's ZeroMQ PUB endpoint for KV events (rank 0's), its replay
  // ROUTER endpoint ("" = none), and its data-parallel ranks, each publishing on rank 0's ports
  // plus its rank. kv_events defaults to vLLM's default, tcp://HOST:5557.
  std::string kv_events;
  std::string kv_events_replay;
  std::size_t data_parallel_size = 1;
  // vllm and sglang: how often the engine's Prometheus /metrics is read for its load.
  std::chrono::milliseconds load_interval{200};
  // The models: entry whose model_id and block size its events are keyed with ("" = default).
  std::string model;
  // The replica's speed, for cache_aware's cost in seconds when the engine does not announce it
  // in its load reports (vLLM, SGLang, OpenAI upstreams): prompt tokens prefilled per second, and
  // microseconds one more running sequence adds to a decode step. 0: unknown.
  std::size_t prefill_tokens_per_s = 0;
  std::size_t decode_us_per_sequence = 0;
};

inline constexpr std::size_t kMaxDataParallelSize = 64;
const char* replica_kind_name(ReplicaKind kind);  // "prefixgate", "openai", "vllm", "sglang"
bool has_kv_event_stream(ReplicaKind kind);       // vllm, sglang

// How requests for one model become tokens; the defaults are the engine's builtin models.
// What the gateway does with a request its model's chat template refuses (raise_exception(),
// a render limit): answer 400 as the engine rendering the same template would, or route on the
// request's text (the built-in plain rendering) and let the engine answer.
enum class TemplateErrorAction { kReject, kRouteOnText };
const char* template_error_action_name(TemplateErrorAction action);

struct ModelConfig {
  std::string name;  // request `model` this applies to; "" = the default for all
  // "byte", a tokenizer.json, or a Hugging Face model folder (its tokenizer and chat template).
  std::string tokenizer = "byte";
  std::string chat_template;  // a built-in name; "" = the folder's own template, else llama-3
  std::size_t block_size = 16;
  std::string model_id = "builtin:tiny";  // seeds the block-hash root, as the engine's model_id
  TemplateErrorAction template_errors = TemplateErrorAction::kReject;
};

enum class RuleMode { kOff, kObserve, kRewrite };
const char* rule_mode_name(RuleMode mode);

struct CanonicalizationConfig {
  RuleMode tool_json = RuleMode::kRewrite;
  RuleMode tool_order = RuleMode::kRewrite;
  RuleMode response_format = RuleMode::kOff;
  RuleMode timestamp = RuleMode::kObserve;
  RuleMode whitespace = RuleMode::kOff;
  std::chrono::seconds timestamp_granularity{3600};
  std::size_t log_samples_per_s = 5;  // observe-mode findings logged (info) per second, at most
};

struct TimeoutConfig {
  std::chrono::milliseconds connect{2000};       // TCP connect to an upstream
  std::chrono::milliseconds first_byte{60000};   // request sent -> response header
  std::chrono::milliseconds idle{60000};         // between two reads of an upstream body
  std::chrono::milliseconds client_idle{60000};  // keep-alive wait for a client's next request
  // A client's request, first byte to last (headers and body): past it 408 (slow clients).
  std::chrono::milliseconds client_request{30000};
  std::chrono::milliseconds write{30000};  // one write to a client
  std::chrono::milliseconds health_interval{1000};
  std::chrono::milliseconds drain{30000};  // SIGTERM: in-flight requests get this long
};

struct LimitConfig {
  std::size_t max_body_bytes = 16u << 20;
  std::size_t max_header_bytes = 64u << 10;
  std::size_t max_connections = 10000;
  std::size_t max_idle_upstream_connections = 64;  // per replica
};

struct ApiKey {
  std::string key;
  std::string tenant;    // "" = the key itself names no tenant
  bool isolate = false;  // salt this tenant's prefix hashes and pass cache_salt upstream
};

struct TenantConfig {
  std::vector<ApiKey> api_keys;  // none: no authentication
  std::string tenant_header;     // e.g. "x-tenant"; "" = tenants come from keys only
  bool isolate_header_tenants = false;
};

// The admin surface: /metrics, /stats, /dashboard (and its login) and /prefixgate/explain show
// tenants, prompt excerpts and routing. Without a key they are served only where the gateway
// listens on loopback (server/admin_gate.h has the rules); admin_listen moves them off `listen`.
struct AdminConfig {
  std::string key;   // admin_key or PREFIXGATE_ADMIN_KEY; "" = none
  std::string host;  // admin_listen's; "" = the admin routes are served on `listen`
  std::uint16_t port = 0;
};

inline constexpr std::size_t kMinAdminKeyBytes = 16;
// Sets admin.key from `param` ("admin_key", "PREFIXGATE_ADMIN_KEY"): at least kMinAdminKeyBytes
// of printable ASCII without spaces (it travels in a header and a form).
Status set_admin_key(std::string_view key, const std::string& param, AdminConfig& admin);
// "HOST:PORT" (an IP address; port 0 picks one) -> admin.host, admin.port. Errors name `param`.
Status parse_admin_listen(std::string_view listen, const std::string& param, AdminConfig& admin);
// An IP address in 127.0.0.0/8, ::1 or ::ffff:127.0.0.0/104. Host names are not resolved: false.
bool is_loopback_host(std::string_view host);

struct RoutingConfig {
  // cache_aware: a lower-tier cached token's prefill saving relative to a device-cached one's.
  double offload_hit_weight = 0.8;
  // cache_aware: how many gateways share the fleet behind a load balancer that sprays requests
  // over them; with more than one, a cold prefix is placed so that their new prefixes spread
  // (gateway/ROUTING.md, rule 2).
  std::size_t gateways = 1;
};

// The tokenizer's segment cache (canonicalize/'s segment_cache.h): the tokens of the stretches
// of a prompt between special tokens (system prompt, tools, earlier turns) are kept, so a
// request is tokenized only where it is new. One cache for every model with a tokenizer.json
// (the byte tokenizer is cheaper than a lookup), within max_bytes. `enabled` also turns on every
// model's per-thread memo of block hashes (block_hash_memo.h).
struct TokenizerCacheConfig {
  bool enabled = true;
  std::size_t max_bytes = std::size_t{64} << 20;
  std::size_t min_segment_bytes = 64;  // shorter stretches are tokenized directly
};

// Peer gateways that share their sends (prefixgate/gateway/peer_sends.h), over UDP. Off unless
// `listen` is set; every gateway of a fleet lists the others' addresses.
struct PeerConfig {
  std::string host;  // listen's IP address; "" = not peered
  std::uint16_t port = 0;
  std::vector<std::string> addresses;  // "HOST:PORT" of each other gateway's peer listener
  std::size_t flush_us = 100;          // a send waits this long for others to go in one datagram
  std::size_t timeout_ms = 3000;       // a peer silent this long is gone: its flights end
  bool enabled() const { return !host.empty(); }
};
// "HOST:PORT" (an IP address; port 0 picks one) -> peers.host, peers.port. Errors name `param`.
Status parse_peer_listen(std::string_view listen, const std::string& param, PeerConfig& peers);
// "HOST:PORT" with a port 1-65535 (a host name is resolved when the gateway starts).
Status check_peer_address(std::string_view address, const std::string& param);

struct GatewayConfig {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;
  std::size_t threads = 0;  // 0: one per core
  std::string policy = "cache_aware";
  RoutingConfig routing;
  std::vector<UpstreamConfig> upstreams;
  std::vector<ModelConfig> models;  // empty: one default ModelConfig{}
  CanonicalizationConfig canonicalization;
  TimeoutConfig timeouts;
  LimitConfig limits;
  TokenizerCacheConfig tokenizer_cache;
  TenantConfig tenants;
  AdminConfig admin;
  PeerConfig peers;
  // tenant_limits: and admission: (prefixgate/gateway/admission.h); off unless configured.
  AdmissionConfig admission;
  std::size_t eject_after_failures = 3;  // consecutive request failures that eject a replica
  std::size_t max_attempts = 3;          // replicas tried per request before the first byte
  std::string log_level = "info";
};

// "http://HOST:PORT[/]" -> an UpstreamConfig of kind prefixgate. `param` names the key in errors.
Result<UpstreamConfig> parse_upstream_url(std::string_view url, std::string param = "upstream");
// The --upstream form: the URL, then any upstream key as ";key=value"
// ("http://h:8000;kind=vllm;kv_events=tcp://h:5557;data_parallel_size=2"). Errors name
// "param.key".
Result<UpstreamConfig> parse_upstream_spec(std::string_view spec, std::string param = "upstream");
// Sets one upstream key from its text (what both the YAML and the flag form go through).
Status set_upstream_key(UpstreamConfig& up, std::string_view key, std::string_view value,
                        const std::string& param);
// "HOST:PORT" -> host, port.
Status parse_listen(std::string_view listen, GatewayConfig& config);
// Parses YAML text over `config` (keys absent keep their value).
Status apply_config_yaml(std::string_view yaml, GatewayConfig& config);
Result<GatewayConfig> load_config_file(const std::string& path);
// Checks what only the whole can tell: at least one upstream, a known policy, positive sizes,
// event endpoints only on kinds that have them, models that exist, an admin key and listener of
// their own (validate_admin).
Status validate(const GatewayConfig& config);
Status validate_admin(const GatewayConfig& config);

}  // namespace prefixgate::gateway
