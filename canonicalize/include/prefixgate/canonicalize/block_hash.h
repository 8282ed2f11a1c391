// Chained prefix-block hashes over token ids: the names under which the engine caches KV pages
// and by which the gateway finds the replica that holds a prompt's prefix.
//
// Definition (engine and gateway must agree bit for bit; golden values are pinned in tests):
//
//   root   = XXH3_64bits("prefixgate-block-v1" || 0x00 || model_id || 0x00 || cache_salt)
//            (model_id and cache_salt as raw UTF-8 bytes; an absent salt is the empty string)
//   h[0]   = XXH3_64bits(le64(root)   || le32(t[0]) || ... || le32(t[B-1]))
//   h[i]   = XXH3_64bits(le64(h[i-1]) || le32(t[i*B]) || ... || le32(t[i*B+B-1]))
//
// where le64/le32 are little-endian encodings, t are token ids and B is the block size (default
// 16). Only full blocks are hashed: a prompt of n tokens has floor(n / B) block hashes. Because
// each hash covers its parent, equal h[i] means (up to hash collisions) equal tokens [0, (i+1)B).
// Hashes are for finding and reporting; nothing that decides correctness trusts them: the engine
// compares token ids before reusing a page.
//
//   uint64_t root = canon::block_hash_root("llama-3-8b", tenant);
//   std::vector<uint64_t> hashes = canon::block_hashes(tokens, 16, root);
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::canon {

inline constexpr std::size_t kDefaultBlockSize = 16;

std::uint64_t block_hash_root(std::string_view model_id, std::string_view cache_salt = {});

// The hash of one block given its parent's hash (the root for the first block).
// `block` must hold exactly one block of tokens.
std::uint64_t chain_block_hash(std::uint64_t parent, std::span<const TokenId> block);

// Hashes of all full blocks of `tokens`.
std::vector<std::uint64_t> block_hashes(std::span<const TokenId> tokens, std::size_t block_size,
                                        std::uint64_t root);

// 16 lowercase hex digits, as the hashes appear in JSON and logs.
std::string hash_hex(std::uint64_t hash);

}  // namespace prefixgate::canon
