// AddedTokenMatcher's search against the definition it implements: leftmost match, and of those
// the longest, without overlap. Patterns share long prefixes (as Llama 3's 256
// "<|reserved_special_token_N|>" do), so the matcher's compressed runs of the trie are crossed,
// entered and left at every point, including at the end of the text.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "added_tokens.h"

namespace prefixgate::canon::internal {
namespace {

struct Found {
  std::size_t begin, end, token;
  bool operator==(const Found&) const = default;
};

// The definition, one position at a time.
std::vector<Found> naive_matches(const std::vector<std::string>& patterns, std::string_view text) {
  std::vector<Found> out;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t best = 0, best_len = 0;
    for (std::size_t t = 0; t < patterns.size(); ++t) {
      // A later duplicate replaces an earlier one, as the matcher documents.
      if (text.substr(i).starts_with(patterns[t]) && patterns[t].size() >= best_len) {
        best = t;
        best_len = patterns[t].size();
      }
    }
    if (best_len == 0) {
      ++i;
      continue;
    }
    out.push_back({i, i + best_len, best});
    i += best_len;
  }
  return out;
}

std::vector<Found> matcher_matches(const std::vector<std::string>& patterns,
                                   std::string_view text) {
  std::vector<AddedToken> tokens;
  for (std::size_t t = 0; t < patterns.size(); ++t) {
    tokens.push_back({.content = patterns[t], .id = static_cast<TokenId>(t), .special = true});
  }
  const AddedTokenMatcher matcher(std::move(tokens));
  std::vector<Found> out;
  AddedTokenMatcher::Cursor c;
  while (auto m = matcher.next(text, c, /*parse_special=*/true)) {
    out.push_back({m->begin, m->end, static_cast<std::size_t>(m->token->id)});
    c.emitted_end = m->end;
  }
  return out;
}

TEST(AddedTokenMatcherTest, LongestLeftmostMatchesWithSharedPrefixes) {
  const std::vector<std::string> patterns = {
      "<|eot_id|>",      "<|end_of_text|>",  "<|end_header_id|>", "<|e|>",    "<|reserved_1|>",
      "<|reserved_12|>", "<|reserved_123|>", "<think>",           "</think>", "<|reserved_1"};
  EXPECT_EQ(matcher_matches(patterns, "a<|reserved_12|>b<|reserved_1"),
            (std::vector<Found>{{1, 16, 5}, {17, 29, 9}}));
  // Cut inside a compressed run: no match, and the search goes on after the '<'.
  EXPECT_EQ(matcher_matches(patterns, "<|end_of_te<|eot_id|>"), (std::vector<Found>{{11, 21, 0}}));
  EXPECT_EQ(matcher_matches(patterns, "<|end_of_tex"), std::vector<Found>{});
}

TEST(AddedTokenMatcherTest, AgreesWithTheDefinitionOnRandomText) {
  std::mt19937 rng(11);
  const std::string alphabet = "<|>/_ert12";
  for (int round = 0; round < 200; ++round) {
    std::vector<std::string> patterns;
    const std::size_t count = 1 + rng() % 12;
    for (std::size_t t = 0; t < count; ++t) {
      std::string p = "<|";
      const std::size_t len = rng() % 10;
      for (std::size_t k = 0; k < len; ++k) p += alphabet[rng() % alphabet.size()];
      patterns.push_back(p + (rng() % 2 ? "|>" : ""));
    }
    std::string text;
    const std::size_t pieces = rng() % 30;
    for (std::size_t k = 0; k < pieces; ++k) {
      if (rng() % 3 == 0) {
        const std::string& p = patterns[rng() % patterns.size()];
        text += p.substr(0, rng() % 4 == 0 ? rng() % (p.size() + 1) : p.size());
      } else {
        text += alphabet[rng() % alphabet.size()];
      }
    }
    ASSERT_EQ(matcher_matches(patterns, text), naive_matches(patterns, text))
        << "round " << round << " text " << text;
  }
}

}  // namespace
}  // namespace prefixgate::canon::internal
