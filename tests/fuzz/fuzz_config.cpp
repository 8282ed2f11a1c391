// The gateway's YAML configuration loader on arbitrary text: apply_config_yaml() and validate()
// answer a Status naming the offending key, never throw (yaml-cpp throws: the loader must catch)
// or crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace prefixgate::gateway;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  GatewayConfig config;
  const auto applied = apply_config_yaml(text, config);
  if (!applied.ok()) {
    if (applied.error().message.empty()) {
      std::fprintf(stderr, "fuzz_config: an error without a message\n");
      std::abort();
    }
    return 0;
  }
  (void)validate(config);
  for (const UpstreamConfig& up : config.upstreams) (void)parse_upstream_spec(up.url);
  return 0;
}
