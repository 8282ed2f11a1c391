// Synthetic chained block hashes for the routing benchmarks: distinct prompts that look like real
// ones to the prefix index (well-mixed 64-bit keys, each block's hash depending on the last).
//
//   auto prompt = synthetic_hashes::chain(/*seed=*/7, /*blocks=*/2048);
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace synthetic_hashes {

// A 64-bit finalizer (splitmix64's constants).
inline std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ULL;
  x ^= x >> 27;
  x *= 0x81dadef4bc2dd44dULL;
  x ^= x >> 33;
  return x;
}

// `blocks` chained hashes of the prompt named by `seed`.
inline std::vector<std::uint64_t> chain(std::uint64_t seed, std::size_t blocks) {
  std::vector<std::uint64_t> out(blocks);
  std::uint64_t h = mix(seed + 1);
  for (std::size_t i = 0; i < blocks; ++i) out[i] = h = mix(h ^ (i + 1));
  return out;
}

}  // namespace synthetic_hashes
