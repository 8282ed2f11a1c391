// The segment cache (segment_cache.h): tokens through it are the tokens without it, for the byte
// tokenizer and for real tokenizer.json files of every kind we load (byte-level BPE: Llama 3.1,
// Qwen3, Mistral Nemo, DeepSeek V3; SentencePiece-style with Metaspace or a Prepend normalizer:
// Gemma 3, Llama 2), over random growing conversations and random texts cut by special tokens;
// and its LRU stays within its memory bound. The real tokenizers are read from
// tests/js/node_modules (scripts/install-js-deps.sh); those cases skip without them.
#include "prefixgate/canonicalize/segment_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/prompt.h"
#include "prefixgate/canonicalize/request.h"
#include "prefixgate/canonicalize/tokenizer.h"
#include "random_tokenizer_text.h"

namespace prefixgate::canon {
namespace {

using test_text::random_text;
using test_text::read_file;
using test_text::tokenizer_path;

// Tokens and offsets of `text` without a cache and through `cache`; equal or the test fails.
void expect_same(const Tokenizer& tok, const std::string& text, SegmentCache& cache,
                 bool parse_special, const std::string& what) {
  std::vector<TokenId> plain, cached;
  std::vector<std::size_t> plain_offsets, cached_offsets;
  tok.encode(text, plain, {.parse_special = parse_special}, &plain_offsets);
  tok.encode(text, cached, {.parse_special = parse_special, .segment_cache = &cache},
             &cached_offsets);
  ASSERT_EQ(cached, plain) << what << ": " << text;
  ASSERT_EQ(cached_offsets, plain_offsets) << what << ": " << text;
  // Without offsets asked for, the same ids.
  std::vector<TokenId> no_offsets;
  tok.encode(text, no_offsets, {.parse_special = parse_special, .segment_cache = &cache});
  ASSERT_EQ(no_offsets, plain) << what << ": " << text;
}

// Random texts built from a small pool of segments joined by special tokens, so that segments
// recur at the start of a text and after a special token, with and without special parsing.
void check_random_texts(const Tokenizer& tok, const std::vector<std::string>& specials,
                        std::uint32_t seed) {
  std::mt19937 rng(seed);
  SegmentCache cache({.max_bytes = 1 << 20, .min_segment_bytes = 1, .shards = 4});
  std::vector<std::string> pool;
  for (int i = 0; i < 12; ++i) pool.push_back(random_text(rng, 1 + rng() % 12));
  std::uniform_int_distribution<std::size_t> pick_segment(0, pool.size() - 1);
  std::uniform_int_distribution<std::size_t> pick_special(0, specials.size() - 1);
  for (int round = 0; round < 150; ++round) {
    std::string text;
    if (rng() % 2 == 0) text += specials[pick_special(rng)];
    const std::size_t n = 1 + rng() % 6;
    for (std::size_t i = 0; i < n; ++i) {
      text += pool[pick_segment(rng)];
      if (i + 1 < n || rng() % 2 == 0) text += specials[pick_special(rng)];
    }
    expect_same(tok, text, cache, /*parse_special=*/round % 5 != 4,
                "round " + std::to_string(round));
  }
  EXPECT_GT(cache.stats().hits, 100u) << "the texts repeat segments: most must come from cache";
  EXPECT_GT(cache.stats().misses, 0u);
}

// A chat request body: a system prompt, tools, and `turns` user/assistant exchanges.
std::string conversation_body(std::mt19937& rng, const std::string& system,
                              const std::vector<std::string>& turns) {
  json::Array messages;
  messages.push_back(json::Object{{"role", "system"}, {"content", system}});
  for (std::size_t i = 0; i < turns.size(); ++i) {
    messages.push_back(
        json::Object{{"role", i % 2 == 0 ? "user" : "assistant"}, {"content", turns[i]}});
  }
  json::Value body = json::Object{{"model", "m"}, {"messages", std::move(messages)}};
  if (rng() % 2 == 0) {
    body.set("tools", *json::parse(R"([{"type":"function","function":{"name":"search",
      "description":"Search the web","parameters":{"type":"object","properties":{
      "q":{"type":"string"}},"required":["q"]}}}])"));
  }
  return json::to_json(body);
}

// Agent conversations that grow by one turn per request, analyzed (render, tokenize, block
// hashes) with and without one shared cache, and without byte offsets: equal tokens, offsets and
// block hashes. Where the template marks turns with the tokenizer's special tokens
// (`turns_split`), the earlier turns must come from the cache.
void check_conversations(const Tokenizer& tok, ChatFormat format, std::uint32_t seed,
                         bool turns_split = true) {
  std::mt19937 rng(seed);
  SegmentCache cache({.max_bytes = 8 << 20});
  PromptModel plain{.chat_format = format, .tokenizer = &tok, .block_size = 16};
  PromptModel cached = plain;
  cached.segment_cache = &cache;
  AnalyzedPrompt reused;
  for (int conv = 0; conv < 6; ++conv) {
    const std::string system =
        "You are agent " + std::to_string(conv % 3) + ". " + random_text(rng, 40 + rng() % 40);
    std::vector<std::string> turns;
    for (int turn = 0; turn < 8; ++turn) {
      turns.push_back(random_text(rng, 5 + rng() % 60));
      const std::string body = conversation_body(rng, system, turns);
      auto req = parse_request(body, Endpoint::kChatCompletions);
      ASSERT_TRUE(req) << req.error().message;
      auto a = analyze_prompt(*req, plain);
      auto b = analyze_prompt(*req, cached);
      ASSERT_TRUE(a && b);
      ASSERT_EQ(b->rendered.text, a->rendered.text);
      ASSERT_EQ(b->tokens.tokens, a->tokens.tokens) << body;
      ASSERT_EQ(b->tokens.byte_offsets, a->tokens.byte_offsets) << body;
      ASSERT_EQ(b->block_hashes, a->block_hashes) << body;
      // As the gateway routes: into a reused prompt, without byte offsets.
      ASSERT_TRUE(analyze_prompt_into(*req, cached, reused, {}, ByteOffsets::kSkip));
      ASSERT_EQ(reused.tokens.tokens, a->tokens.tokens) << body;
      ASSERT_TRUE(reused.tokens.byte_offsets.empty());
      ASSERT_EQ(reused.block_hashes, a->block_hashes) << body;
    }
  }
  if (!turns_split) return;
  const SegmentCacheStats s = cache.stats();
  // Every turn after the first re-sends the system prompt and earlier turns.
  EXPECT_GT(s.hits, s.misses / 2) << "hits " << s.hits << " misses " << s.misses;
  EXPECT_GT(s.hit_bytes, 0u);
}

TEST(SegmentCacheTest, ByteTokenizerCachedEqualsUncachedOnRandomTexts) {
  auto tok = make_byte_tokenizer();
  std::vector<std::string> specials(byte_tokenizer_specials().begin(),
                                    byte_tokenizer_specials().end());
  check_random_texts(*tok, specials, 1);
}

TEST(SegmentCacheTest, ByteTokenizerCachedEqualsUncachedOnGrowingConversations) {
  auto tok = make_byte_tokenizer();
  check_conversations(*tok, ChatTemplate::kLlama3, 2);
  check_conversations(*tok, ChatTemplate::kChatml, 3);
}

struct CachedFamily {
  std::string name;
  ChatTemplate chat_template;  // plain: no special tokens between turns (one segment)
  std::vector<std::string> specials;
};

void PrintTo(const CachedFamily& f, std::ostream* os) {
  *os << f.name;
}

class SegmentCacheBpeTest : public ::testing::TestWithParam<CachedFamily> {};

TEST_P(SegmentCacheBpeTest, CachedEqualsUncached) {
  const CachedFamily& f = GetParam();
  const auto json_text = read_file(tokenizer_path(f.name));
  if (!json_text) {
    GTEST_SKIP() << tokenizer_path(f.name) << " is missing: run scripts/install-js-deps.sh";
  }
  auto tok = load_tokenizer_json(*json_text);
  ASSERT_TRUE(tok) << tok.error().message;
  for (const std::string& s : f.specials) {
    ASSERT_TRUE((*tok)->special_token(s)) << f.name << " has no " << s;
  }
  check_random_texts(**tok, f.specials, 10);
  check_conversations(**tok, f.chat_template, 11, f.chat_template != ChatTemplate::kPlain);
}

INSTANTIATE_TEST_SUITE_P(
    Families, SegmentCacheBpeTest,
    ::testing::Values(
        CachedFamily{
            "llama3_1",
            ChatTemplate::kLlama3,
            {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}},
        CachedFamily{
            "qwen3", ChatTemplate::kChatml, {"<|im_start|>", "<|im_end|>", "<|endoftext|>"}},
        CachedFamily{"mistral_nemo", ChatTemplate::kPlain, {"<s>", "</s>", "[INST]", "[/INST]"}},
        CachedFamily{"deepseek_v3", ChatTemplate::kPlain, {"<｜begin▁of▁sentence｜>"}},
        CachedFamily{"gemma3", ChatTemplate::kPlain, {"<bos>", "<start_of_turn>", "<end_of_turn>"}},
        CachedFamily{"llama2", ChatTemplate::kPlain, {"<s>", "</s>"}}),
    [](const ::testing::TestParamInfo<CachedFamily>& p) { return p.param.name; });

// Metaspace with prepend_scheme "first" (Mistral 7B v0.3) prepends "▁" only to a segment that
// starts the text: the same bytes elsewhere tokenize differently, and must not share an entry.
TEST(SegmentCacheTest, PrependFirstSegmentsAtTheStartAreKeyedApart) {
  const auto llama2 = read_file(tokenizer_path("llama2"));
  if (!llama2) GTEST_SKIP() << tokenizer_path("llama2") << " is missing";
  auto doc = json::parse(*llama2);
  ASSERT_TRUE(doc);
  const char* metaspace =
      R"({"type":"Metaspace","replacement":"\u2581","prepend_scheme":"first","split":false,)"
      R"("add_prefix_space":true})";
  doc->set("normalizer", json::Value{});
  doc->set("pre_tokenizer", *json::parse(metaspace));
  auto tok = load_tokenizer_json(json::to_json(*doc));
  ASSERT_TRUE(tok) << tok.error().message;
  std::vector<TokenId> at_start, after_special;
  (*tok)->encode("Hello world", at_start);
  (*tok)->encode("<s>Hello world", after_special);
  ASSERT_NE(std::vector<TokenId>(after_special.begin() + 1, after_special.end()), at_start)
      << "the tokenizer must tell a segment at the start from one after a special token";
  SegmentCache cache({.min_segment_bytes = 1});
  expect_same(**tok, "Hello world</s>", cache, true, "at the start");
  expect_same(**tok, "<s>Hello world", cache, true, "after a special token");
  expect_same(**tok, "Hello world", cache, true, "at the start again");
  check_random_texts(**tok, {"<s>", "</s>"}, 12);
}

TEST(SegmentCacheTest, TokenizersDoNotShareEntries) {
  const auto json_text = read_file(tokenizer_path("llama3_1"));
  if (!json_text) GTEST_SKIP() << tokenizer_path("llama3_1") << " is missing";
  auto bpe = load_tokenizer_json(*json_text);
  ASSERT_TRUE(bpe);
  auto byte = make_byte_tokenizer();
  EXPECT_NE((*bpe)->identity(), byte->identity());
  SegmentCache cache({.min_segment_bytes = 1});
  const std::string text = "<|eot_id|>The same words through two tokenizers.<|eot_id|>";
  expect_same(*byte, text, cache, true, "byte");
  expect_same(**bpe, text, cache, true, "llama3_1");
  // The same tokenizer.json loaded twice is the same tokenizer: it reuses the entries.
  auto again = load_tokenizer_json(*json_text);
  ASSERT_TRUE(again);
  EXPECT_EQ((*again)->identity(), (*bpe)->identity());
}

TEST(SegmentCacheTest, ShortSegmentsAreNotCached) {
  auto tok = make_byte_tokenizer();
  SegmentCache cache({.min_segment_bytes = 16});
  expect_same(*tok, "<|eot_id|>short<|eot_id|>", cache, true, "short");
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_EQ(cache.stats().hits + cache.stats().misses, 0u);
  expect_same(*tok, "<|eot_id|>a segment longer than sixteen bytes", cache, true, "long");
  EXPECT_EQ(cache.stats().entries, 1u);
}

TEST(SegmentCacheTest, StaysWithinItsMemoryBoundEvictingLeastRecentlyUsed) {
  auto tok = make_byte_tokenizer();
  constexpr std::size_t kMax = 64 << 10;
  SegmentCache cache({.max_bytes = kMax, .min_segment_bytes = 1, .shards = 1});
  const std::string keep = "a segment used again and again " + std::string(200, 'k');
  std::vector<TokenId> out;
  for (int i = 0; i < 2000; ++i) {
    out.clear();
    tok->encode("<|eot_id|>" + std::to_string(i) + std::string(300, 'x'), out,
                {.segment_cache = &cache});
    out.clear();
    tok->encode("<|eot_id|>" + keep, out, {.segment_cache = &cache});
    ASSERT_LE(cache.stats().bytes, kMax);
  }
  const SegmentCacheStats s = cache.stats();
  EXPECT_GT(s.evictions, 1000u);
  EXPECT_GT(s.entries, 10u);
  // The segment used on every round was never evicted: one miss, then hits.
  EXPECT_GE(s.hits, 1999u);
  // Each entry is charged at least its ids and offsets (8 bytes a token).
  EXPECT_GE(s.bytes, s.entries * 300 * 8);
}

TEST(SegmentCacheTest, AnEntryLargerThanTheBoundIsNotStored) {
  auto tok = make_byte_tokenizer();
  SegmentCache cache({.max_bytes = 4096, .min_segment_bytes = 1, .shards = 1});
  std::vector<TokenId> out;
  tok->encode(std::string(4096, 'y'), out, {.segment_cache = &cache});
  EXPECT_EQ(out.size(), 4096u);
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_EQ(cache.stats().bytes, 0u);
}

// A cached segment's tokens up to a byte are counted in place, as the offsets the lookup would
// copy out say, and asking counts as neither a hit nor a miss.
TEST(SegmentCacheTest, TokensThroughAnOffsetAreCountedFromTheEntry) {
  SegmentCache cache({.min_segment_bytes = 1, .shards = 2});
  const SegmentCache::Key key = SegmentCache::key(7, 0, "the segment");
  EXPECT_FALSE(cache.tokens_through(key, 0)) << "not stored yet";
  // Three tokens at segment offsets 0, 4 and 4 (a token of no bytes of its own) and 8, stored
  // from a text where the segment begins at byte 100.
  const std::vector<TokenId> tokens{11, 12, 13, 14};
  const std::vector<std::size_t> offsets{100, 104, 104, 108};
  cache.insert(key, 11, tokens, offsets, 100);
  const std::vector<std::pair<std::size_t, std::size_t>> expect{{0, 1}, {3, 1},  {4, 3},   {7, 3},
                                                                {8, 4}, {10, 4}, {1000, 4}};
  for (const auto& [offset, count] : expect) {
    EXPECT_EQ(cache.tokens_through(key, offset), count) << "offset " << offset;
  }
  EXPECT_EQ(cache.stats().hits + cache.stats().misses, 0u);
  // The same answer as the offsets a lookup copies out.
  std::vector<TokenId> out;
  std::vector<std::size_t> out_offsets;
  ASSERT_TRUE(cache.lookup(key, 11, out, &out_offsets, 0));
  for (const auto& [offset, count] : expect) {
    EXPECT_EQ(
        static_cast<std::size_t>(std::upper_bound(out_offsets.begin(), out_offsets.end(), offset) -
                                 out_offsets.begin()),
        count);
  }
  EXPECT_FALSE(cache.tokens_through(SegmentCache::key(8, 0, "the segment"), 0))
      << "another tokenizer's key";
}

}  // namespace
}  // namespace prefixgate::canon
