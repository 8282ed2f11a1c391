#include "prefixgate/canonicalize/block_hash.h"

#include "prefixgate/base/check.h"

// Inlined XXH3: block hashes are 72-byte inputs, where call overhead is a large share of the cost.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

namespace prefixgate::canon {
namespace {

// Little-endian stores that compile to plain moves on x86 and stay correct elsewhere.
inline void store_le64(std::uint64_t v, unsigned char* p) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
inline void store_le32(std::uint32_t v, unsigned char* p) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

// Blocks up to this many tokens are serialized on the stack; larger ones stream through XXH3.
constexpr std::size_t kStackBlockTokens = 64;
static_assert(sizeof(TokenId) == 4, "a block serializes each token id as 4 bytes");

// XXH3_64bits (seed 0, default secret) of le64(parent) || the block's token bytes, for inputs
// of 65 to 128 bytes (15 to 30 tokens: the default block of 16 is 72 bytes), computed as XXH3's
// 17-128-byte path does but with the parent in a register. In that path the input is mixed 16
// bytes at a time and the mixes are summed; for these lengths only the mix at offset 0 reads
// the parent's bytes. The other mixes read the tokens where they lie, so they depend on nothing
// before and overlap with the previous block's hash; what is left in the chain from parent to
// hash is one 128-bit multiply and the avalanche. Bit for bit XXH3 (tests compare the two).
constexpr std::size_t kSplitMinTokens = 15, kSplitMaxTokens = 30;

inline std::uint64_t split_chain_hash(std::uint64_t parent, const TokenId* tokens,
                                      std::size_t count) {
  const auto* t = reinterpret_cast<const xxh_u8*>(tokens);  // input byte k is t[k - 8]
  const xxh_u8* secret = XXH3_kSecret;
  const std::size_t len = 8 + 4 * count;
  xxh_u64 acc = len * XXH_PRIME64_1;
  if (len > 96) {
    acc += XXH3_mix16B(t + 40, secret + 96, 0);
    acc += XXH3_mix16B(t + len - 72, secret + 112, 0);
  }
  acc += XXH3_mix16B(t + 24, secret + 64, 0);
  acc += XXH3_mix16B(t + len - 56, secret + 80, 0);
  acc += XXH3_mix16B(t + 8, secret + 32, 0);
  acc += XXH3_mix16B(t + len - 40, secret + 48, 0);
  acc += XXH3_mix16B(t + len - 24, secret + 16, 0);
  // The mix at offset 0: the parent and the first two tokens.
  acc +=
      XXH3_mul128_fold64(parent ^ XXH_readLE64(secret), XXH_readLE64(t) ^ XXH_readLE64(secret + 8));
  return XXH3_avalanche(acc);
}

}  // namespace

std::uint64_t block_hash_root(std::string_view model_id, std::string_view cache_salt) {
  static constexpr std::string_view kDomain = "prefixgate-block-v1";
  // Every request computes its root: the usual model name and salt are put together on the
  // stack, not in an allocation.
  std::array<char, 256> on_stack;
  std::string on_heap;
  const std::size_t size = kDomain.size() + model_id.size() + cache_salt.size() + 2;
  char* material = on_stack.data();
  if (size > on_stack.size()) {
    on_heap.resize(size);
    material = on_heap.data();
  }
  char* p = std::copy(kDomain.begin(), kDomain.end(), material);
  *p++ = '\0';
  p = std::copy(model_id.begin(), model_id.end(), p);
  *p++ = '\0';
  std::copy(cache_salt.begin(), cache_salt.end(), p);
  return XXH3_64bits(material, size);
}

std::uint64_t chain_block_hash(std::uint64_t parent, std::span<const TokenId> block) {
  if constexpr (std::endian::native == std::endian::little) {
    if (block.size() >= kSplitMinTokens && block.size() <= kSplitMaxTokens) {
      return split_chain_hash(parent, block.data(), block.size());
    }
  }
  if (block.size() <= kStackBlockTokens) {
    std::array<unsigned char, 8 + 4 * kStackBlockTokens> buf;
    store_le64(parent, buf.data());
    const std::size_t bytes = 4 * block.size();
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(buf.data() + 8, block.data(), bytes);  // token ids are already little-endian
    } else {
      unsigned char* p = buf.data() + 8;
      for (TokenId t : block) {
        store_le32(t, p);
        p += 4;
      }
    }
    return XXH3_64bits(buf.data(), 8 + bytes);
  }
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  unsigned char head[8];
  store_le64(parent, head);
  XXH3_64bits_update(&state, head, sizeof head);
  unsigned char chunk[4 * kStackBlockTokens];
  for (std::size_t i = 0; i < block.size(); i += kStackBlockTokens) {
    std::size_t n = std::min(kStackBlockTokens, block.size() - i);
    for (std::size_t j = 0; j < n; ++j) store_le32(block[i + j], chunk + 4 * j);
    XXH3_64bits_update(&state, chunk, 4 * n);
  }
  return XXH3_64bits_digest(&state);
}

std::vector<std::uint64_t> block_hashes(std::span<const TokenId> tokens, std::size_t block_size,
                                        std::uint64_t root) {
  PG_DCHECK(block_size > 0);
  std::vector<std::uint64_t> out;
  const std::size_t blocks = tokens.size() / block_size;
  out.reserve(blocks);
  std::uint64_t parent = root;
  for (std::size_t i = 0; i < blocks; ++i) {
    parent = chain_block_hash(parent, tokens.subspan(i * block_size, block_size));
    out.push_back(parent);
  }
  return out;
}

std::string hash_hex(std::uint64_t hash) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i) {
    out[static_cast<std::size_t>(i)] = kDigits[hash & 0xf];
    hash >>= 4;
  }
  return out;
}

}  // namespace prefixgate::canon
