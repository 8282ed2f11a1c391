#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::canon {
namespace {

std::vector<TokenId> encode(std::string_view text, bool parse_special = true,
                            std::vector<std::size_t>* offsets = nullptr) {
  std::vector<TokenId> ids;
  make_byte_tokenizer()->encode(text, ids, {.parse_special = parse_special}, offsets);
  return ids;
}

// The specification, written the slow and obvious way: at each position, a special token if
// one starts there, else the byte.
std::vector<TokenId> reference_encode(std::string_view text) {
  const auto specials = byte_tokenizer_specials();
  std::vector<TokenId> ids;
  for (std::size_t pos = 0; pos < text.size();) {
    bool matched = false;
    for (std::size_t i = 0; i < specials.size() && !matched; ++i) {
      if (text.substr(pos).starts_with(specials[i])) {
        ids.push_back(static_cast<TokenId>(256 + i));
        pos += specials[i].size();
        matched = true;
      }
    }
    if (!matched) ids.push_back(static_cast<unsigned char>(text[pos++]));
  }
  return ids;
}

TEST(ByteTokenizerTest, DescribesItself) {
  const auto tok = make_byte_tokenizer();
  EXPECT_EQ(tok->name(), "byte");
  EXPECT_EQ(tok->vocab_size(), 263u);
  const std::vector<std::string_view> expected = {
      "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
      "<|eot_id|>",        "<|im_start|>",    "<|im_end|>"};
  const auto specials = byte_tokenizer_specials();
  ASSERT_EQ(std::vector<std::string_view>(specials.begin(), specials.end()), expected);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(tok->special_token(expected[i]), static_cast<TokenId>(256 + i));
  }
  EXPECT_EQ(tok->special_token("<|endoftext|>"), std::nullopt);
  EXPECT_EQ(tok->special_token("a"), std::nullopt);
}

TEST(ByteTokenizerTest, SpecialIdsAreTheOnesAfterTheBytes) {
  auto tok = make_byte_tokenizer();
  EXPECT_FALSE(tok->is_special('a'));
  EXPECT_FALSE(tok->is_special(255));
  EXPECT_TRUE(tok->is_special(*tok->special_token("<|begin_of_text|>")));
  EXPECT_TRUE(tok->is_special(*tok->special_token("<|im_end|>")));
  EXPECT_FALSE(tok->is_special(static_cast<TokenId>(tok->vocab_size())));
}

TEST(ByteTokenizerTest, TokenIdIsTheByteValue) {
  EXPECT_EQ(encode("Hi\n"), (std::vector<TokenId>{72, 105, 10}));
  EXPECT_EQ(encode(std::string("\x00\xff\x80", 3)), (std::vector<TokenId>{0, 255, 128}));
  EXPECT_EQ(encode("\xc3\xa9"), (std::vector<TokenId>{0xC3, 0xA9}));
  EXPECT_TRUE(encode("").empty());
}

TEST(ByteTokenizerTest, ParsesSpecialTokensOnlyWhenAsked) {
  EXPECT_EQ(encode("<|im_start|>ab<|im_end|>"), (std::vector<TokenId>{261, 'a', 'b', 262}));
  EXPECT_EQ(encode("<|eot_id|><|eot_id|>"), (std::vector<TokenId>{260, 260}));
  const std::string text = "<|begin_of_text|>x";
  std::vector<TokenId> bytes(text.begin(), text.end());
  EXPECT_EQ(encode(text, /*parse_special=*/false), bytes);
}

TEST(ByteTokenizerTest, NearMissesStayBytes) {
  EXPECT_EQ(encode("<|im_start"), reference_encode("<|im_start"));
  EXPECT_EQ(encode("<|im_start"),
            std::vector<TokenId>({'<', '|', 'i', 'm', '_', 's', 't', 'a', 'r', 't'}));
  EXPECT_EQ(encode("<<|im_end|>>"), (std::vector<TokenId>{'<', 262, '>'}));
  EXPECT_EQ(encode("< |eot_id|>").size(), 11u);
}

TEST(ByteTokenizerTest, OffsetsAreExact) {
  std::vector<std::size_t> offsets;
  const auto ids = encode("ab<|eot_id|>c", true, &offsets);
  EXPECT_EQ(ids, (std::vector<TokenId>{'a', 'b', 260, 'c'}));
  EXPECT_EQ(offsets, (std::vector<std::size_t>{0, 1, 2, 12}));
  offsets.clear();
  encode("xyz", false, &offsets);
  EXPECT_EQ(offsets, (std::vector<std::size_t>{0, 1, 2}));
}

TEST(ByteTokenizerTest, AppendsToExistingOutput) {
  std::vector<TokenId> ids = {7};
  std::vector<std::size_t> offsets = {99};
  make_byte_tokenizer()->encode("a<|im_end|>", ids, {}, &offsets);
  EXPECT_EQ(ids, (std::vector<TokenId>{7, 'a', 262}));
  EXPECT_EQ(offsets, (std::vector<std::size_t>{99, 0, 1}));
}

TEST(ByteTokenizerTest, DecodeInvertsEncode) {
  const auto tok = make_byte_tokenizer();
  const std::vector<std::string> fragments = {"<|im_start|>",
                                              "<|im_end|>",
                                              "<|eot_id|>",
                                              "<|",
                                              "|>",
                                              "<",
                                              "a",
                                              "\n",
                                              "\xff",
                                              "\xe4\xb8",
                                              " ",
                                              "<|begin_of_text|>",
                                              "<|end_of_text",
                                              "|"};
  std::mt19937 rng(7);
  for (int round = 0; round < 500; ++round) {
    std::string text;
    const int pieces = static_cast<int>(rng() % 40);
    for (int i = 0; i < pieces; ++i) text += fragments[rng() % fragments.size()];
    for (bool parse_special : {true, false}) {
      std::vector<TokenId> ids;
      std::vector<std::size_t> offsets;
      tok->encode(text, ids, {.parse_special = parse_special}, &offsets);
      if (parse_special) {
        EXPECT_EQ(ids, reference_encode(text)) << text;
      }
      EXPECT_EQ(tok->decode(ids), text);
      ASSERT_EQ(offsets.size(), ids.size());
      for (std::size_t i = 0; i < ids.size(); ++i) {
        const std::string piece = tok->decode(std::span(&ids[i], 1));
        EXPECT_EQ(text.substr(offsets[i], piece.size()), piece);
      }
    }
  }
}

TEST(ByteTokenizerTest, UnknownIdsDecodeToNothing) {
  const std::vector<TokenId> ids = {'o', 263, 'k', 1000000, 260};
  EXPECT_EQ(make_byte_tokenizer()->decode(ids), "ok<|eot_id|>");
}

}  // namespace
}  // namespace prefixgate::canon
