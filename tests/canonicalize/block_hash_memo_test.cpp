// BlockHashMemo gives exactly block_hashes() whatever streams it has seen: growing
// conversations, streams that share only a system prompt, other roots and block sizes, streams
// that are prefixes of remembered ones, and more distinct streams than it has places; compared
// by their tokens, and by their text and stretches as the byte tokenizer and real tokenizer.json
// files encode them (those cases skip without tests/js/node_modules).
#include "prefixgate/canonicalize/block_hash_memo.h"

#include <gtest/gtest.h>

#include <random>

#include "prefixgate/canonicalize/block_hash.h"
#include "random_tokenizer_text.h"

namespace prefixgate::canon {
namespace {

std::vector<TokenId> random_tokens(std::mt19937& rng, std::size_t n) {
  std::vector<TokenId> t(n);
  for (TokenId& x : t) x = rng() % 1000;  // a small vocabulary: equal blocks happen
  return t;
}

TEST(BlockHashMemoTest, AGrowingConversationReusesItsEarlierTurns) {
  BlockHashMemo memo;
  std::mt19937 rng(1);
  const std::uint64_t root = block_hash_root("m");
  std::vector<TokenId> conversation = random_tokens(rng, 1000);
  std::vector<std::uint64_t> out;
  EXPECT_EQ(memo.hashes(conversation, 16, root, out), 0u);
  EXPECT_EQ(out, block_hashes(conversation, 16, root));
  for (int turn = 0; turn < 5; ++turn) {
    const std::size_t before = conversation.size();
    const auto more = random_tokens(rng, 300);
    conversation.insert(conversation.end(), more.begin(), more.end());
    EXPECT_EQ(memo.hashes(conversation, 16, root, out), before / 16) << "turn " << turn;
    EXPECT_EQ(out, block_hashes(conversation, 16, root));
  }
  // Another root (a tenant's salt) shares nothing.
  const std::uint64_t salted = block_hash_root("m", "tenant");
  EXPECT_EQ(memo.hashes(conversation, 16, salted, out), 0u);
  EXPECT_EQ(out, block_hashes(conversation, 16, salted));
}

TEST(BlockHashMemoTest, EqualsBlockHashesOverRandomStreams) {
  BlockHashMemo memo;
  std::mt19937 rng(7);
  const std::vector<std::uint64_t> roots{block_hash_root("a"), block_hash_root("b")};
  // A few system prompts that many streams start with, each followed by its own turns.
  std::vector<std::vector<TokenId>> prompts;
  for (int i = 0; i < 3; ++i) prompts.push_back(random_tokens(rng, 200 + 50 * i));
  std::vector<std::vector<TokenId>> streams;
  std::vector<std::uint64_t> out;
  std::size_t reused_total = 0;
  for (int step = 0; step < 400; ++step) {
    std::vector<TokenId> s;
    switch (rng() % 4) {
      case 0:  // a new conversation after a shared system prompt
        s = prompts[rng() % prompts.size()];
        break;
      case 1:  // a known stream cut short (a prefix of something remembered)
        if (!streams.empty()) {
          s = streams[rng() % streams.size()];
          s.resize(rng() % (s.size() + 1));
        }
        break;
      default:  // a known stream, one turn longer, or changed in its middle
        if (!streams.empty()) {
          s = streams[rng() % streams.size()];
          if (!s.empty() && rng() % 3 == 0) s[rng() % s.size()] ^= 1;
        }
        break;
    }
    const auto more = random_tokens(rng, rng() % 120);
    s.insert(s.end(), more.begin(), more.end());
    const std::uint64_t root = roots[rng() % roots.size()];
    const std::size_t block_size = rng() % 5 == 0 ? 4 : 16;
    reused_total += memo.hashes(s, block_size, root, out);
    ASSERT_EQ(out, block_hashes(s, block_size, root)) << "step " << step;
    streams.push_back(std::move(s));
    if (streams.size() > 30) streams.erase(streams.begin());
  }
  EXPECT_GT(reused_total, 0u) << "the memo never reused a hash";
}

// A text and its encoding, as the memo's text comparison takes them.
struct Encoded {
  std::string text;
  std::vector<TokenId> tokens;
  std::vector<EncodedStretch> stretches;
  BlockHashMemo::EncodedText view(const Tokenizer& tok) const {
    return {.tokens = tokens, .text = text, .stretches = stretches, .tokenizer = tok.identity()};
  }
};

Encoded encode_with_stretches(const Tokenizer& tok, std::string text) {
  Encoded e{.text = std::move(text), .tokens = {}, .stretches = {}};
  tok.encode(e.text, e.tokens, {.parse_special = true, .stretches = &e.stretches});
  return e;
}

// Texts that grow by turns, share only a start, are cut short, changed in the middle, or
// continued so that an added token straddles where the remembered text ended ("<|im_" then
// "start|>"): the memo's hashes are block_hashes() of each text's own tokens.
std::size_t check_texts(const std::vector<const Tokenizer*>& toks,
                        const std::vector<std::string>& specials, std::uint32_t seed) {
  BlockHashMemo memo;
  std::mt19937 rng(seed);
  const std::uint64_t root = block_hash_root("m");
  std::vector<std::string> pieces = test_text::kPieces;
  for (const std::string& sp : specials) {
    pieces.push_back(sp);
    pieces.push_back(sp.substr(0, sp.size() / 2));  // half an added token, and the other half
    pieces.push_back(sp.substr(sp.size() / 2));
  }
  const auto random_text = [&](std::size_t n) {
    std::string out;
    for (std::size_t i = 0; i < n; ++i) out += pieces[rng() % pieces.size()];
    return out;
  };
  std::vector<std::string> starts;
  for (int i = 0; i < 3; ++i) starts.push_back(random_text(30 + 10 * i));
  std::vector<std::string> texts;
  std::vector<std::uint64_t> out;
  std::size_t reused_total = 0;
  for (int step = 0; step < 300; ++step) {
    std::string t;
    switch (rng() % 5) {
      case 0: t = starts[rng() % starts.size()]; break;
      case 1:  // cut short
        if (!texts.empty()) {
          t = texts[rng() % texts.size()];
          t.resize(rng() % (t.size() + 1));
        }
        break;
      case 2:  // changed in the middle
        if (!texts.empty()) {
          t = texts[rng() % texts.size()];
          if (!t.empty()) t[rng() % t.size()] = 'Z';
        }
        break;
      default:  // one turn longer
        if (!texts.empty()) t = texts[rng() % texts.size()];
        break;
    }
    t += random_text(rng() % 12);
    const Tokenizer& tok = *toks[rng() % toks.size()];
    const Encoded e = encode_with_stretches(tok, t);
    const std::size_t block_size = rng() % 4 == 0 ? 4 : 16;
    reused_total += memo.hashes(e.view(tok), block_size, root, out);
    EXPECT_EQ(out, block_hashes(e.tokens, block_size, root)) << "step " << step << ": " << t;
    if (::testing::Test::HasFailure()) return reused_total;
    texts.push_back(std::move(t));
    if (texts.size() > 30) texts.erase(texts.begin());
  }
  return reused_total;
}

TEST(BlockHashMemoTest, ByTextEqualsBlockHashesWithTheByteTokenizer) {
  const auto tok = make_byte_tokenizer();
  const std::vector<std::string> specials(byte_tokenizer_specials().begin(),
                                          byte_tokenizer_specials().end());
  EXPECT_GT(check_texts({tok.get()}, specials, 3), 0u) << "the memo never reused a hash";
}

TEST(BlockHashMemoTest, ByTextEqualsBlockHashesWithRealTokenizersAndNeverAcrossThem) {
  const auto json_text = test_text::read_file(test_text::tokenizer_path("llama3_1"));
  if (!json_text) GTEST_SKIP() << "llama3_1 tokenizer.json missing: run scripts/install-js-deps.sh";
  auto llama = load_tokenizer_json(*json_text);
  ASSERT_TRUE(llama) << llama.error().message;
  const auto bytes = make_byte_tokenizer();
  const std::vector<std::string> specials = {"<|begin_of_text|>", "<|start_header_id|>",
                                             "<|end_header_id|>", "<|eot_id|>"};
  EXPECT_GT(check_texts({llama->get()}, specials, 4), 0u);
  // Both tokenizers under one root: the same text's tokens differ, and must not be shared.
  EXPECT_GT(check_texts({llama->get(), bytes.get()}, specials, 5), 0u);
}

TEST(BlockHashMemoTest, AGrowingConversationByTextReusesItsEarlierTurnsAndCopiesOnlyText) {
  const auto tok = make_byte_tokenizer();
  BlockHashMemo memo;
  const std::uint64_t root = block_hash_root("m");
  std::string text = "<|im_start|>system\n" + std::string(400, 's') + "<|im_end|>";
  std::vector<std::uint64_t> out;
  std::size_t expected_reuse = 0;
  for (int turn = 0; turn < 6; ++turn) {
    text += "<|im_start|>user\n" + std::string(100 + turn, static_cast<char>('a' + turn)) +
            "<|im_end|>";
    const Encoded e = encode_with_stretches(*tok, text);
    EXPECT_EQ(memo.hashes(e.view(*tok), 16, root, out), expected_reuse) << "turn " << turn;
    EXPECT_EQ(out, block_hashes(e.tokens, 16, root));
    // The next turn shares every stretch of this one: its whole blocks.
    expected_reuse = e.tokens.size() / 16;
  }
  // The same tokens without their text compare as tokens: nothing shared with the texts.
  const Encoded e = encode_with_stretches(*tok, text);
  EXPECT_EQ(memo.hashes(e.tokens, 16, root, out), 0u);
  EXPECT_EQ(out, block_hashes(e.tokens, 16, root));
}

}  // namespace
}  // namespace prefixgate::canon
