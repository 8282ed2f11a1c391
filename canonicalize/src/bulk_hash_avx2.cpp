// Compiled with -mavx2 (canonicalize/CMakeLists.txt). It uses no C++ inline function (its own
// header includes only <cstddef> and <cstdint>): an inline function emitted here would carry AVX2
// instructions, and the linker may keep this copy for callers on any CPU. XXH_INLINE_ALL makes
// XXH3 static to this file.
#include "bulk_hash_avx2.h"

#if defined(__x86_64__)
#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX2
#include <xxhash.h>

namespace prefixgate::canon::internal {

void xxh3_128_avx2(const void* data, std::size_t size, std::uint64_t seed, std::uint64_t out[2]) {
  const XXH128_hash_t h = XXH3_128bits_withSeed(data, size, seed);
  out[0] = h.low64;
  out[1] = h.high64;
}

}  // namespace prefixgate::canon::internal

#endif  // __x86_64__
