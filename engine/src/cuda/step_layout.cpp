#include "step_layout.h"

#include <algorithm>

#include "prefixgate/kernels/params.h"

namespace prefixgate::engine {

StepLayout plan_step(std::span<const SequenceStep> batch, std::size_t page_tokens,
                     std::size_t quantum) {
  StepLayout l;
  for (const SequenceStep& step : batch) {
    const std::size_t pages =
        (step.start_position + step.tokens.size() + page_tokens - 1) / page_tokens;
    l.tokens += step.tokens.size();
    if (step.tokens.size() == 1) {
      ++l.decodes;
      l.decode_width = std::max(l.decode_width, (pages + quantum - 1) / quantum * quantum);
    } else {
      ++l.prefills;
      l.prefill_width = std::max(l.prefill_width, pages);
      l.tiles += (step.tokens.size() + kernels::kPrefillQueryTile - 1) / kernels::kPrefillQueryTile;
    }
    if (step.sample) ++l.sampled;
  }
  std::size_t at = 0;
  const auto place = [&](std::size_t& field, std::size_t bytes) {
    at = (at + 15) / 16 * 16;
    field = at;
    at += bytes;
  };
  place(l.slots, l.tokens * 8);
  place(l.token_ids, l.tokens * 4);
  place(l.positions, l.tokens * 4);
  place(l.sample_rows, l.sampled * 4);
  place(l.d_rows, l.decodes * 4);
  place(l.d_lens, l.decodes * 4);
  place(l.d_table, l.decodes * l.decode_width * 4);
  place(l.p_start, l.prefills * 4);
  place(l.p_new, l.prefills * 4);
  place(l.p_pos, l.prefills * 4);
  place(l.p_table, l.prefills * l.prefill_width * 4);
  place(l.p_tiles, l.tiles * 2 * 4);
  l.bytes = at;
  return l;
}

void write_step(std::span<const SequenceStep> batch, std::size_t page_tokens, const StepLayout& l,
                std::uint8_t* base) {
  const auto i32 = [&](std::size_t offset) {
    return reinterpret_cast<std::int32_t*>(base + offset);
  };
  auto* slots = reinterpret_cast<std::int64_t*>(base + l.slots);
  std::int32_t* ids = i32(l.token_ids);
  std::int32_t* positions = i32(l.positions);
  std::int32_t* sample_rows = i32(l.sample_rows);
  std::size_t row = 0, d = 0, p = 0, tile = 0, s = 0;
  for (const SequenceStep& step : batch) {
    const std::size_t n = step.tokens.size();
    const std::size_t end = step.start_position + n;
    const std::size_t pages = (end + page_tokens - 1) / page_tokens;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t pos = step.start_position + i;
      ids[row + i] = static_cast<std::int32_t>(step.tokens[i]);
      positions[row + i] = static_cast<std::int32_t>(pos);
      slots[row + i] = static_cast<std::int64_t>(step.pages[pos / page_tokens]) *
                           static_cast<std::int64_t>(page_tokens) +
                       static_cast<std::int64_t>(pos % page_tokens);
    }
    if (n == 1) {
      i32(l.d_rows)[d] = static_cast<std::int32_t>(row);
      i32(l.d_lens)[d] = static_cast<std::int32_t>(end);
      std::int32_t* table = i32(l.d_table) + d * l.decode_width;
      for (std::size_t j = 0; j < pages; ++j) table[j] = static_cast<std::int32_t>(step.pages[j]);
      ++d;
    } else {
      i32(l.p_start)[p] = static_cast<std::int32_t>(row);
      i32(l.p_new)[p] = static_cast<std::int32_t>(n);
      i32(l.p_pos)[p] = static_cast<std::int32_t>(step.start_position);
      std::int32_t* table = i32(l.p_table) + p * l.prefill_width;
      for (std::size_t j = 0; j < pages; ++j) table[j] = static_cast<std::int32_t>(step.pages[j]);
      for (std::size_t t = 0; t < n; t += kernels::kPrefillQueryTile) {
        i32(l.p_tiles)[2 * tile] = static_cast<std::int32_t>(p);
        i32(l.p_tiles)[2 * tile + 1] = static_cast<std::int32_t>(t);
        ++tile;
      }
      ++p;
    }
    row += n;
    if (step.sample) sample_rows[s++] = static_cast<std::int32_t>(row - 1);
  }
}

}  // namespace prefixgate::engine
