// HOST:PORT as the configuration writes it (listeners and peers), and the error a bad key gets.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "prefixgate/base/status.h"

namespace prefixgate::gateway {

// kInvalidValue "param: message", naming `param`.
Error config_error(const std::string& param, std::string message);
// The host part of HOST:PORT without IPv6 brackets ("[::1]" -> "::1").
std::string_view unbracket(std::string_view host);
// "HOST:PORT" -> host (unbracketed), port, which must lie in [min_port, 65535]. Errors name
// `param`: "'text' is not HOST:PORT", "bad port in 'text'".
Status split_host_port(std::string_view text, const std::string& param, unsigned min_port,
                       std::string& host, std::uint16_t& port);
// A listener's "IP:PORT" (port 0 picks one): split_host_port, and the host must be an IP address,
// not a name (the error shows `example`).
Status split_ip_port(std::string_view text, const std::string& param, std::string_view example,
                     std::string& host, std::uint16_t& port);

}  // namespace prefixgate::gateway
