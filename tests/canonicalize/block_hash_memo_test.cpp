// BlockHashMemo gives exactly block_hashes() whatever streams it has seen: growing
// conversations, streams that share only a system prompt, other roots and block sizes, streams
// that are prefixes of remembered ones, and more distinct streams than it has places.
#include "prefixgate/canonicalize/block_hash_memo.h"

#include <gtest/gtest.h>

#include <random>

#include "prefixgate/canonicalize/block_hash.h"

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

}  // namespace
}  // namespace prefixgate::canon
