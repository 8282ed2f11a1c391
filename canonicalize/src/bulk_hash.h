// XXH3-128 of a long text (a prompt segment, a message), with the widest vector unit the CPU
// offers.
//
// The segment cache and the volatile-content memo key every long stretch of a prompt by its hash,
// so a 30 KB agent turn hashes 30 KB two or three times per request. Debian's libxxhash is built
// for baseline x86-64 (SSE2); its AVX2 loop is about 3x faster on a 30 KB input. The AVX2 kernel
// is compiled into a file of its own (bulk_hash_avx2.cpp, -mavx2) and chosen at run time, so the
// binary still runs on a CPU without AVX2. The result is the same XXH3-128 either way: XXH3's
// vector paths are bit for bit its scalar one.
#pragma once

#include <cstdint>
#include <string_view>

namespace prefixgate::canon::internal {

struct Hash128 {
  std::uint64_t low = 0;
  std::uint64_t high = 0;
  bool operator==(const Hash128&) const = default;
};

// XXH3_128bits_withSeed(bytes, seed).
Hash128 bulk_hash128(std::string_view bytes, std::uint64_t seed = 0);

}  // namespace prefixgate::canon::internal
