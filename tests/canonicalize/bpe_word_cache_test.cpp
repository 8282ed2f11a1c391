// The BPE word cache: its slots and bounds, and that a word served from it tokenizes exactly as
// the same word merged on a thread that never saw it, for real tokenizer.json files (one that
// merges every word, one that takes whole-word vocabulary entries first, a SentencePiece one).
#include "bpe_word_cache.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "prefixgate/canonicalize/tokenizer.h"
#include "random_tokenizer_text.h"

namespace prefixgate::canon {
namespace {

using internal::WordCache;

// Runs `f` on a new thread: a word cache of its own, empty.
template <class F>
void on_fresh_thread(F f) {
  std::thread t(f);
  t.join();
}

TEST(WordCacheTest, EachTokenizerHasItsOwnSlot) {
  on_fresh_thread([] {
    const std::vector<TokenId> ids = {7, 8};
    WordCache::for_tokenizer(1).add("hello", ids);
    EXPECT_FALSE(WordCache::for_tokenizer(2).find("hello").has_value());
    const auto found = WordCache::for_tokenizer(1).find("hello");
    ASSERT_TRUE(found.has_value());
    EXPECT_EQ(std::vector<TokenId>(found->begin(), found->end()), ids);
    // Four tokenizers more: the least recently used slot, tokenizer 1's, is taken over.
    for (std::uint64_t identity = 2; identity <= 5; ++identity) WordCache::for_tokenizer(identity);
    EXPECT_FALSE(WordCache::for_tokenizer(1).find("hello").has_value());
  });
}

TEST(WordCacheTest, BoundedInWordsAndWordLength) {
  on_fresh_thread([] {
    WordCache& cache = WordCache::for_tokenizer(9);
    const std::vector<TokenId> ids = {1, 2};
    cache.add(std::string(WordCache::kMaxWordBytes + 1, 'x'), ids);
    EXPECT_FALSE(cache.find(std::string(WordCache::kMaxWordBytes + 1, 'x')).has_value());
    // Three generations' worth of new words: a word looked up now and then stays, one left
    // alone is dropped with its generation.
    cache.add("kept", ids);
    cache.add("left", ids);
    for (std::size_t i = 0; i < 3 * WordCache::kGenerationWords; ++i) {
      cache.add(std::to_string(i), ids);
      if (i % (WordCache::kGenerationWords / 2) == 0) {
        const auto found = cache.find("kept");
        ASSERT_TRUE(found.has_value()) << i;
        EXPECT_EQ(std::vector<TokenId>(found->begin(), found->end()), ids);
      }
    }
    EXPECT_TRUE(cache.find("kept").has_value());
    EXPECT_FALSE(cache.find("left").has_value());
    EXPECT_FALSE(cache.find("0").has_value());
    EXPECT_TRUE(cache.find(std::to_string(3 * WordCache::kGenerationWords - 1)).has_value());
  });
}

class WordCacheTokenizerTest : public testing::TestWithParam<const char*> {};

TEST_P(WordCacheTokenizerTest, CachedWordsTokenizeAsMergedOnes) {
  const auto text = test_text::read_file(test_text::tokenizer_path(GetParam()));
  if (!text) GTEST_SKIP() << testing_reference::kHowToInstall;
  auto tokenizer = load_tokenizer_json(*text);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  const Tokenizer& tok = **tokenizer;
  std::mt19937 rng(11);
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) texts.push_back(test_text::random_text(rng, 24));
  // Cold: each text on a thread whose cache is empty, so every word is merged.
  std::vector<std::vector<TokenId>> cold(texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    on_fresh_thread([&] { tok.encode(texts[i], cold[i], {}); });
  }
  // Warm: all of them on one thread, twice, so most words come from the cache.
  for (int round = 0; round < 2; ++round) {
    for (std::size_t i = 0; i < texts.size(); ++i) {
      std::vector<TokenId> warm;
      tok.encode(texts[i], warm, {});
      ASSERT_EQ(warm, cold[i]) << GetParam() << " round " << round << ": "
                               << testing_reference::printable(texts[i]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, WordCacheTokenizerTest,
                         testing::Values("qwen3", "llama3_1", "llama2"));

}  // namespace
}  // namespace prefixgate::canon
