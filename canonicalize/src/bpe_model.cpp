#include "bpe_model.h"

#include <algorithm>
#include <climits>
#include <cstdio>

#include "bpe_word_cache.h"
#include "prefixgate/base/check.h"
#include "utf8_decode.h"

namespace prefixgate::canon::internal {
namespace {

// Heap order: lowest rank first, then leftmost, as both Hugging Face tokenizers and
// transformers.js break ties. std::*_heap keep the "largest" on top, hence the inversion.
bool later_merge(const BpeScratch::Candidate& a, const BpeScratch::Candidate& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
}

// Appends the ids of `piece`: from the thread's word cache, or by `encode` (which appends them)
// and then kept there. Without a cache, with `lengths` asked for (the cache keeps ids only) or for
// a piece too long to keep, `encode` alone. The cache holds whole words for byte-level models and
// the parts of a cut word for kChars ones, never both, so a key always means the same thing.
template <class Encode>
void through_cache(WordCache* cache, std::string_view piece, std::vector<TokenId>& out,
                   const std::vector<std::uint32_t>* lengths, Encode encode) {
  if (cache == nullptr || lengths != nullptr || !WordCache::cacheable(piece)) {
    encode();
    return;
  }
  if (const auto ids = cache->find(piece)) {
    out.insert(out.end(), ids->begin(), ids->end());
    return;
  }
  const std::size_t first = out.size();
  encode();
  cache->add(piece, std::span<const TokenId>(out).subspan(first));
}

constexpr TokenId kMerged = ~TokenId{0};   // a symbol absorbed by its left neighbour
constexpr TokenId kNoToken = ~TokenId{0};  // byte_ids_/fallback_ids_: none
constexpr std::size_t kShortWord = 16;     // symbols; longer words take the heap
constexpr std::uint32_t kNoMerge = ~std::uint32_t{0};

std::string byte_token_text(int b) {
  char text[8];
  std::snprintf(text, sizeof text, "<0x%02X>", static_cast<unsigned>(b));
  return text;
}

}  // namespace

Result<BpeModel> BpeModel::create(BpeModelSpec spec) {
  BpeModel m;
  m.alphabet_ = spec.alphabet;
  std::size_t total = 0;
  for (const std::string& t : spec.tokens) total += t.size();
  m.arena_.reserve(total);
  for (const std::string& t : spec.tokens) m.arena_.insert(m.arena_.end(), t.begin(), t.end());
  m.tokens_.reserve(spec.tokens.size());
  std::size_t offset = 0;
  for (const std::string& t : spec.tokens) {
    m.tokens_.emplace_back(m.arena_.data() + offset, t.size());
    offset += t.size();
  }
  m.present_ = std::move(spec.present);
  std::vector<bool> reachable(m.present_.size());
  for (std::size_t i = 0; i < reachable.size(); ++i) {
    reachable[i] = m.present_[i] && (spec.alphabet == BpeAlphabet::kChars || spec.byte_level[i]);
  }
  m.lookup_.build(m.tokens_, reachable);

  m.byte_ids_.fill(kNoToken);
  m.fallback_ids_.fill(kNoToken);
  for (int b = 0; b < 256; ++b) {
    const char byte = static_cast<char>(b);
    const auto id = m.lookup_.find(std::string_view(&byte, 1));
    if (spec.alphabet == BpeAlphabet::kBytes) {
      if (!id) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned>(b));
        return make_error(ErrorCode::kInvalidValue,
                          std::string("byte-level BPE vocabulary has no token for byte ") + hex,
                          "model.vocab");
      }
      m.byte_ids_[static_cast<std::size_t>(b)] = *id;
    } else {
      if (b < 0x80 && id) m.byte_ids_[static_cast<std::size_t>(b)] = *id;
      if (const auto fb = m.lookup_.find(byte_token_text(b))) {
        m.fallback_ids_[static_cast<std::size_t>(b)] = *fb;
      }
    }
  }

  m.merges_.reserve(spec.merges.size());
  for (std::size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const BpeMergeSpec& s = spec.merges[rank];
    m.merges_.insert(s.left, s.right, Merge{static_cast<std::uint32_t>(rank), s.merged});
  }
  if (spec.alphabet == BpeAlphabet::kChars) {
    // The characters that some token has right before the SentencePiece space marker "▁".
    constexpr std::string_view kMarker = "\u2581";
    if (m.lookup_.find(kMarker)) {
      m.space_marker_ = std::string(kMarker);
      for (std::size_t id = 0; id < m.tokens_.size(); ++id) {
        const std::string_view t = m.tokens_[id];
        for (std::size_t pos = t.find(kMarker, 1); pos != std::string_view::npos;
             pos = t.find(kMarker, pos + 1)) {
          std::size_t start = pos - 1;
          while (start > 0 && (static_cast<unsigned char>(t[start]) & 0xC0) == 0x80) --start;
          const std::string before(t.substr(start, pos - start));
          if (before != kMarker && std::find(m.joins_marker_.begin(), m.joins_marker_.end(),
                                             before) == m.joins_marker_.end()) {
            m.joins_marker_.push_back(before);
          }
        }
      }
    }
  }
  m.ignore_merges_ = spec.ignore_merges;
  m.byte_fallback_ = spec.byte_fallback;
  m.unknown_ = spec.unknown;
  m.fuse_unknown_ = spec.fuse_unknown;
  return m;
}

void BpeModel::encode_word(std::string_view word, std::vector<TokenId>& out, BpeScratch& scratch,
                           std::vector<std::uint32_t>* lengths) const {
  PG_DCHECK(!word.empty());
  if (alphabet_ == BpeAlphabet::kBytes && word.size() == 1) {
    out.push_back(byte_ids_[static_cast<unsigned char>(word[0])]);
    if (lengths) lengths->push_back(1);
    return;
  }
  if (ignore_merges_) {
    if (const auto id = lookup_.find(word)) {
      out.push_back(*id);
      if (lengths) lengths->push_back(static_cast<std::uint32_t>(word.size()));
      return;
    }
  }
  if (alphabet_ == BpeAlphabet::kChars) {
    // A long word (SentencePiece-style tokenizers often have no pre-tokenizer: the whole text is
    // one word) is cut where no token can span the cut, and the parts merged one by one, which
    // gives the same tokens: merges are local.
    std::size_t begin = 0;
    if (word.size() > kShortWord && !space_marker_.empty()) {
      for (std::size_t pos = word.find(space_marker_, 1); pos != std::string_view::npos;
           pos = word.find(space_marker_, pos + 1)) {
        if (!can_cut_before_marker(word, pos)) continue;
        const std::string_view part = word.substr(begin, pos - begin);
        through_cache(scratch.words, part, out, lengths,
                      [&] { encode_chars(part, out, scratch, lengths); });
        begin = pos;
      }
    }
    const std::string_view last = word.substr(begin);
    through_cache(scratch.words, last, out, lengths,
                  [&] { encode_chars(last, out, scratch, lengths); });
    return;
  }
  through_cache(scratch.words, word, out, lengths,
                [&] { encode_bytes_word(word, out, scratch, lengths); });
}

void BpeModel::encode_bytes_word(std::string_view word, std::vector<TokenId>& out,
                                 BpeScratch& scratch, std::vector<std::uint32_t>* lengths) const {
  if (word.size() <= kShortWord) {
    if (lengths) {
      merge_short<true>(word, out, lengths);
    } else {
      merge_short<false>(word, out, nullptr);
    }
    return;
  }
  auto& symbols = scratch.symbols;
  PG_DCHECK(word.size() < std::size_t{INT32_MAX});
  const auto n = static_cast<std::int32_t>(word.size());
  symbols.resize(word.size());
  for (std::int32_t i = 0; i < n; ++i) {
    symbols[i] = {byte_ids_[static_cast<unsigned char>(word[i])], 1, i - 1, i + 1 < n ? i + 1 : -1};
  }
  merge(out, scratch, lengths);
}

void BpeModel::encode_chars(std::string_view word, std::vector<TokenId>& out, BpeScratch& scratch,
                            std::vector<std::uint32_t>* lengths) const {
  char_symbols(word, scratch);
  if (!scratch.symbols.empty()) merge(out, scratch, lengths);
}

bool BpeModel::can_cut_before_marker(std::string_view word, std::size_t pos) const {
  // The code point before the marker: a token holding it followed by the marker could span the
  // cut (so could a run of markers).
  std::size_t start = pos - 1;
  while (start > 0 && pos - start < 4 && (static_cast<unsigned char>(word[start]) & 0xC0) == 0x80) {
    --start;
  }
  const std::string_view before = word.substr(start, pos - start);
  if (before.size() != decode_utf8(word, start).bytes) return false;  // malformed: be safe
  if (word.substr(start).starts_with(space_marker_)) return false;
  return std::find(joins_marker_.begin(), joins_marker_.end(), before) == joins_marker_.end();
}

void BpeModel::char_symbols(std::string_view word, BpeScratch& scratch) const {
  auto& symbols = scratch.symbols;
  symbols.clear();
  auto add = [&](TokenId id, std::uint32_t bytes) {
    const auto i = static_cast<std::int32_t>(symbols.size());
    symbols.push_back({id, bytes, i - 1, -1});
    if (i > 0) symbols[static_cast<std::size_t>(i) - 1].next = i;
  };
  // An unknown character waits here: consecutive ones fuse (fuse_unk), and, as in Hugging
  // Face's BPE::merge_word, it is emitted only before the next character found in the
  // vocabulary or at the end of the word (byte-fallback tokens do not flush it).
  std::uint32_t pending_unknown = 0;  // bytes of the waiting unknown token; 0: none
  for (std::size_t pos = 0; pos < word.size();) {
    const auto b0 = static_cast<unsigned char>(word[pos]);
    const std::uint32_t bytes = b0 < 0x80 ? 1 : decode_utf8(word, pos).bytes;
    const std::string_view ch = word.substr(pos, bytes);
    pos += bytes;
    std::optional<TokenId> id;
    if (b0 < 0x80) {
      if (byte_ids_[b0] != kNoToken) id = byte_ids_[b0];
    } else {
      id = lookup_.find(ch);
    }
    if (id) {
      if (pending_unknown > 0) {
        add(*unknown_, pending_unknown);
        pending_unknown = 0;
      }
      add(*id, bytes);
      continue;
    }
    if (byte_fallback_ && std::all_of(ch.begin(), ch.end(), [&](char c) {
          return fallback_ids_[static_cast<unsigned char>(c)] != kNoToken;
        })) {
      for (char c : ch) add(fallback_ids_[static_cast<unsigned char>(c)], 1);
      continue;
    }
    if (!unknown_) continue;  // no unknown token: the character is dropped, as in Hugging Face
    if (pending_unknown > 0 && !fuse_unknown_) add(*unknown_, pending_unknown);
    pending_unknown = (pending_unknown > 0 && fuse_unknown_ ? pending_unknown : 0) + bytes;
  }
  if (pending_unknown > 0) add(*unknown_, pending_unknown);
}

// Most byte-level pre-tokens are a few bytes long. For them a scan for the lowest-ranked pair
// over plain arrays beats the heap: same order of merges (lowest rank, then leftmost), no
// allocation.
template <bool kLengths>
void BpeModel::merge_short(std::string_view word, std::vector<TokenId>& out,
                           std::vector<std::uint32_t>* lengths) const {
  TokenId ids[kShortWord];
  std::uint32_t bytes[kShortWord];
  Merge pairs[kShortWord];  // pairs[i]: the merge of ids[i] and ids[i + 1], rank kNoMerge if none
  std::size_t n = word.size();
  for (std::size_t i = 0; i < n; ++i) {
    ids[i] = byte_ids_[static_cast<unsigned char>(word[i])];
    if constexpr (kLengths) bytes[i] = 1;
  }
  auto lookup = [&](std::size_t i) {
    const Merge* m = merges_.find(ids[i], ids[i + 1]);
    pairs[i] = m ? *m : Merge{kNoMerge, 0};
  };
  for (std::size_t i = 0; i + 1 < n; ++i) lookup(i);
  while (n > 1) {
    std::size_t best = 0;
    for (std::size_t i = 1; i + 1 < n; ++i) {
      if (pairs[i].rank < pairs[best].rank) best = i;
    }
    if (pairs[best].rank == kNoMerge) break;
    ids[best] = pairs[best].merged;
    if constexpr (kLengths) bytes[best] += bytes[best + 1];
    // Close the gap left by ids[best + 1]; pairs[] has one entry fewer than ids[].
    for (std::size_t i = best + 1; i + 1 < n; ++i) {
      ids[i] = ids[i + 1];
      if constexpr (kLengths) bytes[i] = bytes[i + 1];
    }
    for (std::size_t i = best + 1; i + 2 < n; ++i) pairs[i] = pairs[i + 1];
    --n;
    if (best + 1 < n) lookup(best);
    if (best > 0) lookup(best - 1);
  }
  out.insert(out.end(), ids, ids + n);
  if constexpr (kLengths) lengths->insert(lengths->end(), bytes, bytes + n);
}

void BpeModel::merge(std::vector<TokenId>& out, BpeScratch& scratch,
                     std::vector<std::uint32_t>* lengths) const {
  auto& symbols = scratch.symbols;
  auto& heap = scratch.heap;
  heap.clear();
  auto queue = [&](std::int32_t pos) {
    const TokenId left = symbols[pos].id;
    const TokenId right = symbols[symbols[pos].next].id;
    if (const Merge* m = merges_.find(left, right)) {
      heap.push_back({m->rank, static_cast<std::uint32_t>(pos), left, right, m->merged});
      std::push_heap(heap.begin(), heap.end(), later_merge);
    }
  };
  for (std::int32_t i = 0; symbols[i].next >= 0; i = symbols[i].next) queue(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later_merge);
    const BpeScratch::Candidate c = heap.back();
    heap.pop_back();
    BpeScratch::Symbol& s = symbols[c.pos];
    // A queued pair is stale once either side has merged with something else. A symbol's id
    // only ever grows into a longer token, so equal ids mean the very same pair.
    if (s.id != c.left || s.next < 0 || symbols[s.next].id != c.right) continue;
    BpeScratch::Symbol& absorbed = symbols[s.next];
    s.id = c.merged;
    s.bytes += absorbed.bytes;
    s.next = absorbed.next;
    absorbed.id = kMerged;
    if (s.next >= 0) symbols[s.next].prev = static_cast<std::int32_t>(c.pos);
    if (s.prev >= 0) queue(s.prev);
    if (s.next >= 0) queue(static_cast<std::int32_t>(c.pos));
  }
  for (std::int32_t i = 0; i >= 0; i = symbols[i].next) {
    out.push_back(symbols[i].id);
    if (lengths) lengths->push_back(symbols[i].bytes);
  }
}

}  // namespace prefixgate::canon::internal
