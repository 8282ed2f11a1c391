// The generated-weight value, one definition for the host and both kernel builds.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define PG_HOST_DEVICE __host__ __device__
#else
#define PG_HOST_DEVICE
#endif

namespace prefixgate::kernels {

// offset + scale * u, u uniform in [-1, 1) from splitmix64(seed, index): 24 random bits, exact
// in fp32, so host and device agree bit for bit.
PG_HOST_DEVICE inline float random_value(std::uint64_t seed, std::uint64_t index, float scale,
                                         float offset) {
  std::uint64_t x = seed ^ (index * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull);
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  const float u = static_cast<float>(x >> 40) * (1.0f / 8388608.0f) - 1.0f;
  return offset + scale * u;
}

}  // namespace prefixgate::kernels
