// A byte's token found from the stretches encode() lists (Tokenizer::token_at_byte,
// ByteOffsets::kOnDemand) is the one found from every token's byte offset, at every byte of
// random texts cut by special tokens, for the byte tokenizer and real tokenizer.json files of
// every kind we load (byte-level BPE; SentencePiece-style with Metaspace or a Prepend
// normalizer), with and without special parsing and a segment cache; and through
// AnalyzedPrompt, for lint's findings and the stable prefix. The real tokenizers are read from
// tests/js/node_modules (scripts/install-js-deps.sh); those cases skip without them.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/lint.h"
#include "prefixgate/canonicalize/prompt.h"
#include "prefixgate/canonicalize/request.h"
#include "prefixgate/canonicalize/tokenizer.h"
#include "random_tokenizer_text.h"

namespace prefixgate::canon {
namespace {

// Every byte of `text` (and two past its end): the stretches' answer is the offsets' answer.
void expect_same_tokens_at_bytes(const Tokenizer& tok, const std::string& text,
                                 const EncodeOptions& options, const std::string& what) {
  TokenizedPrompt eager;
  tok.encode(text, eager.tokens, options, &eager.byte_offsets);
  std::vector<TokenId> tokens;
  std::vector<EncodedStretch> stretches;
  EncodeOptions listing = options;
  listing.stretches = &stretches;
  tok.encode(text, tokens, listing);
  ASSERT_EQ(tokens, eager.tokens) << what << ": listing the stretches changed the tokens";
  // The stretches cover the tokens, in order, without gaps.
  std::size_t next = 0;
  for (const EncodedStretch& s : stretches) {
    ASSERT_EQ(s.token_begin, next) << what;
    ASSERT_LE(s.byte_begin, s.byte_end) << what;
    next = s.token_end;
  }
  ASSERT_EQ(next, tokens.size()) << what;
  Tokenizer::StretchScratch scratch;
  for (std::size_t b = 0; b < text.size() + 2; ++b) {
    ASSERT_EQ(tok.token_at_byte(text, stretches, b, options, scratch), eager.token_at_byte(b))
        << what << " at byte " << b << " of: " << text;
  }
}

void check_token_at_byte_on_random_texts(const Tokenizer& tok,
                                         const std::vector<std::string>& specials,
                                         std::uint32_t seed) {
  std::mt19937 rng(seed);
  SegmentCache cache({.max_bytes = 1 << 20, .min_segment_bytes = 1, .shards = 4});
  // One that holds a few short stretches at most, so a stretch encode() stored may be gone by
  // the time its bytes are asked about (and then is encoded again).
  SegmentCache small({.max_bytes = 512, .min_segment_bytes = 1, .shards = 1});
  std::uniform_int_distribution<std::size_t> pick_special(0, specials.size() - 1);
  for (int round = 0; round < 120; ++round) {
    std::string text;
    if (rng() % 2 == 0) text += specials[pick_special(rng)];
    const std::size_t n = 1 + rng() % 5;
    for (std::size_t i = 0; i < n; ++i) {
      text += test_text::random_text(rng, 1 + rng() % 10);
      if (i + 1 < n || rng() % 2 == 0) text += specials[pick_special(rng)];
    }
    const bool parse_special = round % 5 != 4;
    const std::string what = "round " + std::to_string(round);
    expect_same_tokens_at_bytes(tok, text, {.parse_special = parse_special}, what);
    expect_same_tokens_at_bytes(
        tok, text, {.parse_special = parse_special, .segment_cache = &cache}, what + ", cached");
    expect_same_tokens_at_bytes(tok, text,
                                {.parse_special = parse_special, .segment_cache = &small},
                                what + ", small cache");
  }
}

TEST(TokenAtByteTest, ByteTokenizerStretchesGiveTheOffsetsAnswer) {
  auto tok = make_byte_tokenizer();
  std::vector<std::string> specials(byte_tokenizer_specials().begin(),
                                    byte_tokenizer_specials().end());
  check_token_at_byte_on_random_texts(*tok, specials, 1);
  expect_same_tokens_at_bytes(*tok, "", {}, "empty");
  expect_same_tokens_at_bytes(*tok, "<|eot_id|><|eot_id|>", {}, "specials only");
}

class TokenAtByteBpeTest
    : public ::testing::TestWithParam<std::pair<std::string, std::vector<std::string>>> {};

TEST_P(TokenAtByteBpeTest, StretchesGiveTheOffsetsAnswer) {
  const auto& [family, specials] = GetParam();
  const auto json_text = test_text::read_file(test_text::tokenizer_path(family));
  if (!json_text) {
    GTEST_SKIP() << test_text::tokenizer_path(family)
                 << " is missing: run scripts/install-js-deps.sh";
  }
  auto tok = load_tokenizer_json(*json_text);
  ASSERT_TRUE(tok) << tok.error().message;
  check_token_at_byte_on_random_texts(**tok, specials, 7);
}

INSTANTIATE_TEST_SUITE_P(
    Families, TokenAtByteBpeTest,
    ::testing::Values(
        std::pair<std::string, std::vector<std::string>>{
            "llama3_1", {"<|begin_of_text|>", "<|start_header_id|>", "<|eot_id|>"}},
        std::pair<std::string, std::vector<std::string>>{"qwen3", {"<|im_start|>", "<|im_end|>"}},
        std::pair<std::string, std::vector<std::string>>{"gemma3", {"<bos>", "<start_of_turn>"}},
        std::pair<std::string, std::vector<std::string>>{"llama2", {"<s>", "</s>"}},
        std::pair<std::string, std::vector<std::string>>{"mistral_nemo", {"<s>", "[INST]"}}),
    [](const auto& p) { return p.param.first; });

// Through AnalyzedPrompt, as the gateway lints: a conversation with volatile content analyzed
// with every offset and with stretches only gives the same token at every byte, the same
// stable prefix and the same findings.
void check_analyzed(const Tokenizer& tok) {
  SegmentCache cache({.max_bytes = 1 << 20});
  // One prompt reused, as the gateway does: what it kept of one request must not answer for
  // the next.
  AnalyzedPrompt with_offsets, on_demand;
  for (SegmentCache* c : {static_cast<SegmentCache*>(nullptr), &cache, &cache}) {
    PromptModel model;
    model.tokenizer = &tok;
    model.block_size = 16;
    model.segment_cache = c;
    auto req = parse_request(
        R"({"model":"m","messages":[
          {"role":"system","content":"Today is 2026-12-03T08:15:00Z. Request id 0f8fad5b-d9cb-469f-a165-70867728950e."},
          {"role":"user","content":"Hello at 2026-12-03 09:00"},
          {"role":"assistant","content":"Hi."},
          {"role":"user","content":"Again, now 2026-12-03T09:05:00Z"}]})",
        Endpoint::kChatCompletions);
    ASSERT_TRUE(req) << req.error().message;
    ASSERT_TRUE(analyze_prompt_into(*req, model, with_offsets, {}, ByteOffsets::kKeep));
    ASSERT_TRUE(analyze_prompt_into(*req, model, on_demand, {}, ByteOffsets::kOnDemand));
    ASSERT_TRUE(on_demand.tokens.byte_offsets.empty());
    ASSERT_FALSE(on_demand.tokens.stretches.empty());
    ASSERT_EQ(on_demand.tokens.tokens, with_offsets.tokens.tokens);
    for (std::size_t b = 0; b <= on_demand.rendered.text.size(); ++b) {
      ASSERT_EQ(on_demand.token_at_byte(b), with_offsets.token_at_byte(b)) << "byte " << b;
    }
    EXPECT_EQ(on_demand.stable_prefix_tokens(), with_offsets.stable_prefix_tokens());
    const PromptLint a = lint_prompt(with_offsets, {});
    const PromptLint b = lint_prompt(on_demand, {});
    ASSERT_GE(a.findings.size(), 3u) << "the prompt holds timestamps and an id";
    ASSERT_EQ(b.findings.size(), a.findings.size());
    for (std::size_t i = 0; i < a.findings.size(); ++i) {
      EXPECT_EQ(b.findings[i].token_offset, a.findings[i].token_offset) << i;
      EXPECT_EQ(b.findings[i].prompt_begin, a.findings[i].prompt_begin) << i;
    }
    EXPECT_EQ(b.stable_prefix_tokens, a.stable_prefix_tokens);
    // A shorter request next: its own stretches answer.
    auto other = parse_request(
        R"({"model":"m","messages":[{"role":"system","content":"Build 2026-12-04T10:00:00Z"},)"
        R"({"role":"user","content":"Hi"}]})",
        Endpoint::kChatCompletions);
    ASSERT_TRUE(other);
    ASSERT_TRUE(analyze_prompt_into(*other, model, with_offsets, {}, ByteOffsets::kKeep));
    ASSERT_TRUE(analyze_prompt_into(*other, model, on_demand, {}, ByteOffsets::kOnDemand));
    for (std::size_t i = 0; i <= on_demand.rendered.text.size(); ++i) {
      ASSERT_EQ(on_demand.token_at_byte(i), with_offsets.token_at_byte(i)) << "byte " << i;
    }
    // And the first again, into the same prompts: the stretch kept from the other request
    // must not answer for this one's stretch of the same index, asked about first.
    const std::size_t kept = on_demand.stretch_scratch.stretch;
    ASSERT_TRUE(analyze_prompt_into(*req, model, with_offsets, {}, ByteOffsets::kKeep));
    ASSERT_TRUE(analyze_prompt_into(*req, model, on_demand, {}, ByteOffsets::kOnDemand));
    if (kept < on_demand.tokens.stretches.size()) {
      const EncodedStretch& s = on_demand.tokens.stretches[kept];
      for (std::size_t i = s.byte_begin; i < s.byte_end; ++i) {
        ASSERT_EQ(on_demand.token_at_byte(i), with_offsets.token_at_byte(i)) << "byte " << i;
      }
    }
    for (std::size_t i = 0; i <= on_demand.rendered.text.size(); ++i) {
      ASSERT_EQ(on_demand.token_at_byte(i), with_offsets.token_at_byte(i)) << "byte " << i;
    }
  }
}

TEST(TokenAtByteTest, AnalyzedOnDemandLintsAsWithOffsets) {
  auto tok = make_byte_tokenizer();
  check_analyzed(*tok);
}

TEST(TokenAtByteTest, AnalyzedOnDemandLintsAsWithOffsetsLlama3) {
  const auto json_text = test_text::read_file(test_text::tokenizer_path("llama3_1"));
  if (!json_text) GTEST_SKIP() << test_text::tokenizer_path("llama3_1") << " is missing";
  auto tok = load_tokenizer_json(*json_text);
  ASSERT_TRUE(tok) << tok.error().message;
  check_analyzed(**tok);
}

}  // namespace
}  // namespace prefixgate::canon
