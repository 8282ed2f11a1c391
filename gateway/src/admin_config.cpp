// The admin surface's configuration keys (admin_key, admin_listen, PREFIXGATE_ADMIN_KEY,
// --admin-listen) and what only the whole configuration tells about them.
#include <arpa/inet.h>

#include <cstring>

#include "config.h"
#include "host_port.h"

namespace prefixgate::gateway {

Status set_admin_key(std::string_view key, const std::string& param, AdminConfig& admin) {
  if (key.size() < kMinAdminKeyBytes) {
    return config_error(param, "must be at least " + std::to_string(kMinAdminKeyBytes) +
                                   " characters (e.g. the output of `openssl rand -hex 24`)");
  }
  for (const char ch : key) {
    if (ch <= ' ' || ch > '~') {
      return config_error(param,
                          "only printable ASCII without spaces (it is sent as a bearer token)");
    }
  }
  admin.key = std::string(key);
  return {};
}

bool is_loopback_host(std::string_view host) {
  const std::string text(unbracket(host));
  unsigned char v4[4];
  if (inet_pton(AF_INET, text.c_str(), v4) == 1) return v4[0] == 127;
  unsigned char v6[16];
  if (inet_pton(AF_INET6, text.c_str(), v6) != 1) return false;
  static constexpr unsigned char kLoopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  static constexpr unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(v6, kLoopback, 16) == 0) return true;
  return std::memcmp(v6, kMapped, 12) == 0 && v6[12] == 127;
}

Status parse_admin_listen(std::string_view listen, const std::string& param, AdminConfig& admin) {
  return split_ip_port(listen, param, "127.0.0.1:9090", admin.host, admin.port);
}

Status validate_admin(const GatewayConfig& config) {
  const AdminConfig& admin = config.admin;
  if (!admin.host.empty() && admin.port != 0 && admin.port == config.port &&
      unbracket(admin.host) == unbracket(config.host)) {
    return config_error("admin_listen", "is the same address as listen (" + config.host + ":" +
                                            std::to_string(config.port) + ")");
  }
  for (std::size_t i = 0; i < config.tenants.api_keys.size(); ++i) {
    if (!admin.key.empty() && config.tenants.api_keys[i].key == admin.key) {
      return config_error("admin_key",
                          "is also api_keys[" + std::to_string(i) +
                              "]: an application's key must not open the admin routes");
    }
  }
  return {};
}

}  // namespace prefixgate::gateway
