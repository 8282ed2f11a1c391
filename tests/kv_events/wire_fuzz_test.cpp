// The decoder on hostile input: random bytes, every truncation of valid batches, and valid
// batches with bytes flipped, inserted and removed. It must answer every one with a batch or a
// typed error (under ASan and UBSan too): no crash, no exception, no unbounded allocation.
#include <gtest/gtest.h>

#include <random>

#include "prefixgate/kv_events/wire.h"
#include "support/vllm_wire.h"

namespace prefixgate::kv_events {
namespace {

namespace vw = testing::vllm_wire;

std::vector<std::string> valid_batches() {
  std::vector<std::uint32_t> tokens(48);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::uint32_t>(i * 7);
  const std::vector<vw::Event> events{vw::Stored{{1, 2, 3}, std::nullopt, tokens, 16, "GPU", "s"},
                                      vw::Stored{{4}, 3, {1, 2, 3, 4}, 4, "CPU"},
                                      vw::Removed{{2, 3}, "GPU"}, vw::Cleared{}};
  std::vector<std::string> out;
  for (vw::Form form : {vw::Form::kMap, vw::Form::kArray}) {
    for (vw::Hashes hashes : {vw::Hashes::kInteger, vw::Hashes::kBytes}) {
      out.push_back(vw::encode(
          events,
          {.form = form, .hashes = hashes, .rank = 2, .unknown_fields = form == vw::Form::kMap}));
    }
  }
  EventBatch own;
  BlockStored stored;
  stored.block_hashes = {9, 10};
  stored.token_ids.assign(tokens.begin(), tokens.begin() + 32);
  stored.block_size = 16;
  stored.cache_salt = "x";
  own.events.push_back(std::move(stored));
  out.push_back(encode_event_batch(own));
  out.push_back(encode_event_batch(own, WireForm::kArray));
  return out;
}

// Decodes and checks the answer is coherent; returns whether it was a batch.
bool decodes(std::string_view bytes) {
  auto r = decode_event_batch(bytes);
  if (!r.ok()) {
    EXPECT_FALSE(r.error().message.empty());
    return false;
  }
  for (const Event& e : r->events) {
    if (const auto* s = std::get_if<BlockStored>(&e)) {
      EXPECT_LE(s->block_size, 1U << 20);
    }
  }
  return true;
}

TEST(WireFuzzTest, EveryTruncationOfAValidBatchIsRefused) {
  for (const std::string& batch : valid_batches()) {
    ASSERT_TRUE(decodes(batch));
    for (std::size_t n = 0; n < batch.size(); ++n) {
      EXPECT_FALSE(decodes(std::string_view(batch).substr(0, n))) << "prefix of " << n << " bytes";
    }
  }
}

TEST(WireFuzzTest, RandomBytesNeverCrashTheDecoder) {
  std::mt19937_64 rng(20240611);
  std::size_t accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string bytes(rng() % 64, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    // Bias towards the shapes a batch starts with, so the decoder gets past the first byte.
    if (!bytes.empty() && rng() % 2 == 0) bytes[0] = static_cast<char>(rng() % 2 ? 0x92 : 0x82);
    accepted += decodes(bytes) ? 1 : 0;
  }
  // Some random inputs are well-formed batches ([number, []]); most are not.
  EXPECT_LT(accepted, 20000U);
}

TEST(WireFuzzTest, MutatedBatchesNeverCrashTheDecoder) {
  std::mt19937_64 rng(7);
  std::size_t refused = 0, total = 0;
  for (const std::string& batch : valid_batches()) {
    for (int i = 0; i < 3000; ++i) {
      std::string m = batch;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < edits && !m.empty(); ++k) {
        const std::size_t at = rng() % m.size();
        switch (rng() % 4) {
          case 0: m[at] = static_cast<char>(rng()); break;                       // overwrite
          case 1: m[at] = static_cast<char>(m[at] ^ (1 << (rng() % 8))); break;  // flip a bit
          case 2: m.insert(at, 1, static_cast<char>(rng())); break;              // insert
          default: m.erase(at, 1); break;                                        // delete
        }
      }
      // Lengths that claim the most: a 32-bit array or map count at a random place.
      if (rng() % 8 == 0 && m.size() > 5) {
        const std::size_t at = rng() % (m.size() - 5);
        m[at] = static_cast<char>(rng() % 2 ? 0xdd : 0xdf);
        for (int b = 1; b <= 4; ++b) m[at + static_cast<std::size_t>(b)] = '\xff';
      }
      ++total;
      refused += decodes(m) ? 0 : 1;
    }
  }
  EXPECT_GT(refused, total / 4);  // the mutations do reach the error paths
}

}  // namespace
}  // namespace prefixgate::kv_events
