#include "prefixgate/canonicalize/block_hash.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <numeric>
#include <random>
#include <vector>

namespace prefixgate::canon {
namespace {

std::vector<TokenId> iota_tokens(std::size_t n, TokenId first = 0) {
  std::vector<TokenId> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// The definition in block_hash.h, spelled out byte by byte, independent of the implementation.
TEST(BlockHashTest, FollowsTheDocumentedDefinition) {
  const std::string root_material = std::string("prefixgate-block-v1") + '\0' + "m" + '\0' + "s";
  const std::uint64_t root = XXH3_64bits(root_material.data(), root_material.size());
  EXPECT_EQ(block_hash_root("m", "s"), root);

  std::vector<unsigned char> bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<unsigned char>(root >> (8 * i)));
  for (TokenId t = 0x01020300; t < 0x01020300 + 4; ++t) {
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<unsigned char>(t >> (8 * i)));
  }
  const std::vector<TokenId> block = {0x01020300, 0x01020301, 0x01020302, 0x01020303};
  EXPECT_EQ(chain_block_hash(root, block), XXH3_64bits(bytes.data(), bytes.size()));
}

// Every block size against XXH3 over the serialized bytes, with random parents and tokens: the
// implementation takes other paths for some sizes (the default 16 among them).
TEST(BlockHashTest, EveryBlockSizeEqualsXxh3OfTheSerializedBlock) {
  std::mt19937_64 rng(5);
  for (std::size_t size = 1; size <= 80; ++size) {
    for (int round = 0; round < 20; ++round) {
      const std::uint64_t parent = rng();
      std::vector<TokenId> block(size);
      for (TokenId& t : block) t = static_cast<TokenId>(rng());
      std::vector<unsigned char> bytes;
      for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<unsigned char>(parent >> (8 * i)));
      for (TokenId t : block) {
        for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<unsigned char>(t >> (8 * i)));
      }
      ASSERT_EQ(chain_block_hash(parent, block), XXH3_64bits(bytes.data(), bytes.size()))
          << "block of " << size << " tokens";
    }
  }
}

// Golden values: these must never change, or every deployed engine and gateway disagree.
TEST(BlockHashTest, GoldenHashesAreStable) {
  EXPECT_EQ(hash_hex(block_hash_root("builtin:tiny")), "8199f17be7202b19");
  EXPECT_EQ(hash_hex(block_hash_root("builtin:tiny", "tenant-a")), "9d6589552a2b2bec");
  const std::vector<std::uint64_t> hashes =
      block_hashes(iota_tokens(40), kDefaultBlockSize, block_hash_root("builtin:tiny"));
  ASSERT_EQ(hashes.size(), 2u);
  EXPECT_EQ(hash_hex(hashes[0]), "8c5ef352c9d96eea");
  EXPECT_EQ(hash_hex(hashes[1]), "fddee54ccfa597d8");
}

TEST(BlockHashTest, OnlyFullBlocksAreHashed) {
  const std::uint64_t root = block_hash_root("m");
  EXPECT_TRUE(block_hashes(iota_tokens(15), 16, root).empty());
  EXPECT_EQ(block_hashes(iota_tokens(16), 16, root).size(), 1u);
  EXPECT_EQ(block_hashes(iota_tokens(47), 16, root).size(), 2u);
}

TEST(BlockHashTest, SharedPrefixSharesHashesUntilTheFirstDifferentBlock) {
  const std::uint64_t root = block_hash_root("m");
  std::vector<TokenId> a = iota_tokens(64);
  std::vector<TokenId> b = a;
  b[40] = 999;  // block 2 differs
  const auto ha = block_hashes(a, 16, root);
  const auto hb = block_hashes(b, 16, root);
  EXPECT_EQ(ha[0], hb[0]);
  EXPECT_EQ(ha[1], hb[1]);
  EXPECT_NE(ha[2], hb[2]);
  EXPECT_NE(ha[3], hb[3]);  // the chain carries the difference forward
}

TEST(BlockHashTest, SaltAndModelSeparateEqualTokens) {
  const auto tokens = iota_tokens(32);
  const auto plain = block_hashes(tokens, 16, block_hash_root("m"));
  EXPECT_NE(plain, block_hashes(tokens, 16, block_hash_root("m", "tenant")));
  EXPECT_NE(plain, block_hashes(tokens, 16, block_hash_root("other")));
  // The separator keeps ("ab","") apart from ("a","b").
  EXPECT_NE(block_hash_root("ab", ""), block_hash_root("a", "b"));
}

TEST(BlockHashTest, LargeBlocksStreamTheSameAsSmallOnes) {
  // Blocks beyond the stack buffer take the streaming path; both must implement one definition.
  const auto tokens = iota_tokens(200, 7);
  std::vector<unsigned char> bytes(8, 0);
  for (TokenId t : tokens) {
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<unsigned char>(t >> (8 * i)));
  }
  EXPECT_EQ(chain_block_hash(0, tokens), XXH3_64bits(bytes.data(), bytes.size()));
}

TEST(BlockHashTest, HexIsSixteenLowercaseDigits) {
  EXPECT_EQ(hash_hex(0), "0000000000000000");
  EXPECT_EQ(hash_hex(0xABCDEF0123456789ull), "abcdef0123456789");
}

}  // namespace
}  // namespace prefixgate::canon
