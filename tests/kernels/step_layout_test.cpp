// The cuda device's step metadata (engine/src/cuda/step_layout.h): what the kernels read for a
// mixed batch, decode tables padded to whole quanta, and every offset aligned.
#include "cuda/step_layout.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "prefixgate/kernels/params.h"

namespace prefixgate::engine {
namespace {

using canon::TokenId;

TEST(StepLayoutTest, MixedBatchLaysOutWhatTheKernelsRead) {
  const SamplingParams greedy{.temperature = 0};
  const std::vector<TokenId> decode_token = {7};
  std::vector<TokenId> chunk(70);
  for (std::size_t i = 0; i < chunk.size(); ++i) chunk[i] = static_cast<TokenId>(100 + i);
  const std::vector<PageId> decode_pages = {9, 4, 2};          // position 40 -> page 2, slot 8
  const std::vector<PageId> chunk_pages = {5, 6, 7, 8, 1, 3};  // positions 10..79
  const std::vector<SequenceStep> batch = {
      {.tokens = decode_token,
       .start_position = 40,
       .pages = decode_pages,
       .sample = true,
       .sampling = &greedy},
      {.tokens = chunk, .start_position = 10, .pages = chunk_pages, .sample = false},
  };
  const StepLayout l = plan_step(batch, 16);
  EXPECT_EQ(l.tokens, 71u);
  EXPECT_EQ(l.decodes, 1u);
  EXPECT_EQ(l.prefills, 1u);
  EXPECT_EQ(l.sampled, 1u);
  EXPECT_EQ(l.decode_width, kDecodeWidthQuantum);  // 3 pages, padded
  EXPECT_EQ(l.prefill_width, 5u);                  // positions up to 79: 5 pages
  EXPECT_EQ(l.tiles, 2u);                          // 70 tokens in tiles of 64
  for (std::size_t offset : {l.slots, l.token_ids, l.positions, l.sample_rows, l.d_rows, l.d_lens,
                             l.d_table, l.p_start, l.p_new, l.p_pos, l.p_table, l.p_tiles}) {
    EXPECT_EQ(offset % 16, 0u);
    EXPECT_LE(offset, l.bytes);
  }

  std::vector<std::uint8_t> staging(l.bytes, 0xee);
  write_step(batch, 16, l, staging.data());
  const auto i32 = [&](std::size_t offset, std::size_t i) {
    std::int32_t v;
    std::memcpy(&v, staging.data() + offset + 4 * i, 4);
    return v;
  };
  const auto i64 = [&](std::size_t offset, std::size_t i) {
    std::int64_t v;
    std::memcpy(&v, staging.data() + offset + 8 * i, 8);
    return v;
  };
  // Row 0: the decode token at position 40; rows 1..70: the chunk at positions 10..79.
  EXPECT_EQ(i32(l.token_ids, 0), 7);
  EXPECT_EQ(i32(l.positions, 0), 40);
  EXPECT_EQ(i64(l.slots, 0), 2 * 16 + 8);
  EXPECT_EQ(i32(l.token_ids, 70), 169);
  EXPECT_EQ(i32(l.positions, 1), 10);
  EXPECT_EQ(i64(l.slots, 1), 5 * 16 + 10);
  EXPECT_EQ(i64(l.slots, 70), 1 * 16 + 15);  // position 79
  EXPECT_EQ(i32(l.sample_rows, 0), 0);
  EXPECT_EQ(i32(l.d_rows, 0), 0);
  EXPECT_EQ(i32(l.d_lens, 0), 41);
  EXPECT_EQ(i32(l.d_table, 0), 9);
  EXPECT_EQ(i32(l.d_table, 2), 2);
  EXPECT_EQ(i32(l.p_start, 0), 1);
  EXPECT_EQ(i32(l.p_new, 0), 70);
  EXPECT_EQ(i32(l.p_pos, 0), 10);
  EXPECT_EQ(i32(l.p_table, 4), 1);
  EXPECT_EQ(i32(l.p_tiles, 0), 0);
  EXPECT_EQ(i32(l.p_tiles, 1), 0);
  EXPECT_EQ(i32(l.p_tiles, 2), 0);
  EXPECT_EQ(i32(l.p_tiles, 3), kernels::kPrefillQueryTile);
}

TEST(StepLayoutTest, DecodeWidthChangesOnlyAtQuantumBoundaries) {
  const SamplingParams greedy{.temperature = 0};
  const std::vector<TokenId> token = {1};
  std::vector<PageId> pages(200, 0);
  std::size_t widths_seen = 0, last = 0;
  for (std::size_t position = 0; position < 2048; ++position) {
    const std::vector<SequenceStep> batch = {{.tokens = token,
                                              .start_position = position,
                                              .pages = pages,
                                              .sample = true,
                                              .sampling = &greedy}};
    const StepLayout l = plan_step(batch, 16);
    if (l.decode_width != last) ++widths_seen;
    last = l.decode_width;
  }
  EXPECT_EQ(widths_seen, 2u);  // 64 pages up to 1,024 tokens, then 128
}

}  // namespace
}  // namespace prefixgate::engine
