// The AVX2 kernel behind bulk_hash128 (bulk_hash.h), in a file compiled with -mavx2. Only
// bulk_hash.cpp calls it, and only on a CPU that has AVX2.
#pragma once

#include <cstddef>
#include <cstdint>

namespace prefixgate::canon::internal {

// XXH3_128bits_withSeed(data, size, seed) into out[0] (low) and out[1] (high).
void xxh3_128_avx2(const void* data, std::size_t size, std::uint64_t seed, std::uint64_t out[2]);

}  // namespace prefixgate::canon::internal
