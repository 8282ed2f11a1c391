// YAML and flag parsing for GatewayConfig. yaml-cpp throws; every exception is caught here and
// becomes an Error whose param names the key, so a bad file is refused with a useful message.
#include "config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include "admission_config.h"
#include "prefixgate/canonicalize/render.h"
#include "prefixgate/gateway/routing.h"
#include "prefixgate/kv_events/wire.h"

namespace prefixgate::gateway {
namespace {

Error bad(std::string param, std::string message) {
  return make_error(ErrorCode::kInvalidValue, std::move(message), std::move(param));
}

// Reads a scalar of type T at `node`, or an Error naming `key`.
template <class T>
Result<T> scalar(const YAML::Node& node, const std::string& key) {
  if (!node.IsScalar()) return bad(key, key + ": expected a scalar");
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    return bad(key, key + ": cannot read '" + node.Scalar() + "'");
  }
}

Result<std::size_t> positive(const YAML::Node& node, const std::string& key) {
  auto v = scalar<long long>(node, key);
  if (!v) return v.error();
  if (*v <= 0) return bad(key, key + ": must be a positive integer");
  return static_cast<std::size_t>(*v);
}

Result<RuleMode> rule_mode(const YAML::Node& node, const std::string& key) {
  auto s = scalar<std::string>(node, key);
  if (!s) return s.error();
  if (*s == "off") return RuleMode::kOff;
  if (*s == "observe") return RuleMode::kObserve;
  if (*s == "rewrite") return RuleMode::kRewrite;
  return bad(key, key + ": '" + *s + "' is not one of off, observe, rewrite");
}

Status apply_timeouts(const YAML::Node& t, TimeoutConfig& out) {
  const std::pair<const char*, std::chrono::milliseconds*> keys[] = {
      {"connect_ms", &out.connect},
      {"first_byte_ms", &out.first_byte},
      {"idle_ms", &out.idle},
      {"client_idle_ms", &out.client_idle},
      {"client_request_ms", &out.client_request},
      {"write_ms", &out.write},
      {"health_interval_ms", &out.health_interval},
      {"drain_ms", &out.drain}};
  for (const auto& kv : t) {
    const std::string k = kv.first.as<std::string>();
    bool known = false;
    for (const auto& [name, field] : keys) {
      if (k != name) continue;
      auto v = positive(kv.second, "timeouts." + k);
      if (!v) return v.error();
      *field = std::chrono::milliseconds(*v);
      known = true;
    }
    if (!known) return bad("timeouts." + k, "timeouts." + k + ": unknown key");
  }
  return {};
}

Status apply_limits(const YAML::Node& t, LimitConfig& out) {
  const std::pair<const char*, std::size_t*> keys[] = {
      {"max_body_bytes", &out.max_body_bytes},
      {"max_header_bytes", &out.max_header_bytes},
      {"max_connections", &out.max_connections},
      {"max_idle_upstream_connections", &out.max_idle_upstream_connections}};
  for (const auto& kv : t) {
    const std::string k = kv.first.as<std::string>();
    bool known = false;
    for (const auto& [name, field] : keys) {
      if (k != name) continue;
      auto v = positive(kv.second, "limits." + k);
      if (!v) return v.error();
      *field = *v;
      known = true;
    }
    if (!known) return bad("limits." + k, "limits." + k + ": unknown key");
  }
  return {};
}

Status apply_tokenizer_cache(const YAML::Node& t, TokenizerCacheConfig& out) {
  for (const auto& kv : t) {
    const std::string k = kv.first.as<std::string>();
    const std::string key = "tokenizer_cache." + k;
    if (k == "enabled") {
      auto b = scalar<bool>(kv.second, key);
      if (!b) return b.error();
      out.enabled = *b;
    } else if (k == "max_bytes") {
      auto v = positive(kv.second, key);
      if (!v) return v.error();
      out.max_bytes = *v;
    } else if (k == "min_segment_bytes") {
      auto v = scalar<std::size_t>(kv.second, key);
      if (!v) return v.error();
      out.min_segment_bytes = *v;
    } else {
      return bad(key, key + ": unknown key (enabled, max_bytes, min_segment_bytes)");
    }
  }
  return {};
}

Status apply_canonicalization(const YAML::Node& t, CanonicalizationConfig& out) {
  for (const auto& kv : t) {
    const std::string k = kv.first.as<std::string>();
    const std::string key = "canonicalization." + k;
    if (k == "timestamp_granularity_s") {
      auto v = positive(kv.second, key);
      if (!v) return v.error();
      out.timestamp_granularity = std::chrono::seconds(*v);
      continue;
    }
    if (k == "log_samples_per_s") {
      auto v = scalar<std::size_t>(kv.second, key);
      if (!v) return v.error();
      out.log_samples_per_s = *v;
      continue;
    }
    RuleMode* field = k == "tool-json"         ? &out.tool_json
                      : k == "tool-order"      ? &out.tool_order
                      : k == "response-format" ? &out.response_format
                      : k == "timestamp"       ? &out.timestamp
                      : k == "whitespace"      ? &out.whitespace
                                               : nullptr;
    if (!field) {
      return bad(key, key +
                          ": unknown rule (tool-json, tool-order, response-format, timestamp, "
                          "whitespace, timestamp_granularity_s, log_samples_per_s)");
    }
    auto m = rule_mode(kv.second, key);
    if (!m) return m.error();
    *field = *m;
  }
  return {};
}

Result<std::size_t> positive_text(std::string_view text, const std::string& key) {
  std::size_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v == 0) {
    return bad(key, key + ": '" + std::string(text) + "' is not a positive integer");
  }
  return v;
}

bool known_transport(std::string_view endpoint) {
  return endpoint.starts_with("tcp://") || endpoint.starts_with("ipc://") ||
         endpoint.starts_with("inproc://");
}

// What only all of an upstream's keys together tell: event endpoints only where there are
// events, vLLM's default PUB endpoint, a port for every data-parallel rank.
Status finish_upstream(UpstreamConfig& up, const std::string& param) {
  const bool events = has_kv_event_stream(up.kind);
  if (!events) {
    for (const auto& [name, set] : {std::pair{"kv_events", !up.kv_events.empty()},
                                    {"kv_events_replay", !up.kv_events_replay.empty()},
                                    {"data_parallel_size", up.data_parallel_size != 1}}) {
      if (set) {
        return bad(param + "." + name, param + "." + name + ": only upstreams of kind vllm or " +
                                           "sglang publish KV events");
      }
    }
    return {};
  }
  if (up.kv_events.empty()) up.kv_events = "tcp://" + up.host + ":5557";
  for (const auto& [name, endpoint] :
       {std::pair{"kv_events", &up.kv_events}, {"kv_events_replay", &up.kv_events_replay}}) {
    if (endpoint->empty()) continue;
    const std::string key = param + "." + name;
    if (!known_transport(*endpoint)) {
      return bad(key, key + ": '" + *endpoint + "' is not a tcp://, ipc:// or inproc:// endpoint");
    }
    if (*endpoint == "tcp://" || endpoint->find('*') != std::string::npos) {
      return bad(key, key + ": '" + *endpoint + "' is not an address to connect to");
    }
    if (!kv_events::endpoint_for_rank(*endpoint, up.data_parallel_size - 1)) {
      return bad(key, key + ": '" + *endpoint + "' has no port for data-parallel rank " +
                          std::to_string(up.data_parallel_size - 1) +
                          " (ranks publish on tcp:// ports offset by their rank)");
    }
  }
  return {};
}

Status apply_upstream(const YAML::Node& u, const std::string& key, GatewayConfig& cfg) {
  if (u.IsScalar()) {
    auto up = parse_upstream_url(u.Scalar(), key);
    if (!up) return up.error();
    cfg.upstreams.push_back(*up);
    return {};
  }
  if (!u.IsMap() || !u["url"]) return bad(key + ".url", key + ": needs a url");
  auto up = parse_upstream_url(u["url"].Scalar(), key + ".url");
  if (!up) return up.error();
  for (const auto& kv : u) {
    const std::string k = kv.first.as<std::string>();
    if (k == "url") continue;
    if (!kv.second.IsScalar()) return bad(key + "." + k, key + "." + k + ": expected a scalar");
    if (Status s = set_upstream_key(*up, k, kv.second.Scalar(), key); !s) return s;
  }
  if (Status s = finish_upstream(*up, key); !s) return s;
  cfg.upstreams.push_back(*up);
  return {};
}

Status apply_routing(const YAML::Node& t, RoutingConfig& out) {
  for (const auto& kv : t) {
    const std::string k = kv.first.as<std::string>();
    const std::string key = "routing." + k;
    if (k == "gateways") {
      auto n = positive(kv.second, key);
      if (!n) return n.error();
      out.gateways = *n;
      continue;
    }
    if (k != "offload_hit_weight") {
      return bad(key, key + ": unknown key (offload_hit_weight, gateways)");
    }
    auto v = scalar<double>(kv.second, key);
    if (!v) return v.error();
    if (!(*v >= 0 && *v <= 1)) return bad(key, key + ": must be between 0 and 1");
    out.offload_hit_weight = *v;
  }
  return {};
}

Status apply_peers(const YAML::Node& t, PeerConfig& out) {
  if (!t.IsMap()) return bad("peers", "peers: expected a mapping (listen, addresses, ...)");
  for (const auto& kv : t) {
    const std::string k = kv.first.as<std::string>();
    const std::string key = "peers." + k;
    if (k == "listen") {
      auto s = scalar<std::string>(kv.second, key);
      if (!s) return s.error();
      if (Status st = parse_peer_listen(*s, key, out); !st) return st;
    } else if (k == "addresses") {
      if (!kv.second.IsSequence()) return bad(key, key + ": expected a list of HOST:PORT");
      out.addresses.clear();
      for (std::size_t i = 0; i < kv.second.size(); ++i) {
        const std::string item = key + "[" + std::to_string(i) + "]";
        auto s = scalar<std::string>(kv.second[i], item);
        if (!s) return s.error();
        if (Status st = check_peer_address(*s, item); !st) return st;
        out.addresses.push_back(*s);
      }
    } else if (k == "flush_ms") {
      auto v = scalar<double>(kv.second, key);
      if (!v) return v.error();
      if (!(*v > 0 && *v <= 1000)) return bad(key, key + ": must be in (0, 1000]");
      out.flush_us = static_cast<std::size_t>(*v * 1000);
      if (out.flush_us == 0) out.flush_us = 1;
    } else if (k == "timeout_ms") {
      auto n = positive(kv.second, key);
      if (!n) return n.error();
      out.timeout_ms = *n;
    } else {
      return bad(key, key + ": unknown key (listen, addresses, flush_ms, timeout_ms)");
    }
  }
  return {};
}

Status apply_model(const std::string& name, const YAML::Node& m, const std::string& key,
                   GatewayConfig& cfg) {
  ModelConfig mc;
  mc.name = name == "default" ? "" : name;
  if (!m.IsMap()) return bad(key, key + ": expected a mapping");
  for (const auto& kv : m) {
    const std::string k = kv.first.as<std::string>();
    const std::string sub = key + "." + k;
    if (k == "tokenizer") {
      auto s = scalar<std::string>(kv.second, sub);
      if (!s) return s.error();
      mc.tokenizer = *s == "builtin" ? "byte" : *s;
    } else if (k == "chat_template") {
      auto s = scalar<std::string>(kv.second, sub);
      if (!s) return s.error();
      if (auto t = canon::chat_template_from_name(*s); !t) return bad(sub, t.error().message);
      mc.chat_template = *s;
    } else if (k == "block_size") {
      auto v = positive(kv.second, sub);
      if (!v) return v.error();
      mc.block_size = *v;
    } else if (k == "model_id") {
      auto s = scalar<std::string>(kv.second, sub);
      if (!s) return s.error();
      mc.model_id = *s;
    } else if (k == "template_errors") {
      auto s = scalar<std::string>(kv.second, sub);
      if (!s) return s.error();
      if (*s == "reject") {
        mc.template_errors = TemplateErrorAction::kReject;
      } else if (*s == "route_on_text") {
        mc.template_errors = TemplateErrorAction::kRouteOnText;
      } else {
        return bad(sub, sub + ": '" + *s + "' is not reject or route_on_text");
      }
    } else {
      return bad(sub, sub +
                          ": unknown key (tokenizer, chat_template, block_size, model_id, "
                          "template_errors)");
    }
  }
  cfg.models.push_back(std::move(mc));
  return {};
}

Status apply_tenants(const YAML::Node& root, GatewayConfig& cfg) {
  if (const YAML::Node keys = root["api_keys"]) {
    if (!keys.IsSequence()) return bad("api_keys", "api_keys: expected a list");
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const std::string key = "api_keys[" + std::to_string(i) + "]";
      ApiKey k;
      if (keys[i].IsScalar()) {
        k.key = keys[i].Scalar();
      } else if (keys[i].IsMap() && keys[i]["key"]) {
        k.key = keys[i]["key"].as<std::string>();
        if (keys[i]["tenant"]) k.tenant = keys[i]["tenant"].as<std::string>();
        if (keys[i]["isolate"]) {
          auto b = scalar<bool>(keys[i]["isolate"], key + ".isolate");
          if (!b) return b.error();
          k.isolate = *b;
        }
      } else {
        return bad(key, key + ": expected a key string or {key, tenant, isolate}");
      }
      if (k.key.empty()) return bad(key, key + ": empty key");
      cfg.tenants.api_keys.push_back(std::move(k));
    }
  }
  if (const YAML::Node h = root["tenant_header"]) {
    auto s = scalar<std::string>(h, "tenant_header");
    if (!s) return s.error();
    cfg.tenants.tenant_header = *s;
  }
  if (const YAML::Node h = root["isolate_header_tenants"]) {
    auto b = scalar<bool>(h, "isolate_header_tenants");
    if (!b) return b.error();
    cfg.tenants.isolate_header_tenants = *b;
  }
  return {};
}

Status apply_root(const YAML::Node& root, GatewayConfig& cfg) {
  for (const auto& kv : root) {
    const std::string k = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    Status st;
    if (k == "listen") {
      auto s = scalar<std::string>(v, k);
      if (!s) return s.error();
      st = parse_listen(*s, cfg);
    } else if (k == "threads") {
      auto n = scalar<long long>(v, k);
      if (!n || *n < 0) return bad(k, "threads: must be 0 (one per core) or more");
      cfg.threads = static_cast<std::size_t>(*n);
    } else if (k == "policy") {
      auto s = scalar<std::string>(v, k);
      if (!s) return s.error();
      cfg.policy = *s;
    } else if (k == "upstreams") {
      if (!v.IsSequence()) return bad(k, "upstreams: expected a list");
      cfg.upstreams.clear();
      for (std::size_t i = 0; i < v.size() && st; ++i) {
        st = apply_upstream(v[i], "upstreams[" + std::to_string(i) + "]", cfg);
      }
    } else if (k == "models") {
      if (!v.IsMap()) return bad(k, "models: expected a mapping of model name to settings");
      for (const auto& m : v) {
        if (!st) break;
        const std::string name = m.first.as<std::string>();
        st = apply_model(name, m.second, "models." + name, cfg);
      }
    } else if (k == "canonicalization") {
      st = v.IsMap() ? apply_canonicalization(v, cfg.canonicalization)
                     : Status(bad(k, "canonicalization: expected a mapping"));
    } else if (k == "routing") {
      st =
          v.IsMap() ? apply_routing(v, cfg.routing) : Status(bad(k, "routing: expected a mapping"));
    } else if (k == "peers") {
      st = apply_peers(v, cfg.peers);
    } else if (k == "timeouts") {
      st = v.IsMap() ? apply_timeouts(v, cfg.timeouts)
                     : Status(bad(k, "timeouts: expected a mapping"));
    } else if (k == "limits") {
      st = v.IsMap() ? apply_limits(v, cfg.limits) : Status(bad(k, "limits: expected a mapping"));
    } else if (k == "tenant_limits") {
      st = apply_tenant_limits(v, cfg.admission);
    } else if (k == "admission") {
      st = apply_admission(v, cfg.admission);
    } else if (k == "tokenizer_cache") {
      st = v.IsMap() ? apply_tokenizer_cache(v, cfg.tokenizer_cache)
                     : Status(bad(k, "tokenizer_cache: expected a mapping"));
    } else if (k == "eject_after_failures" || k == "max_attempts") {
      auto n = positive(v, k);
      if (!n) return n.error();
      (k == "max_attempts" ? cfg.max_attempts : cfg.eject_after_failures) = *n;
    } else if (k == "log_level") {
      auto s = scalar<std::string>(v, k);
      if (!s) return s.error();
      cfg.log_level = *s;
    } else if (k == "admin_key" || k == "admin_listen") {
      auto s = scalar<std::string>(v, k);
      if (!s) return s.error();
      st =
          k == "admin_key" ? set_admin_key(*s, k, cfg.admin) : parse_admin_listen(*s, k, cfg.admin);
    } else if (k == "api_keys" || k == "tenant_header" || k == "isolate_header_tenants") {
      continue;  // apply_tenants
    } else {
      return bad(k, k + ": unknown key");
    }
    if (!st) return st;
  }
  return apply_tenants(root, cfg);
}

}  // namespace

const char* rule_mode_name(RuleMode mode) {
  switch (mode) {
    case RuleMode::kOff: return "off";
    case RuleMode::kObserve: return "observe";
    case RuleMode::kRewrite: return "rewrite";
  }
  return "off";
}

const char* replica_kind_name(ReplicaKind kind) {
  switch (kind) {
    case ReplicaKind::kPrefixgate: return "prefixgate";
    case ReplicaKind::kOpenai: return "openai";
    case ReplicaKind::kVllm: return "vllm";
    case ReplicaKind::kSglang: return "sglang";
  }
  return "prefixgate";
}

bool has_kv_event_stream(ReplicaKind kind) {
  return kind == ReplicaKind::kVllm || kind == ReplicaKind::kSglang;
}

Status set_upstream_key(UpstreamConfig& up, std::string_view key, std::string_view value,
                        const std::string& param) {
  const std::string k = param + "." + std::string(key);
  if (key == "kind") {
    static constexpr std::pair<std::string_view, ReplicaKind> kKinds[] = {
        {"prefixgate", ReplicaKind::kPrefixgate},
        {"openai", ReplicaKind::kOpenai},
        {"vllm", ReplicaKind::kVllm},
        {"sglang", ReplicaKind::kSglang}};
    for (const auto& [name, kind] : kKinds) {
      if (value == name) {
        up.kind = kind;
        return {};
      }
    }
    return bad(k,
               k + ": '" + std::string(value) + "' is not one of prefixgate, vllm, sglang, openai");
  }
  if (key == "capacity_blocks" || key == "data_parallel_size" || key == "load_interval_ms" ||
      key == "prefill_tokens_per_s" || key == "decode_us_per_sequence") {
    auto v = positive_text(value, k);
    if (!v) return v.error();
    if (key == "prefill_tokens_per_s") {
      up.prefill_tokens_per_s = *v;
    } else if (key == "decode_us_per_sequence") {
      up.decode_us_per_sequence = *v;
    } else if (key == "capacity_blocks") {
      up.capacity_blocks = *v;
    } else if (key == "load_interval_ms") {
      up.load_interval = std::chrono::milliseconds(*v);
    } else if (*v > kMaxDataParallelSize) {
      return bad(k, k + ": at most " + std::to_string(kMaxDataParallelSize));
    } else {
      up.data_parallel_size = *v;
    }
    return {};
  }
  if (key == "kv_events" || key == "kv_events_replay" || key == "model") {
    if (value.empty()) return bad(k, k + ": empty");
    std::string& field = key == "kv_events" ? up.kv_events
                         : key == "model"   ? up.model
                                            : up.kv_events_replay;
    field = key == "model" && value == "default" ? std::string() : std::string(value);
    return {};
  }
  return bad(k, k + ": unknown key (kind, capacity_blocks, kv_events, kv_events_replay, " +
                    "data_parallel_size, load_interval_ms, model, prefill_tokens_per_s, " +
                    "decode_us_per_sequence)");
}

Result<UpstreamConfig> parse_upstream_spec(std::string_view spec, std::string param) {
  const std::size_t semi = spec.find(';');
  auto up = parse_upstream_url(spec.substr(0, semi), param);
  if (!up) return up.error();
  std::string_view rest = semi == std::string_view::npos ? std::string_view() : spec.substr(semi);
  while (!rest.empty()) {
    rest.remove_prefix(1);  // the ';'
    const std::size_t next = rest.find(';');
    const std::string_view item = rest.substr(0, next);
    rest = next == std::string_view::npos ? std::string_view() : rest.substr(next);
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return bad(param, param + ": '" + std::string(item) + "' is not key=value");
    }
    if (Status s = set_upstream_key(*up, item.substr(0, eq), item.substr(eq + 1), param); !s) {
      return s.error();
    }
  }
  if (Status s = finish_upstream(*up, param); !s) return s.error();
  return up;
}

const char* template_error_action_name(TemplateErrorAction action) {
  return action == TemplateErrorAction::kReject ? "reject" : "route_on_text";
}

Result<UpstreamConfig> parse_upstream_url(std::string_view url, std::string param) {
  constexpr std::string_view kScheme = "http://";
  if (!url.starts_with(kScheme)) {
    return bad(param, param + ": '" + std::string(url) + "' must start with http://");
  }
  std::string_view rest = url.substr(kScheme.size());
  if (rest.ends_with('/')) rest.remove_suffix(1);
  const std::size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || rest.find('/') != std::string_view::npos) {
    return bad(param, param + ": '" + std::string(url) + "' is not http://HOST:PORT");
  }
  UpstreamConfig up;
  up.url = std::string(url);
  up.host = std::string(rest.substr(0, colon));
  const std::string_view digits = rest.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (ec != std::errc() || end != digits.data() + digits.size() || port == 0 || port > 65535) {
    return bad(param, param + ": bad port in '" + std::string(url) + "'");
  }
  up.port = static_cast<std::uint16_t>(port);
  return up;
}

Status parse_listen(std::string_view listen, GatewayConfig& config) {
  const std::size_t colon = listen.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return bad("listen", "listen: '" + std::string(listen) + "' is not HOST:PORT");
  }
  const std::string_view digits = listen.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (ec != std::errc() || end != digits.data() + digits.size() || port > 65535) {
    return bad("listen", "listen: bad port in '" + std::string(listen) + "'");
  }
  config.host = std::string(listen.substr(0, colon));
  config.port = static_cast<std::uint16_t>(port);
  return {};
}

Status apply_config_yaml(std::string_view yaml, GatewayConfig& config) {
  try {
    const YAML::Node root = YAML::Load(std::string(yaml));
    if (root.IsNull()) return {};
    if (!root.IsMap()) return bad("", "configuration: expected a mapping at the top level");
    return apply_root(root, config);
  } catch (const YAML::Exception& e) {
    return bad("", std::string("configuration: ") + e.what());
  }
}

Result<GatewayConfig> load_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(ErrorCode::kNotFound, "cannot read config file " + path, "config");
  std::stringstream ss;
  ss << in.rdbuf();
  GatewayConfig cfg;
  if (auto st = apply_config_yaml(ss.str(), cfg); !st) return st.error();
  return cfg;
}

Status validate(const GatewayConfig& config) {
  if (config.upstreams.empty()) {
    return bad("upstreams", "upstreams: at least one upstream is required (--upstream URL)");
  }
  static constexpr std::string_view kPolicies[] = {
      "round_robin",     "random",      "least_load",         "power_of_two",
      "consistent_hash", "cache_aware", "sglang_cache_aware", "dynamo_kv"};
  bool known = false;
  for (std::string_view p : kPolicies) known = known || p == config.policy;
  if (config.policy.starts_with("cache_aware:")) {  // cache_aware with parameter overrides
    if (auto made = make_policy(config.policy); !made) {
      return bad("policy", "policy: " + made.error().message);
    }
    known = true;
  }
  if (!known) {
    return bad("policy", "policy: '" + config.policy +
                             "' is not one of round_robin, random, least_load, power_of_two, "
                             "consistent_hash, cache_aware, sglang_cache_aware, dynamo_kv");
  }
  for (std::size_t i = 0; i < config.upstreams.size(); ++i) {
    const std::string& model = config.upstreams[i].model;
    if (model.empty()) continue;
    const bool model_known = std::any_of(config.models.begin(), config.models.end(),
                                         [&](const ModelConfig& m) { return m.name == model; });
    if (!model_known) {
      const std::string key = "upstreams[" + std::to_string(i) + "].model";
      return bad(key, key + ": no model '" + model + "' under models:");
    }
  }
  for (std::size_t i = 0; i < config.models.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (config.models[i].name == config.models[j].name) {
        return bad("models." + config.models[i].name,
                   "models: '" + config.models[i].name + "' is configured twice");
      }
    }
  }
  const PeerConfig& peers = config.peers;
  if (peers.enabled() && peers.addresses.empty()) {
    return bad("peers.addresses",
               "peers.addresses: a peer listener needs the other gateways' addresses "
               "(--peer HOST:PORT)");
  }
  if (!peers.enabled() && !peers.addresses.empty()) {
    return bad("peers.listen",
               "peers.listen: peer addresses need a listener of this gateway's own "
               "(--peer-listen IP:PORT)");
  }
  if (peers.enabled() && peers.timeout_ms * 1000 < 4 * peers.flush_us) {
    return bad("peers.timeout_ms", "peers.timeout_ms: must be at least four flush_ms");
  }
  return validate_admin(config);
}

}  // namespace prefixgate::gateway
