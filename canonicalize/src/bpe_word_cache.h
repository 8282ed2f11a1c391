// The merged ids of the words a thread tokenized lately, per tokenizer, so that a word seen again
// ("the", an identifier, a JSON key: a prompt repeats its words) costs one hash lookup instead of
// a merge loop over its pairs. Hugging Face's BPE keeps such a cache for the same reason.
//
// Why it is exact: a word's ids depend only on its bytes and the model, and the model is named by
// the tokenizer's identity (a hash of its tokenizer.json, as the segment cache is keyed), not by
// an address another tokenizer could take later.
//
// Bounded: kSlots tokenizers, each at most 2 x kGenerationWords words of at most kMaxWordBytes
// bytes (about 1 MB per slot at the most). Words live in two generations, an approximation of
// LRU without a list: new words go to the young one; when it is full the old one is dropped and
// the young one takes its place; a word found in the old one is copied to the young one, so the
// words in use stay. (One generation of words up to 24 bytes, dropped whole when full, made
// Llama 2's tokenizer merge 24 % of the words of the project's documentation again, a text with
// more distinct words than the bound; this, 17 %.) Not thread-safe: one per thread
// (for_tokenizer()).
//
//   WordCache& cache = WordCache::for_tokenizer(identity);
//   if (auto ids = cache.find(word)) out.insert(out.end(), ids->begin(), ids->end());
//   else { merge(word, out); cache.add(word, {out.data() + first, out.size() - first}); }
#pragma once

#include <array>
#include <boost/unordered/unordered_flat_map.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::canon::internal {

class WordCache {
 public:
  static constexpr std::size_t kSlots = 4;
  static constexpr std::size_t kGenerationWords = 8192;
  static constexpr std::size_t kMaxWordBytes = 64;

  // This thread's cache for the tokenizer of this identity (the least recently used slot is
  // taken over by a tokenizer not among them).
  static WordCache& for_tokenizer(std::uint64_t identity);

  static bool cacheable(std::string_view word) { return word.size() <= kMaxWordBytes; }
  // The ids of `word`, valid until the next add() or find().
  std::optional<std::span<const TokenId>> find(std::string_view word);
  void add(std::string_view word, std::span<const TokenId> ids);

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const;
  };
  struct Equal {
    using is_transparent = void;
    bool operator()(std::string_view a, std::string_view b) const { return a == b; }
  };
  struct Range {
    std::uint32_t first;
    std::uint32_t count;
  };
  struct Generation {
    boost::unordered_flat_map<std::string, Range, Hash, Equal> words;
    std::vector<TokenId> ids;
    void clear() {
      words.clear();
      ids.clear();
    }
  };
  void clear();

  std::uint64_t identity_ = 0;
  std::uint64_t used_ = 0;  // for the slots' LRU; 0: never used
  Generation young_, old_;
};

}  // namespace prefixgate::canon::internal
