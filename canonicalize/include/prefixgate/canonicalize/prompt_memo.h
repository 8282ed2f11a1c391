// The encodings and block hashes of the prompts a thread analyzed lately, so that a prompt that
// shares a prefix with one of them (the next turn of a conversation, a retry, another question
// after the same system prompt and tools) encodes and hashes only what follows that prefix:
// the cost of a 30 KB agent turn follows its new turn, not its length.
//
// Why it is exact: the remembered prompt whose text shares the most leading bytes is found by
// comparing the texts (memcmp), never by a hash of them, except where both copied a span of
// bytes from the same address of one message text (Segment::copied_at): a text is immutable and
// the memo holds the ones its spans name, so no other text can have that address meanwhile, and
// those bytes are the same without reading them. An earlier turn of a conversation that the
// parser hands on as the same text (MessageMemo) is so passed over, not compared byte by byte. Of
// its encoding, the leading stretches that Tokenizer::resumable_stretches() allows for that many
// shared bytes are exactly the new text's first stretches, with the same tokens; encode() picks up
// after them (EncodeOptions::begin) and gives what encoding the whole text would. Block hashes
// chain over tokens only (block_hash.h), so the remembered hashes of blocks within the reused
// tokens, or within tokens that compare equal after them, are the new prompt's, under the same root
// and block size.
//
// Each remembered text also keeps what lint_prompt found scanning ranges of it for volatile
// content (ScannedRange): those within the bytes the next prompt shares are the same bytes, with
// the same spans, so its lint looks them up instead of scanning its earlier turns again (whose
// texts the scanner's own memo would compare, byte for byte, with its copies of them).
//
// Memory: kEntries prompts per memo, each kept only while its text, tokens, stretches and hashes
// come to at most kMaxEntryBytes: at most 32 MiB a thread (half as much again in capacity, with
// TokenIds::kCount, whose places grow geometrically as their conversations do), and the message
// texts its copied spans hold, no larger than the text whose bytes they are (and usually held by
// the parser's memos as well). A prompt that shares at least half of a remembered one (its
// conversation one turn longer) takes that one's place and copies only what follows the shared
// part; any other takes the least recently used place. Not thread-safe: one per thread.
//
//   thread_local canon::PromptMemo memo;
//   memo.analyze(rendered.text, *tokenizer, segment_cache, 16, root, tokenized, hashes);
//   // tokenized.tokens and .stretches as tokenizer->encode(text, ..., {.parse_special = true,
//   // .stretches = ...}) gives them; hashes == block_hashes(tokenized.tokens, 16, root)
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/render.h"
#include "prefixgate/canonicalize/tokenizer.h"
#include "prefixgate/canonicalize/volatile.h"

namespace prefixgate::canon {

class PromptMemo {
 public:
  static constexpr std::size_t kEntries = 8;
  static constexpr std::size_t kMaxEntryBytes = std::size_t{4} << 20;

  // What came from the memo rather than from encoding and hashing.
  struct Reuse {
    std::size_t tokens = 0;  // leading tokens copied from a remembered encoding
    std::size_t blocks = 0;  // leading block hashes copied
  };

  // out.tokens and out.stretches as tokenizer.encode(text, out.tokens, {.parse_special = true,
  // .segment_cache = cache, .stretches = &out.stretches}) gives them (out.byte_offsets left
  // empty: ByteOffsets::kOnDemand), and hashes = block_hashes(out.tokens, block_size, root),
  // each reusing its vector's capacity. With TokenIds::kCount, out.tokens is left empty and
  // out.size() is their number: the new tokens are encoded straight into the memo's place for
  // the prompt, and nothing the memo holds is copied out but the stretches and hashes.
  // `segments`, when given, are the rendering's segments of `text` (render.h): where both a
  // remembered prompt and this one copied a segment's bytes from the same message text (the
  // same address of a text both hold), the bytes are known to be the same without comparing
  // them, so a conversation's earlier turns are not read again to find where it changed.
  Reuse analyze(std::string_view text, const Tokenizer& tokenizer, SegmentCache* cache,
                std::size_t block_size, std::uint64_t root, TokenizedPrompt& out,
                std::vector<std::uint64_t>& hashes, TokenIds ids = TokenIds::kKeep,
                std::span<const Segment> segments = {});

  // A range of a remembered text that lint_prompt scanned for volatile content, and the spans it
  // found there (offsets within the range). Kept while the text's bytes up to `end` stay the same.
  struct ScannedRange {
    std::size_t begin = 0;
    std::size_t end = 0;
    std::vector<VolatileHit> spans;
  };
  // Ranges a text keeps at most, and spans a kept range holds at most (a range with more is
  // scanned each time): whatever the prompts, under 600 KB a text, 4.5 MB a memo.
  static constexpr std::size_t kMaxScannedRanges = 1024;
  static constexpr std::size_t kMaxScannedSpans = 16;

  // The number of the last analyze(): unique in the process (the memo's own number in its high
  // bits), never 0. AnalyzedPrompt::memo_generation holds it for lint_prompt.
  std::uint64_t generation() const { return generation_; }
  // The ranges kept with the text that analyze() number `generation` was given, sorted by begin,
  // while that call is this memo's last and the memo kept the text (of `text_size` bytes); null
  // otherwise. Ranges lint_prompt adds must lie within the text.
  std::vector<ScannedRange>* scanned_ranges(std::uint64_t generation, std::size_t text_size);

  PromptMemo();

 private:
  // Bytes [begin, end) of a remembered text, copied from `at` in the message text `from` (held,
  // so that no other text takes the address while the entry names it).
  struct CopiedSpan {
    std::size_t begin = 0;
    std::size_t end = 0;
    const char* at = nullptr;
    SharedText from;
  };
  struct Entry {
    std::uint64_t used = 0;  // clock_ at the last use; 0: empty
    std::uint64_t tokenizer = 0;
    std::uint64_t root = 0;
    std::size_t block_size = 0;
    std::string text;
    std::vector<TokenId> tokens;
    std::vector<EncodedStretch> stretches;
    std::vector<std::uint64_t> hashes;  // of tokens' whole blocks
    std::vector<ScannedRange> scanned;  // of `text`, sorted by begin
    std::vector<CopiedSpan> copied;     // of `text`, in text order
  };
  // `slot` kept the new prompt, whose first `shared` bytes are `best`'s: it becomes the last
  // analysis's place, and its scanned ranges those of `best` within the shared bytes (the others
  // scanned bytes that changed).
  void kept_text(const Entry* best, std::size_t shared, Entry& slot);
  // Where encoding `text` picks up after `best` (null: from the start), which shares its first
  // `shared` bytes: the remembered stretches and tokens kept, and the byte to resume at.
  struct ResumePoint {
    bool same_text = false;  // the remembered text itself: nothing to encode
    std::size_t stretches = 0;
    std::size_t tokens = 0;
    std::size_t byte = 0;
  };
  static ResumePoint resume_point(const Entry* best, std::size_t shared, std::string_view text,
                                  const Tokenizer& tokenizer);
  // analyze() with TokenIds::kCount, `best` sharing the first `shared` bytes of `text`.
  Reuse count_in_place(std::string_view text, const Tokenizer& tokenizer, SegmentCache* cache,
                       std::size_t block_size, std::uint64_t root, Entry* best, std::size_t shared,
                       TokenizedPrompt& out, std::vector<std::uint64_t>& hashes);
  Entry& least_recently_used();
  // Leading bytes `text` shares with `e`'s text when that is more than `beaten` (otherwise some
  // number at most `beaten`): the spans both copied from the same address are skipped, the bytes
  // between and after them compared.
  static std::size_t shared_with(std::string_view text, std::span<const Segment> segments,
                                 const Entry& e, std::size_t beaten);
  // The place the last analyze() kept its text in (if any) remembers `segments`' copied spans.
  void keep_copied(std::span<const Segment> segments);
  void remember(Entry* best, std::size_t shared_bytes, std::size_t kept_stretches,
                std::size_t kept_blocks, std::string_view text, const Tokenizer& tokenizer,
                std::uint64_t root, std::size_t block_size, const TokenizedPrompt& out,
                const std::vector<std::uint64_t>& hashes);

  std::array<Entry, kEntries> entries_;
  std::uint64_t clock_ = 0;
  std::uint64_t id_ = 0;          // this memo's number, from a process-wide count
  std::uint64_t generation_ = 0;  // (id_ << kClockBits) | clock_ of the last analyze()
  Entry* last_ = nullptr;         // where the last analyze() kept its text; null: not kept
  static constexpr unsigned kClockBits = 40;
  // count_in_place: the remembered tokens and hashes that encoding in place overwrites, kept
  // to compare the new blocks with (reused capacity).
  std::vector<TokenId> old_tokens_;
  std::vector<std::uint64_t> old_hashes_;
};

}  // namespace prefixgate::canon
