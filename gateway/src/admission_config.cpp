// tenant_limits: and admission: from YAML. A limit is a positive integer or absent (no limit):
// 0 is refused rather than read as "unlimited" or "nothing allowed", which a reader could take
// either way.
#include "admission_config.h"

#include <yaml-cpp/yaml.h>

#include <string>

namespace prefixgate::gateway {
namespace {

Error bad(const std::string& key, const std::string& message) {
  return make_error(ErrorCode::kInvalidValue, key + ": " + message, key);
}

// A non-negative integer (positive unless `zero_ok`) at `node`.
Result<std::size_t> count(const YAML::Node& node, const std::string& key, bool zero_ok) {
  const char* want = zero_ok ? "a non-negative integer" : "a positive integer";
  if (!node.IsScalar()) return bad(key, std::string("expected ") + want);
  long long v = 0;
  try {
    v = node.as<long long>();
  } catch (const YAML::Exception&) {
    return bad(key, "'" + node.Scalar() + "' is not " + want);
  }
  if (v < 0 || (v == 0 && !zero_ok)) {
    return bad(key, "'" + node.Scalar() + "' is not " + want +
                        (zero_ok ? "" : " (leave the key out for no limit)"));
  }
  return static_cast<std::size_t>(v);
}

Status apply_tenant(const YAML::Node& node, const std::string& key, TenantLimits& out) {
  if (!node.IsMap()) {
    return bad(key, "expected a mapping of requests_per_minute, tokens_per_minute, max_concurrent");
  }
  for (const auto& kv : node) {
    const std::string k = kv.first.as<std::string>();
    const std::string sub = key + "." + k;
    std::size_t* field = k == "requests_per_minute" ? &out.requests_per_minute
                         : k == "tokens_per_minute" ? &out.tokens_per_minute
                         : k == "max_concurrent"    ? &out.max_concurrent
                                                    : nullptr;
    if (field == nullptr) {
      return bad(sub, "unknown key (requests_per_minute, tokens_per_minute, max_concurrent)");
    }
    auto v = count(kv.second, sub, /*zero_ok=*/false);
    if (!v) return v.error();
    *field = *v;
  }
  return {};
}

}  // namespace

Status apply_tenant_limits(const YAML::Node& node, AdmissionConfig& out) {
  if (!node.IsMap()) {
    return bad("tenant_limits", "expected a mapping of tenant name (or default) to limits");
  }
  for (const auto& kv : node) {
    const std::string tenant = kv.first.as<std::string>();
    const std::string key = "tenant_limits." + tenant;
    if (tenant.empty()) return bad(key, "empty tenant name");
    TenantLimits limits;
    if (Status s = apply_tenant(kv.second, key, limits); !s) return s;
    out.tenant_limits[tenant] = limits;
  }
  return {};
}

Status apply_admission(const YAML::Node& node, AdmissionConfig& out) {
  if (!node.IsMap()) {
    return bad("admission",
               "expected a mapping (max_inflight, max_queue, queue_timeout_ms, "
               "default_max_tokens)");
  }
  for (const auto& kv : node) {
    const std::string k = kv.first.as<std::string>();
    const std::string key = "admission." + k;
    if (k == "max_inflight" || k == "max_queue") {  // 0: no bound; no queue
      auto v = count(kv.second, key, /*zero_ok=*/true);
      if (!v) return v.error();
      (k == "max_inflight" ? out.max_inflight : out.max_queue) = *v;
    } else if (k == "queue_timeout_ms" || k == "default_max_tokens") {
      auto v = count(kv.second, key, /*zero_ok=*/false);
      if (!v) return v.error();
      if (k == "queue_timeout_ms") {
        out.queue_timeout = std::chrono::milliseconds(*v);
      } else {
        out.default_max_tokens = *v;
      }
    } else {
      return bad(key,
                 "unknown key (max_inflight, max_queue, queue_timeout_ms, default_max_tokens)");
    }
  }
  return {};
}

}  // namespace prefixgate::gateway
