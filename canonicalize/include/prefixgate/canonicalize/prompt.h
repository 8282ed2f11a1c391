// A request as a prefix cache sees it: rendered, tokenized and hashed into prefix blocks.
//
// This is the one place that turns a ParsedRequest into the token stream an engine will see,
// so the gateway (routing), the engine (cache keys), prefixlint and the benchmark agree.
//
//   canon::PromptModel model{canon::ChatTemplate::kLlama3, tokenizer.get(), 16, "builtin:tiny"};
//   auto p = canon::analyze_prompt(request, model);  // fails only where the template raises
//   p->block_hashes;            // chained XXH3 block hashes, salted by request.cache_salt
//   p->stable_prefix_tokens();  // tokens before the final user turn
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "prefixgate/base/status.h"
#include "prefixgate/canonicalize/block_hash.h"
#include "prefixgate/canonicalize/chat_format.h"
#include "prefixgate/canonicalize/render.h"

namespace prefixgate::canon {

// How a model turns requests into tokens. `tokenizer` is borrowed and must outlive its use.
struct PromptModel {
  ChatFormat chat_format;  // built-in llama-3 unless the model brings its own template
  const Tokenizer* tokenizer = nullptr;
  std::size_t block_size = kDefaultBlockSize;
  std::string model_id = "builtin:tiny";  // seeds the block-hash root
  // Tokenization goes through this cache when set (the same tokens: segment_cache.h).
  // Borrowed, may be shared by many models and threads.
  SegmentCache* segment_cache = nullptr;
  // Block hashes go through the calling thread's BlockHashMemo (block_hash_memo.h: the same
  // hashes), so a prompt that shares a prefix with one the thread hashed lately hashes only the
  // rest.
  bool remember_block_hashes = false;
};

struct AnalyzedPrompt {
  RenderedPrompt rendered;
  TokenizedPrompt tokens;
  std::vector<std::uint64_t> block_hashes;
  std::size_t block_size = kDefaultBlockSize;
  // The tokenizer and cache it was tokenized with (borrowed from the PromptModel): what
  // token_at_byte re-encodes a stretch with when tokens.stretches stand in for the offsets.
  const Tokenizer* tokenizer = nullptr;
  SegmentCache* segment_cache = nullptr;
  // The thread's PromptMemo analysis that encoded it (PromptMemo::generation(); 0: none): while
  // it is that memo's last, lint_prompt on the same thread looks up the volatile-content scans
  // kept with the text instead of scanning again (so a prompt's text must not be changed between
  // its analysis and its lint).
  std::uint64_t memo_generation = 0;

  // The stretch token_at_byte encoded last, kept for the next question about it.
  mutable Tokenizer::StretchScratch stretch_scratch;

  // Index of the token containing byte `offset` of rendered.text, from tokens.byte_offsets or,
  // analyzed with ByteOffsets::kOnDemand, from tokens.stretches. Not for concurrent use on one
  // prompt (stretch_scratch).
  std::size_t token_at_byte(std::size_t offset) const;
  // Tokens before the volatile tail (the last user turn's content).
  std::size_t stable_prefix_tokens() const;
};

// Renders (ChatFormat::render: its errors), tokenizes and hashes `request`.
Result<AnalyzedPrompt> analyze_prompt(const ParsedRequest& request, const PromptModel& model,
                                      const ChatRenderOptions& options = {});

// What analyze_prompt_into records for token_at_byte, stable_prefix_tokens and lint
// (ByteOffsets, render.h). A caller that only routes on the hashes skips it; one that asks
// about a few bytes (a gateway linting each request) takes kOnDemand: on a 32 KB prompt
// the offsets are 8 bytes written per token, more than the tokens.
// The same into `out`, reusing the capacity of its token and offset vectors: a caller that
// analyzes one request after another on a thread keeps one AnalyzedPrompt and allocates them
// once. On an error `out` is left unspecified.
// `ids`: TokenIds::kCount lets the tokens' ids be left out (render.h); read the count with
// tokens.size().
Status analyze_prompt_into(const ParsedRequest& request, const PromptModel& model,
                           AnalyzedPrompt& out, const ChatRenderOptions& options = {},
                           ByteOffsets offsets = ByteOffsets::kKeep,
                           TokenIds ids = TokenIds::kKeep);

// Tokens two token streams share from the start.
std::size_t common_prefix_length(const std::vector<TokenId>& a, const std::vector<TokenId>& b);

}  // namespace prefixgate::canon
