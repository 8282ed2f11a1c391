#include "prefixgate/canonicalize/prompt.h"

#include <algorithm>

#include "prefixgate/base/check.h"
#include "prefixgate/canonicalize/block_hash_memo.h"
#include "prefixgate/canonicalize/prompt_memo.h"
#include "scanned_ranges.h"

namespace prefixgate::canon {
namespace {

// The thread's memo of the prompts it analyzed lately (prompt_memo.h).
PromptMemo& thread_prompt_memo() {
  thread_local PromptMemo memo;
  return memo;
}

}  // namespace

namespace internal {

std::vector<PromptMemo::ScannedRange>* scanned_ranges_of(const AnalyzedPrompt& prompt) {
  if (prompt.memo_generation == 0) return nullptr;
  return thread_prompt_memo().scanned_ranges(prompt.memo_generation, prompt.rendered.text.size());
}

ScannedRangeCounts& scanned_range_counts() {
  thread_local ScannedRangeCounts counts;
  return counts;
}

}  // namespace internal

std::size_t AnalyzedPrompt::token_at_byte(std::size_t offset) const {
  if (tokens.stretches.empty() || tokenizer == nullptr) return tokens.token_at_byte(offset);
  return tokenizer->token_at_byte(
      rendered.text, tokens.stretches, offset,
      EncodeOptions{.parse_special = true, .segment_cache = segment_cache}, stretch_scratch);
}

std::size_t AnalyzedPrompt::stable_prefix_tokens() const {
  if (rendered.volatile_tail_begin >= rendered.text.size()) return tokens.size();
  return token_at_byte(rendered.volatile_tail_begin);
}

Result<AnalyzedPrompt> analyze_prompt(const ParsedRequest& request, const PromptModel& model,
                                      const ChatRenderOptions& options) {
  AnalyzedPrompt out;
  if (Status s = analyze_prompt_into(request, model, out, options); !s) return s.error();
  return out;
}

Status analyze_prompt_into(const ParsedRequest& request, const PromptModel& model,
                           AnalyzedPrompt& out, const ChatRenderOptions& options,
                           ByteOffsets offsets, TokenIds ids) {
  PG_DCHECK(model.tokenizer != nullptr);
  // Into the prompt's own rendering: a thread's reused prompt keeps its text's room.
  if (Status s = model.chat_format.render_into(request, options, out.rendered); !s) return s;
  out.block_size = model.block_size;
  out.tokenizer = model.tokenizer;
  out.segment_cache = model.segment_cache;
  out.stretch_scratch.clear();
  out.memo_generation = 0;
  const std::uint64_t root = block_hash_root(model.model_id, request.cache_salt);
  if (model.remember_block_hashes && offsets != ByteOffsets::kKeep && !has_token_prompt(request)) {
    // Encoded and hashed from where a prompt this thread saw lately stops sharing its text: an
    // agent's next turn costs its new turn. The memo lists the stretches (kOnDemand) whether or
    // not the caller asked: they are how it resumes.
    PromptMemo& memo = thread_prompt_memo();
    memo.analyze(out.rendered.text, *model.tokenizer, model.segment_cache, model.block_size, root,
                 out.tokens, out.block_hashes, ids, out.rendered.segments);
    out.memo_generation = memo.generation();
    return {};
  }
  tokenize_request_into(request, out.rendered, *model.tokenizer, model.segment_cache, out.tokens,
                        offsets);
  if (model.remember_block_hashes) {
    thread_local BlockHashMemo memo;
    memo.hashes(out.tokens.tokens, model.block_size, root, out.block_hashes);
  } else {
    out.block_hashes = block_hashes(out.tokens.tokens, model.block_size, root);
  }
  return {};
}

std::size_t common_prefix_length(const std::vector<TokenId>& a, const std::vector<TokenId>& b) {
  const std::size_t n = std::min(a.size(), b.size());
  return static_cast<std::size_t>(
      std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), b.begin()).first -
      a.begin());
}

}  // namespace prefixgate::canon
