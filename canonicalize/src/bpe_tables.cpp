#include "bpe_tables.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>

#include "prefixgate/base/check.h"

namespace prefixgate::canon::internal {

void TokenLookup::build(const std::vector<std::string_view>& tokens,
                        const std::vector<bool>& include) {
  PG_DCHECK(tokens.size() == include.size());
  tokens_ = tokens.data();
  std::size_t count = 0;
  for (bool b : include) count += b;
  // At most half full, so probes stay short.
  const std::size_t capacity = std::bit_ceil(std::max<std::size_t>(16, 2 * count));
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    if (!include[id]) continue;
    const std::uint64_t h = XXH3_64bits(tokens[id].data(), tokens[id].size());
    const auto high = static_cast<std::uint32_t>(h >> 32);
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.id_plus_one == 0 || (s.hash_high == high && tokens[s.id_plus_one - 1] == tokens[id])) {
        s.id_plus_one = static_cast<std::uint32_t>(id + 1);
        s.hash_high = high;
        break;
      }
    }
  }
}

std::optional<TokenId> TokenLookup::find(std::string_view bytes) const {
  if (slots_.empty()) return std::nullopt;
  const std::uint64_t h = XXH3_64bits(bytes.data(), bytes.size());
  const auto high = static_cast<std::uint32_t>(h >> 32);
  for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.id_plus_one == 0) return std::nullopt;
    if (s.hash_high == high && tokens_[s.id_plus_one - 1] == bytes) return s.id_plus_one - 1;
  }
}

void MergeTable::reserve(std::size_t merges) {
  while (slots_.size() < 2 * merges) grow();
}

void MergeTable::insert(TokenId left, TokenId right, Merge merge) {
  if (2 * (size_ + 1) > slots_.size()) grow();
  const std::uint64_t key = pack(left, right);
  for (std::size_t i = slot_of(key);; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.key == key) {
      s.merge = merge;
      return;
    }
    if (s.key == kEmpty) {
      s.key = key;
      s.merge = merge;
      ++size_;
      return;
    }
  }
}

void MergeTable::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.size() * 2, Slot{});
  mask_ = slots_.size() - 1;
  --shift_;
  for (const Slot& s : old) {
    if (s.key == kEmpty) continue;
    for (std::size_t i = slot_of(s.key);; i = (i + 1) & mask_) {
      if (slots_[i].key == kEmpty) {
        slots_[i] = s;
        break;
      }
    }
  }
}

}  // namespace prefixgate::canon::internal
