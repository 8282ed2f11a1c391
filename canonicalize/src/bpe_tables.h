// The two hash tables on BPE's hot path, open-addressed with linear probing because each is
// built once and then only read, by many threads at once:
//   - TokenLookup: a token's bytes -> its id (for `ignore_merges` and added tokens);
//   - MergeTable: a pair of adjacent token ids -> the merge's rank and the id it produces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::canon::internal {

class TokenLookup {
 public:
  // `tokens[id]` is the bytes of token `id`; ids whose `include[id]` is false are left out.
  // Later ids win when two have the same bytes. `tokens` must outlive this table and keep its
  // buffer (the table keeps tokens.data(), which survives moving the vector).
  void build(const std::vector<std::string_view>& tokens, const std::vector<bool>& include);
  std::optional<TokenId> find(std::string_view bytes) const;

 private:
  struct Slot {
    std::uint32_t id_plus_one = 0;  // 0: empty
    std::uint32_t hash_high = 0;    // upper hash bits, to skip most byte comparisons
  };
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  const std::string_view* tokens_ = nullptr;
};

struct Merge {
  std::uint32_t rank;  // position in tokenizer.json's merges: lower merges first
  TokenId merged;
};

class MergeTable {
 public:
  void reserve(std::size_t merges);
  // Later calls win, as with the Hugging Face loader's map.
  void insert(TokenId left, TokenId right, Merge merge);
  const Merge* find(TokenId left, TokenId right) const {
    const std::uint64_t key = pack(left, right);
    for (std::size_t i = slot_of(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.merge;
      if (s.key == kEmpty) return nullptr;
    }
  }
  std::size_t size() const { return size_; }

 private:
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};  // no id is 2^32 - 1
  struct Slot {
    std::uint64_t key = kEmpty;
    Merge merge{};
  };
  static std::uint64_t pack(TokenId left, TokenId right) {
    return (std::uint64_t{left} << 32) | right;
  }
  std::size_t slot_of(std::uint64_t key) const {
    // Fibonacci hashing: the multiply spreads the ids' low bits into the high ones.
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_) & mask_;
  }
  void grow();

  std::vector<Slot> slots_ = std::vector<Slot>(16);
  std::size_t mask_ = 15;
  unsigned shift_ = 60;
  std::size_t size_ = 0;
};

}  // namespace prefixgate::canon::internal
