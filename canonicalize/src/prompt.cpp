#include "prefixgate/canonicalize/prompt.h"

#include <algorithm>

#include "prefixgate/base/check.h"
#include "prefixgate/canonicalize/block_hash_memo.h"

namespace prefixgate::canon {

std::size_t AnalyzedPrompt::token_at_byte(std::size_t offset) const {
  if (tokens.stretches.empty() || tokenizer == nullptr) return tokens.token_at_byte(offset);
  return tokenizer->token_at_byte(
      rendered.text, tokens.stretches, offset,
      EncodeOptions{.parse_special = true, .segment_cache = segment_cache}, stretch_scratch);
}

std::size_t AnalyzedPrompt::stable_prefix_tokens() const {
  if (rendered.volatile_tail_begin >= rendered.text.size()) return tokens.tokens.size();
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
                           ByteOffsets offsets) {
  PG_DCHECK(model.tokenizer != nullptr);
  auto rendered = model.chat_format.render(request, options);
  if (!rendered) return rendered.error();
  out.block_size = model.block_size;
  out.rendered = std::move(*rendered);
  out.tokenizer = model.tokenizer;
  out.segment_cache = model.segment_cache;
  out.stretch_scratch.clear();
  // The memo compares a prompt's text and stretches rather than its tokens (a quarter of the
  // bytes with the byte tokenizer): listing the stretches costs a few entries per message.
  if (model.remember_block_hashes && offsets == ByteOffsets::kSkip) {
    offsets = ByteOffsets::kOnDemand;
  }
  tokenize_request_into(request, out.rendered, *model.tokenizer, model.segment_cache, out.tokens,
                        offsets);
  const std::uint64_t root = block_hash_root(model.model_id, request.cache_salt);
  if (model.remember_block_hashes) {
    thread_local BlockHashMemo memo;
    // tokenize_request_into() encodes with parse_special on: the tokenizer's identity says all.
    memo.hashes(BlockHashMemo::EncodedText{.tokens = out.tokens.tokens,
                                           .text = out.rendered.text,
                                           .stretches = out.tokens.stretches,
                                           .tokenizer = model.tokenizer->identity()},
                model.block_size, root, out.block_hashes);
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
