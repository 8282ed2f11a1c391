#include "prefixgate/canonicalize/prompt_memo.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "prefixgate/base/check.h"
#include "prefixgate/canonicalize/block_hash.h"
#include "shared_prefix.h"

namespace prefixgate::canon {
namespace {

// `v` resized to its first `keep` elements and `from`'s elements after them appended: what a
// remembered prompt keeps when the next one shares its first `keep`.
template <class Vec, class Span>
void keep_then_append(Vec& v, std::size_t keep, const Span& from) {
  v.resize(keep);
  v.insert(v.end(), from.begin() + static_cast<std::ptrdiff_t>(keep), from.end());
}

// A place that once held a far longer prompt gives its memory back before holding a short one.
template <class Vec>
void fit(Vec& v, std::size_t needed) {
  constexpr std::size_t kSlack = 4096;
  if (v.capacity() > 4 * needed + kSlack) Vec().swap(v);
}

// Room for `needed` elements, growing by half at least: a place that a conversation grows in
// turn after turn reallocates (and copies itself) a few times, not at every turn.
template <class Vec>
void grow_to(Vec& v, std::size_t needed) {
  if (v.capacity() < needed) v.reserve(std::max(needed, v.capacity() + v.capacity() / 2));
}

// `hashes` (the chained hashes of the first hashes.size() blocks of `tokens`) extended to every
// whole block of `tokens`.
void chain_remaining_blocks(std::span<const TokenId> tokens, std::size_t block_size,
                            std::uint64_t root, std::vector<std::uint64_t>& hashes) {
  std::uint64_t parent = hashes.empty() ? root : hashes.back();
  for (std::size_t i = hashes.size(); i < tokens.size() / block_size; ++i) {
    parent = chain_block_hash(parent, tokens.subspan(i * block_size, block_size));
    hashes.push_back(parent);
  }
}

}  // namespace

PromptMemo::PromptMemo() {
  // Numbers from 1, so that a generation is never 0 (AnalyzedPrompt's "none").
  static std::atomic<std::uint64_t> memos{0};
  id_ = memos.fetch_add(1, std::memory_order_relaxed) + 1;
}

std::vector<PromptMemo::ScannedRange>* PromptMemo::scanned_ranges(std::uint64_t generation,
                                                                  std::size_t text_size) {
  if (generation == 0 || generation != generation_ || last_ == nullptr ||
      last_->text.size() != text_size) {
    return nullptr;
  }
  return &last_->scanned;
}

void PromptMemo::kept_text(const Entry* best, std::size_t shared, Entry& slot) {
  last_ = &slot;
  const auto changed = [shared](const ScannedRange& r) { return r.end > shared; };
  if (best == &slot) {
    std::erase_if(slot.scanned, changed);
    return;
  }
  slot.scanned.clear();
  if (best == nullptr) return;
  for (const ScannedRange& r : best->scanned) {
    if (!changed(r)) slot.scanned.push_back(r);
  }
}

PromptMemo::ResumePoint PromptMemo::resume_point(const Entry* best, std::size_t shared,
                                                 std::string_view text,
                                                 const Tokenizer& tokenizer) {
  ResumePoint r;
  if (best == nullptr) return r;
  r.same_text = shared == text.size() && shared == best->text.size();
  if (r.same_text) {
    // A prompt sent again: its encoding is the remembered one, whole.
    r.stretches = best->stretches.size();
    r.tokens = best->tokens.size();
    r.byte = text.size();
    return r;
  }
  r.stretches = tokenizer.resumable_stretches(best->stretches, best->tokens, shared);
  if (r.stretches > 0) {
    const EncodedStretch& last = best->stretches[r.stretches - 1];
    r.tokens = last.token_end;
    r.byte = last.byte_end;
  }
  return r;
}

PromptMemo::Reuse PromptMemo::analyze(std::string_view text, const Tokenizer& tokenizer,
                                      SegmentCache* cache, std::size_t block_size,
                                      std::uint64_t root, TokenizedPrompt& out,
                                      std::vector<std::uint64_t>& hashes, TokenIds ids,
                                      std::span<const Segment> segments) {
  PG_DCHECK(block_size > 0);
  ++clock_;
  generation_ = (id_ << kClockBits) | (clock_ & ((std::uint64_t{1} << kClockBits) - 1));
  last_ = nullptr;  // until a place keeps the text
  const std::uint64_t identity = tokenizer.identity();
  Entry* best = nullptr;
  std::size_t shared = 0;
  for (Entry& e : entries_) {
    if (e.used == 0 || e.tokenizer != identity) continue;
    const std::size_t s = shared_with(text, segments, e, shared);
    if (s > shared) {
      best = &e;
      shared = s;
    }
  }

  out.byte_offsets.clear();
  if (ids == TokenIds::kCount && !text.empty()) {
    const Reuse reuse =
        count_in_place(text, tokenizer, cache, block_size, root, best, shared, out, hashes);
    keep_copied(segments);
    return reuse;
  }
  out.tokens.clear();
  out.counted = 0;
  out.stretches.clear();
  // At most one token per byte: one allocation, not a doubling series.
  out.tokens.reserve(text.size());
  const ResumePoint resume = resume_point(best, shared, text, tokenizer);
  const std::size_t kept_stretches = resume.stretches;
  const std::size_t kept_tokens = resume.tokens;
  if (best != nullptr) {
    out.tokens.assign(best->tokens.begin(),
                      best->tokens.begin() + static_cast<std::ptrdiff_t>(kept_tokens));
    out.stretches.assign(best->stretches.begin(),
                         best->stretches.begin() + static_cast<std::ptrdiff_t>(kept_stretches));
  }
  if (!resume.same_text) {
    tokenizer.encode(text, out.tokens,
                     EncodeOptions{.parse_special = true,
                                   .segment_cache = cache,
                                   .stretches = &out.stretches,
                                   .begin = resume.byte});
  }

  const std::size_t blocks = out.tokens.size() / block_size;
  std::size_t reused = 0;
  if (best != nullptr && best->root == root && best->block_size == block_size) {
    const std::size_t limit = std::min(blocks, best->hashes.size());
    reused = std::min(kept_tokens / block_size, limit);
    // The tokens encoded again after the kept ones (the shared text's last stretches) are often
    // still the remembered ones: compared, they cost less than hashing.
    const std::size_t block_bytes = block_size * sizeof(TokenId);
    while (reused < limit &&
           std::memcmp(out.tokens.data() + reused * block_size,
                       best->tokens.data() + reused * block_size, block_bytes) == 0) {
      ++reused;
    }
  }
  hashes.clear();
  hashes.reserve(blocks);
  if (reused > 0) {
    hashes.assign(best->hashes.begin(), best->hashes.begin() + static_cast<std::ptrdiff_t>(reused));
  }
  chain_remaining_blocks(out.tokens, block_size, root, hashes);
  remember(best, shared, kept_stretches, reused, text, tokenizer, root, block_size, out, hashes);
  keep_copied(segments);
  return Reuse{.tokens = kept_tokens, .blocks = reused};
}

std::size_t PromptMemo::shared_with(std::string_view text, std::span<const Segment> segments,
                                    const Entry& e, std::size_t beaten) {
  const std::string_view old = e.text;
  const std::size_t n = std::min(text.size(), old.size());
  if (n <= beaten || text[beaten] != old[beaten]) return 0;
  // Known to be the same up to `known`: each span both copied from one address, and the bytes
  // before it (markup between messages, and texts copied from elsewhere, such as one that
  // canonicalization rewrote) compared.
  std::size_t known = 0;
  auto remembered = e.copied.begin();
  for (const Segment& seg : segments) {
    if (seg.copied_at == nullptr) continue;
    if (seg.end > n) break;
    while (remembered != e.copied.end() && remembered->begin < seg.begin) ++remembered;
    if (remembered == e.copied.end() || remembered->begin != seg.begin ||
        remembered->end != seg.end || remembered->at != seg.copied_at) {
      continue;  // compared with what follows
    }
    if (std::memcmp(text.data() + known, old.data() + known, seg.begin - known) != 0) break;
    known = seg.end;
  }
  return known + internal::shared_prefix_beyond(text.substr(known), old.substr(known), 0);
}

void PromptMemo::keep_copied(std::span<const Segment> segments) {
  if (last_ == nullptr) return;
  // All of them, the spans of bytes the place kept too: a turn the parser did not share yet
  // when it was first remembered is another text now, the one the next request will name. A
  // span the place names already is left as it is (no text changes hands).
  std::vector<CopiedSpan>& copied = last_->copied;
  const std::size_t size = last_->text.size();
  std::size_t k = 0;
  for (const Segment& seg : segments) {
    if (seg.copied_at == nullptr || seg.end > size) continue;
    if (k < copied.size() && copied[k].begin == seg.begin && copied[k].end == seg.end &&
        copied[k].at == seg.copied_at) {
      ++k;
      continue;
    }
    CopiedSpan span{seg.begin, seg.end, seg.copied_at, seg.copied_from};
    if (k < copied.size()) {
      copied[k] = std::move(span);
    } else {
      copied.push_back(std::move(span));
    }
    ++k;
  }
  copied.resize(k);
}

PromptMemo::Entry& PromptMemo::least_recently_used() {
  return *std::min_element(entries_.begin(), entries_.end(),
                           [](const Entry& a, const Entry& b) { return a.used < b.used; });
}

// The place is the one remember() would give the prompt: `best` when the prompt shares at least
// half of it, else the least recently used one. The kept stretches and tokens stay where they
// are (or, in another place, are copied once: the shared part of another conversation), the new
// ones are encoded after them, and the blocks past the reused hashes that compare equal to the
// remembered ones (saved first, as encoding overwrites them) keep their hashes.
PromptMemo::Reuse PromptMemo::count_in_place(std::string_view text, const Tokenizer& tokenizer,
                                             SegmentCache* cache, std::size_t block_size,
                                             std::uint64_t root, Entry* best, std::size_t shared,
                                             TokenizedPrompt& out,
                                             std::vector<std::uint64_t>& hashes) {
  const ResumePoint resume = resume_point(best, shared, text, tokenizer);
  const std::size_t kept_stretches = resume.stretches;
  const std::size_t kept_tokens = resume.tokens;
  // The remembered blocks whose hashes may be the new prompt's: those under the same root and
  // block size, the first `reused` of them within the kept tokens.
  const bool same_chain = best != nullptr && best->root == root && best->block_size == block_size;
  const std::size_t old_blocks = same_chain ? best->hashes.size() : 0;
  std::size_t reused = std::min(kept_tokens / block_size, old_blocks);

  Entry* slot = best != nullptr && 2 * shared >= best->text.size() ? best : &least_recently_used();
  if (slot == best) {
    // Encoding overwrites the remembered tokens after the kept ones: those of the blocks that
    // may still compare equal, and their hashes, are set aside first.
    const std::size_t from = reused * block_size;
    const std::size_t to = std::min(best->tokens.size(), old_blocks * block_size);
    old_tokens_.assign(best->tokens.begin() + static_cast<std::ptrdiff_t>(std::min(from, to)),
                       best->tokens.begin() + static_cast<std::ptrdiff_t>(to));
    old_hashes_.assign(best->hashes.begin() + static_cast<std::ptrdiff_t>(reused),
                       best->hashes.begin() + static_cast<std::ptrdiff_t>(old_blocks));
    slot->text.resize(std::min(shared, text.size()));
    slot->text.append(text.substr(slot->text.size()));
    slot->tokens.resize(kept_tokens);
    slot->stretches.resize(kept_stretches);
    slot->hashes.resize(same_chain ? reused : 0);
  } else {
    old_tokens_.clear();
    old_hashes_.clear();
    fit(slot->text, text.size());
    fit(slot->tokens, text.size());
    slot->text.assign(text);
    slot->tokens.clear();
    slot->stretches.clear();
    slot->hashes.clear();
    if (best != nullptr) {
      slot->tokens.assign(best->tokens.begin(),
                          best->tokens.begin() + static_cast<std::ptrdiff_t>(kept_tokens));
      slot->stretches.assign(best->stretches.begin(),
                             best->stretches.begin() + static_cast<std::ptrdiff_t>(kept_stretches));
      slot->hashes.assign(best->hashes.begin(),
                          best->hashes.begin() + static_cast<std::ptrdiff_t>(reused));
    }
  }
  slot->used = clock_;
  slot->tokenizer = tokenizer.identity();
  slot->root = root;
  slot->block_size = block_size;

  if (!resume.same_text) {
    grow_to(slot->tokens, text.size());  // at most one token per byte
    tokenizer.encode(text, slot->tokens,
                     EncodeOptions{.parse_special = true,
                                   .segment_cache = cache,
                                   .stretches = &slot->stretches,
                                   .begin = resume.byte});
  }
  const std::size_t blocks = slot->tokens.size() / block_size;
  // Blocks after the reused ones that compare equal to the remembered ones (from `best`, or
  // from what was set aside when `best` is being overwritten) keep their hashes.
  const std::size_t first_compared = reused;
  const std::size_t block_bytes = block_size * sizeof(TokenId);
  while (reused < std::min(blocks, old_blocks)) {
    const TokenId* now = slot->tokens.data() + reused * block_size;
    const TokenId* then = nullptr;
    if (slot != best) {
      then = best->tokens.data() + reused * block_size;
    } else if ((reused - first_compared + 1) * block_size <= old_tokens_.size()) {
      then = old_tokens_.data() + (reused - first_compared) * block_size;
    }
    if (then == nullptr || std::memcmp(now, then, block_bytes) != 0) break;
    slot->hashes.push_back(slot == best ? old_hashes_[reused - first_compared]
                                        : best->hashes[reused]);
    ++reused;
  }
  grow_to(slot->hashes, blocks);
  chain_remaining_blocks(slot->tokens, block_size, root, slot->hashes);

  out.tokens.clear();
  out.counted = slot->tokens.size();
  out.stretches.assign(slot->stretches.begin(), slot->stretches.end());
  hashes.assign(slot->hashes.begin(), slot->hashes.end());
  const Reuse reuse{.tokens = kept_tokens, .blocks = reused};
  const std::size_t bytes = slot->text.size() + slot->tokens.size() * sizeof(TokenId) +
                            slot->stretches.size() * sizeof(EncodedStretch) +
                            slot->hashes.size() * sizeof(std::uint64_t);
  if (bytes > kMaxEntryBytes) {
    *slot = Entry{};  // not kept: its memory goes
  } else {
    kept_text(best, std::min(shared, text.size()), *slot);
  }
  return reuse;
}

void PromptMemo::remember(Entry* best, std::size_t shared_bytes, std::size_t kept_stretches,
                          std::size_t kept_blocks, std::string_view text,
                          const Tokenizer& tokenizer, std::uint64_t root, std::size_t block_size,
                          const TokenizedPrompt& out, const std::vector<std::uint64_t>& hashes) {
  const std::size_t bytes = text.size() + out.tokens.size() * sizeof(TokenId) +
                            out.stretches.size() * sizeof(EncodedStretch) +
                            hashes.size() * sizeof(std::uint64_t);
  if (text.empty() || bytes > kMaxEntryBytes) return;
  // The prompt shares most of the remembered one (the conversation grew by a turn, or its last
  // turn was sent again changed): it replaces it, so one conversation holds one place.
  // Otherwise (nothing shared, or a system prompt only) it takes the least recently used place.
  Entry* slot = best;
  const bool replacing = best != nullptr && 2 * shared_bytes >= best->text.size();
  if (!replacing) slot = &least_recently_used();
  slot->used = clock_;
  slot->tokenizer = tokenizer.identity();
  if (replacing) {
    // Only what follows the shared part is copied: an agent's turn copies its new turn, not
    // the whole conversation again.
    const std::size_t kept_tokens =
        kept_stretches > 0 ? slot->stretches[kept_stretches - 1].token_end : 0;
    keep_then_append(slot->text, std::min(shared_bytes, text.size()), text);
    keep_then_append(slot->tokens, kept_tokens, out.tokens);
    keep_then_append(slot->stretches, kept_stretches, out.stretches);
    keep_then_append(slot->hashes, kept_blocks, hashes);
  } else {
    fit(slot->text, text.size());
    fit(slot->tokens, out.tokens.size());
    fit(slot->stretches, out.stretches.size());
    fit(slot->hashes, hashes.size());
    slot->text.assign(text);
    slot->tokens.assign(out.tokens.begin(), out.tokens.end());
    slot->stretches.assign(out.stretches.begin(), out.stretches.end());
    slot->hashes.assign(hashes.begin(), hashes.end());
  }
  slot->root = root;
  slot->block_size = block_size;
  kept_text(best, std::min(shared_bytes, text.size()), *slot);
}

}  // namespace prefixgate::canon
