#include "bpe_model.h"

#include <algorithm>
#include <climits>
#include <cstdio>

#include "prefixgate/base/check.h"

namespace prefixgate::canon::internal {
namespace {

// Heap order: lowest rank first, then leftmost, as both Hugging Face tokenizers and
// transformers.js break ties. std::*_heap keep the "largest" on top, hence the inversion.
bool later_merge(const BpeScratch::Candidate& a, const BpeScratch::Candidate& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
}

constexpr TokenId kMerged = ~TokenId{0};  // a symbol absorbed by its left neighbour
constexpr std::size_t kShortWord = 16;    // bytes; longer words take the heap
constexpr std::uint32_t kNoMerge = ~std::uint32_t{0};

}  // namespace

Result<BpeModel> BpeModel::create(BpeModelSpec spec) {
  BpeModel m;
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
  std::vector<bool> reachable(spec.byte_level.size());
  for (std::size_t i = 0; i < reachable.size(); ++i) {
    reachable[i] = spec.byte_level[i] && m.present_[i];
  }
  m.lookup_.build(m.tokens_, reachable);

  for (int b = 0; b < 256; ++b) {
    const char byte = static_cast<char>(b);
    const auto id = m.lookup_.find(std::string_view(&byte, 1));
    if (!id) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned>(b));
      return make_error(ErrorCode::kInvalidValue,
                        std::string("byte-level BPE vocabulary has no token for byte ") + hex,
                        "model.vocab");
    }
    m.byte_ids_[static_cast<std::size_t>(b)] = *id;
  }

  m.merges_.reserve(spec.merges.size());
  for (std::size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const BpeMergeSpec& s = spec.merges[rank];
    m.merges_.insert(s.left, s.right, Merge{static_cast<std::uint32_t>(rank), s.merged});
  }
  m.ignore_merges_ = spec.ignore_merges;
  return m;
}

void BpeModel::encode_word(std::string_view word, std::vector<TokenId>& out,
                           BpeScratch& scratch) const {
  PG_DCHECK(!word.empty());
  if (word.size() == 1) {
    out.push_back(byte_ids_[static_cast<unsigned char>(word[0])]);
    return;
  }
  if (ignore_merges_) {
    if (const auto id = lookup_.find(word)) {
      out.push_back(*id);
      return;
    }
  }
  if (word.size() <= kShortWord) {
    merge_short(word, out);
  } else {
    merge(word, out, scratch);
  }
}

// Most pre-tokens are a few bytes long. For them a scan for the lowest-ranked pair over plain
// arrays beats the heap: same order of merges (lowest rank, then leftmost), no allocation.
void BpeModel::merge_short(std::string_view word, std::vector<TokenId>& out) const {
  TokenId ids[kShortWord];
  Merge pairs[kShortWord];  // pairs[i]: the merge of ids[i] and ids[i + 1], rank kNoMerge if none
  std::size_t n = word.size();
  for (std::size_t i = 0; i < n; ++i) ids[i] = byte_ids_[static_cast<unsigned char>(word[i])];
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
    // Close the gap left by ids[best + 1]; pairs[] has one entry fewer than ids[].
    for (std::size_t i = best + 1; i + 1 < n; ++i) ids[i] = ids[i + 1];
    for (std::size_t i = best + 1; i + 2 < n; ++i) pairs[i] = pairs[i + 1];
    --n;
    if (best + 1 < n) lookup(best);
    if (best > 0) lookup(best - 1);
  }
  out.insert(out.end(), ids, ids + n);
}

void BpeModel::merge(std::string_view word, std::vector<TokenId>& out, BpeScratch& scratch) const {
  auto& symbols = scratch.symbols;
  auto& heap = scratch.heap;
  PG_DCHECK(word.size() < std::size_t{INT32_MAX});
  const auto n = static_cast<std::int32_t>(word.size());
  symbols.resize(word.size());
  heap.clear();
  for (std::int32_t i = 0; i < n; ++i) {
    symbols[i] = {byte_ids_[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1};
  }
  auto queue = [&](std::int32_t pos) {
    const TokenId left = symbols[pos].id;
    const TokenId right = symbols[symbols[pos].next].id;
    if (const Merge* m = merges_.find(left, right)) {
      heap.push_back({m->rank, static_cast<std::uint32_t>(pos), left, right, m->merged});
      std::push_heap(heap.begin(), heap.end(), later_merge);
    }
  };
  for (std::int32_t i = 0; i + 1 < n; ++i) queue(i);

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
    s.next = absorbed.next;
    absorbed.id = kMerged;
    if (s.next >= 0) symbols[s.next].prev = static_cast<std::int32_t>(c.pos);
    if (s.prev >= 0) queue(s.prev);
    if (s.next >= 0) queue(static_cast<std::int32_t>(c.pos));
  }
  for (std::int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace prefixgate::canon::internal
