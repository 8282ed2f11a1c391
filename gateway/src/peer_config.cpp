// The peers: keys (peer gateways sharing their sends) and the --peer-listen / --peer flags.
#include "config.h"
#include "host_port.h"

namespace prefixgate::gateway {

Status parse_peer_listen(std::string_view listen, const std::string& param, PeerConfig& peers) {
  return split_ip_port(listen, param, "10.0.0.1:7411", peers.host, peers.port);
}

Status check_peer_address(std::string_view address, const std::string& param) {
  std::string host;
  std::uint16_t port = 0;
  return split_host_port(address, param, 1, host, port);
}

}  // namespace prefixgate::gateway
