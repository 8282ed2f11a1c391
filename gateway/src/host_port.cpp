#include "host_port.h"

#include <arpa/inet.h>

#include <charconv>

namespace prefixgate::gateway {

Error config_error(const std::string& param, std::string message) {
  return make_error(ErrorCode::kInvalidValue, param + ": " + std::move(message), param);
}

std::string_view unbracket(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

Status split_host_port(std::string_view text, const std::string& param, unsigned min_port,
                       std::string& host, std::uint16_t& port) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return config_error(param, "'" + std::string(text) + "' is not HOST:PORT");
  }
  const std::string_view digits = text.substr(colon + 1);
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size() || value > 65535 ||
      value < min_port) {
    return config_error(param, "bad port in '" + std::string(text) + "'");
  }
  host = std::string(unbracket(text.substr(0, colon)));
  port = static_cast<std::uint16_t>(value);
  return {};
}

Status split_ip_port(std::string_view text, const std::string& param, std::string_view example,
                     std::string& host, std::uint16_t& port) {
  std::string h;
  std::uint16_t p = 0;
  if (Status s = split_host_port(text, param, 0, h, p); !s) return s;
  unsigned char addr[16];
  if (inet_pton(AF_INET, h.c_str(), addr) != 1 && inet_pton(AF_INET6, h.c_str(), addr) != 1) {
    return config_error(param,
                        "'" + h + "' is not an IP address (e.g. " + std::string(example) + ")");
  }
  host = std::move(h);
  port = p;
  return {};
}

}  // namespace prefixgate::gateway
