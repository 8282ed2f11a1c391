// Chat templates: a chat request rendered into the prompt text an engine sees, and tokenized.
//
// Built-in templates (no Jinja at run time; each is the fixed rendering of a model family; to
// render the Jinja template a model ships, byte for byte as its engine does, see
// chat_template.h):
//   llama-3 - <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>
//             ... ending with the assistant header (the generation prompt). Content is trimmed of
//             leading/trailing whitespace as Meta's template does. Tools are listed in the system
//             turn, one JSON object per line; tool results use the `ipython` role.
//   chatml  - <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n (Qwen);
//             tools inside <tools></tools> in the system turn, one JSON object per line.
//   plain   - "{role}: {content}\n\n" ... "assistant:" for models without special tokens.
// Tools and tool calls are serialized with json::to_json, in the order the client sent their
// keys: exactly as HF templates' `tojson` does, which is why key order breaks prefixes.
//
// The rendered prompt carries a map of which byte ranges came from which field, so a linter can
// say "messages[0].content" and skip the last user turn.
//
//   auto tmpl = canon::chat_template_from_name("llama-3");
//   canon::RenderedPrompt p = canon::render_prompt(request, *tmpl);
//   canon::TokenizedPrompt t = canon::tokenize_prompt(p, *tokenizer);
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/base/status.h"
#include "prefixgate/canonicalize/request.h"
#include "prefixgate/canonicalize/shared_text.h"
#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::canon {

enum class ChatTemplate { kLlama3, kChatml, kPlain };

// "llama-3" (also "llama3"), "chatml" (also "qwen"), "plain". kNotFound names the choices.
Result<ChatTemplate> chat_template_from_name(std::string_view name);
const char* chat_template_name(ChatTemplate tmpl);

// A byte range of the rendered text and where it came from.
struct Segment {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::string source;      // "messages[2].content", "tools[0]", "prompt", "template"
  int message_index = -1;  // the message it belongs to, -1 for tools and template markup
  // When all of the segment's bytes were copied from one message text: that text, held, and the
  // address its bytes were copied from. Two segments whose bytes come from the same address of
  // a text both hold, with the same length, are the same bytes (the texts are immutable, and
  // two live texts never share an address): PromptMemo compares them so, not byte by byte.
  SharedText copied_from = {};
  const char* copied_at = nullptr;
};

struct RenderedPrompt {
  std::string text;
  std::vector<Segment> segments;  // in text order, covering all of `text`
  // Start of the content of the final user message: everything from here on is the part of the
  // prompt that is expected to change from one request to the next. text.size() when the
  // request has no user message (or is a completion).
  std::size_t volatile_tail_begin = 0;

  // The segment holding byte `offset`, or nullptr past the end.
  const Segment* segment_at(std::size_t offset) const;
};

// Renders a chat request through `tmpl`, or a completion request's first prompt as-is.
RenderedPrompt render_prompt(const ParsedRequest& request, ChatTemplate tmpl);
// The same into `out`, whose text and segments keep their room (a thread's prompt, reused).
void render_prompt_into(const ParsedRequest& request, ChatTemplate tmpl, RenderedPrompt& out);

// What a tokenization records besides the tokens, for finding the token of a byte later:
//   kKeep      each token's byte offset (TokenizedPrompt::byte_offsets);
//   kOnDemand  only where each stretch between added tokens starts (TokenizedPrompt::stretches,
//              a few per message): a byte's token is then found by re-encoding the one stretch
//              it lies in (Tokenizer::token_at_byte), which costs less than an offset per token
//              whenever few bytes are asked about;
//   kSkip      nothing: for a caller that only routes on the hashes.
enum class ByteOffsets { kKeep, kOnDemand, kSkip };

// Whether a tokenization hands back the token ids or only how many there are:
//   kKeep   TokenizedPrompt::tokens holds them;
//   kCount  through a PromptMemo (PromptModel::remember_block_hashes), tokens may be left empty
//           and TokenizedPrompt::size() says how many: for a caller that routes on the block
//           hashes and asks only where a byte's token is (from the stretches). A growing
//           conversation's tokens then stay in the memo instead of being copied out on every
//           turn (120 KB for a 30 KB prompt with the byte tokenizer).
enum class TokenIds { kKeep, kCount };

struct TokenizedPrompt {
  std::vector<TokenId> tokens;  // may be empty when tokenized with TokenIds::kCount
  // How many tokens there are when `tokens` was left empty (TokenIds::kCount); 0 otherwise.
  std::size_t counted = 0;
  // Start of each token in the rendered text; empty unless tokenized with ByteOffsets::kKeep.
  std::vector<std::size_t> byte_offsets;
  // The encoding's stretches; empty unless tokenized with ByteOffsets::kOnDemand.
  std::vector<EncodedStretch> stretches;

  // How many tokens the prompt has, whether or not their ids were kept.
  std::size_t size() const { return tokens.empty() ? counted : tokens.size(); }

  // Index of the token containing byte `offset` (the last token for offsets past the end).
  // Needs the byte offsets: it is a programming error to ask without them.
  std::size_t token_at_byte(std::size_t offset) const;
};

// Whether the request is a completion whose prompt came as token ids (which it is tokenized as).
inline bool has_token_prompt(const ParsedRequest& request) {
  return request.endpoint == Endpoint::kCompletions && !request.prompts.empty() &&
         request.prompts[0].is_tokens;
}

// Tokenizes the rendered text with special-token parsing on, as engines tokenize a rendered
// chat template, through `cache` when given (the same result, segment_cache.h). A completion
// prompt given as token ids is returned as those ids.
TokenizedPrompt tokenize_prompt(const RenderedPrompt& prompt, const Tokenizer& tokenizer,
                                SegmentCache* cache = nullptr);
TokenizedPrompt tokenize_request(const ParsedRequest& request, const RenderedPrompt& prompt,
                                 const Tokenizer& tokenizer, SegmentCache* cache = nullptr);
// tokenize_request() into `out`, replacing its contents but keeping its vectors' capacity,
// recording what `offsets` asks for (a completion prompt given as token ids gets byte offsets,
// all 0, unless kSkip).
void tokenize_request_into(const ParsedRequest& request, const RenderedPrompt& prompt,
                           const Tokenizer& tokenizer, SegmentCache* cache, TokenizedPrompt& out,
                           ByteOffsets offsets = ByteOffsets::kKeep);

}  // namespace prefixgate::canon
