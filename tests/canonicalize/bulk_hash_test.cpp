// bulk_hash128 is XXH3_128bits_withSeed, whichever kernel the CPU gets: the segment cache and the
// volatile memo key long texts by it, so a kernel that hashed differently would not be wrong on
// its own but would split one gateway's keys from another's built for another CPU.
#include "bulk_hash.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <random>
#include <string>

namespace prefixgate::canon::internal {
namespace {

TEST(BulkHash, IsXxh3OfTheBytesAtEveryLength) {
  std::mt19937_64 rng(7);
  std::string text(70'000, '\0');
  for (char& c : text) c = static_cast<char>(rng());
  // Every length around XXH3's path boundaries (16, 128, 240 bytes, its 1 KB stripe block) and
  // a spread of long ones, at odd starts so unaligned loads are covered.
  std::vector<std::size_t> lengths;
  for (std::size_t n = 0; n <= 1100; ++n) lengths.push_back(n);
  for (std::size_t n = 1100; n < text.size() - 8; n = n * 5 / 4 + 3) lengths.push_back(n);
  for (const std::size_t n : lengths) {
    for (const std::size_t start : {std::size_t{0}, std::size_t{3}}) {
      const std::string_view bytes(text.data() + start, n);
      const std::uint64_t seed = rng();
      const XXH128_hash_t want = XXH3_128bits_withSeed(bytes.data(), bytes.size(), seed);
      const Hash128 got = bulk_hash128(bytes, seed);
      ASSERT_EQ(got.low, want.low64) << "length " << n << " start " << start;
      ASSERT_EQ(got.high, want.high64) << "length " << n << " start " << start;
    }
  }
  EXPECT_EQ(bulk_hash128(text, 0), bulk_hash128(text));
}

}  // namespace
}  // namespace prefixgate::canon::internal
