#include "bulk_hash.h"

#include <xxhash.h>

#if defined(__x86_64__)
#include "bulk_hash_avx2.h"
#endif

namespace prefixgate::canon::internal {
namespace {

// XXH3 runs its vector loop only above 240 bytes; shorter inputs take the same scalar code in
// either build, so they skip the check and the call.
constexpr std::size_t kVectorMinBytes = 241;

#if defined(__x86_64__)
bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") != 0;
  return has;
}
#endif

}  // namespace

Hash128 bulk_hash128(std::string_view bytes, std::uint64_t seed) {
#if defined(__x86_64__)
  if (bytes.size() >= kVectorMinBytes && cpu_has_avx2()) {
    std::uint64_t out[2];
    xxh3_128_avx2(bytes.data(), bytes.size(), seed, out);
    return Hash128{.low = out[0], .high = out[1]};
  }
#endif
  const XXH128_hash_t h = XXH3_128bits_withSeed(bytes.data(), bytes.size(), seed);
  return Hash128{.low = h.low64, .high = h.high64};
}

}  // namespace prefixgate::canon::internal
