// The peers: keys (peer gateways sharing their sends) and the --peer-listen / --peer flags.
#include <arpa/inet.h>

#include <charconv>

#include "config.h"

namespace prefixgate::gateway {
namespace {

Error bad(const std::string& param, std::string message) {
  return make_error(ErrorCode::kInvalidValue, param + ": " + std::move(message), param);
}

std::string_view unbracket(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

// Splits HOST:PORT; the port must be within [min_port, 65535].
Status split(std::string_view text, const std::string& param, unsigned min_port, std::string& host,
             std::uint16_t& port) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return bad(param, "'" + std::string(text) + "' is not HOST:PORT");
  }
  const std::string_view digits = text.substr(colon + 1);
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size() || value > 65535 ||
      value < min_port) {
    return bad(param, "bad port in '" + std::string(text) + "'");
  }
  host = std::string(unbracket(text.substr(0, colon)));
  port = static_cast<std::uint16_t>(value);
  return {};
}

}  // namespace

Status parse_peer_listen(std::string_view listen, const std::string& param, PeerConfig& peers) {
  std::string host;
  std::uint16_t port = 0;
  if (Status s = split(listen, param, 0, host, port); !s) return s;
  unsigned char addr[16];
  if (inet_pton(AF_INET, host.c_str(), addr) != 1 && inet_pton(AF_INET6, host.c_str(), addr) != 1) {
    return bad(param, "'" + host + "' is not an IP address (e.g. 10.0.0.1:7411)");
  }
  peers.host = host;
  peers.port = port;
  return {};
}

Status check_peer_address(std::string_view address, const std::string& param) {
  std::string host;
  std::uint16_t port = 0;
  return split(address, param, 1, host, port);
}

}  // namespace prefixgate::gateway
