// How the tokenizers encode one stretch of text between special tokens through a SegmentCache
// (segment_cache.h says why that is exact).
#pragma once

#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/segment_cache.h"
#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::canon::internal {

// Appends the tokens (and offsets, when given) of text[begin, begin + segment.size()) to `out`:
// from the cache when it holds them, else through `encode(out, offsets)`, whose result is then
// stored. `encode` must append the segment's tokens and offsets exactly as an uncached encode
// does. `scratch` collects offsets when the caller wants none. Returns the segment's cache key
// (nullopt when it was encoded without the cache).
template <class Encode>
std::optional<SegmentCache::Key> encode_segment(
    const EncodeOptions& options, std::uint64_t tokenizer_identity, std::string_view segment,
    std::size_t begin, std::vector<TokenId>& out, std::vector<std::size_t>* offsets,
    std::vector<std::size_t>& scratch, Encode&& encode) {
  SegmentCache* cache = options.segment_cache;
  if (cache == nullptr || segment.size() < cache->min_segment_bytes()) {
    encode(out, offsets);
    return std::nullopt;
  }
  const std::uint32_t flags = (options.parse_special ? SegmentCache::kParseSpecial : 0u) |
                              (begin == 0 ? SegmentCache::kTextStart : 0u);
  const SegmentCache::Key key = SegmentCache::key(tokenizer_identity, flags, segment);
  if (cache->lookup(key, segment.size(), out, offsets, begin)) return key;
  std::vector<std::size_t>& offs = offsets != nullptr ? *offsets : scratch;
  if (offsets == nullptr) scratch.clear();
  const std::size_t first_token = out.size();
  const std::size_t first_offset = offs.size();
  encode(out, &offs);
  cache->insert(key, segment.size(), std::span<const TokenId>(out).subspan(first_token),
                std::span<const std::size_t>(offs).subspan(first_offset), begin);
  if (offsets == nullptr) scratch.clear();
  return key;
}

}  // namespace prefixgate::canon::internal
