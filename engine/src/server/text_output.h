// Turns the token ids a request generates into the text a client sees: incremental decoding,
// UTF-8 repair, and stop strings.
//
// Each token is decoded in the context of the few before it, as Hugging Face's DecodeStream
// does: a SentencePiece token's leading "▁" is a space except at the start of the text, and a
// byte-level token can end in the middle of a UTF-8 character. Text is released to a stream only
// up to the last complete character and short of any tail that could still grow into a stop
// string, so a streamed response never shows text that the final one would not.
//
//   TextOutput out(tokenizer, {.stop = {"\n\n"}, .skip_token = eos});
//   out.append(token);
//   std::string delta = out.take_delta(/*final=*/false);
//   if (out.stopped()) abort_sequence();
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::engine::server {

// Replaces every invalid UTF-8 sequence in `text` with U+FFFD, so it can go into JSON.
std::string sanitize_utf8(std::string_view text);

// Bytes at the end of `text` that start a UTF-8 sequence not yet complete (0 to 3).
std::size_t incomplete_utf8_tail(std::string_view text);

// The ordinary tokens (ids below `limit` that are not special) whose text stands on its own:
// non-empty, whole UTF-8 characters, and no control character but newline and tab. The sim
// device draws its output from these, so a sim replica streams readable text and every token as
// soon as it is sampled: a byte token that opens a multi-byte character would be held back until
// the character completes, delaying the first chunk a client times by a decode step.
std::vector<canon::TokenId> standalone_text_tokens(const canon::Tokenizer& tokenizer,
                                                   canon::TokenId limit);

struct TextOutputOptions {
  std::vector<std::string> stop;    // stop strings (empty ones are ignored)
  bool skip_token_enabled = false;  // drop `skip_token` from the text (the EOS token)
  canon::TokenId skip_token = 0;
};

class TextOutput {
 public:
  TextOutput(const canon::Tokenizer& tokenizer, TextOutputOptions options);

  // Adds a generated token. After a stop string appears, further tokens are ignored.
  void append(canon::TokenId token);

  // True once the text contains a stop string; the text is cut before it.
  bool stopped() const { return stopped_; }
  // The stop string that ended the text ("" until one did).
  const std::string& stop_string() const { return stop_string_; }
  // Generated tokens counted so far (including the one that completed a stop string).
  std::size_t token_count() const { return token_count_; }

  // Text not yet taken. Unless `final`, holds back an incomplete character and a tail that
  // might become a stop string.
  std::string take_delta(bool final);
  // The whole text (sanitized, cut at a stop string).
  std::string text() const;

 private:
  const canon::Tokenizer& tokenizer_;
  TextOutputOptions options_;
  // The text `token` adds after the tokens already decoded (ids_ gains it).
  std::string decode_next(canon::TokenId token);

  std::vector<canon::TokenId> ids_;  // the generated tokens that are text (not special)
  std::string raw_;                  // decoded bytes, cut at a stop string once one is found
  std::size_t taken_ = 0;
  std::size_t token_count_ = 0;
  std::size_t max_stop_bytes_ = 0;
  bool stopped_ = false;
  std::string stop_string_;
};

}  // namespace prefixgate::engine::server
