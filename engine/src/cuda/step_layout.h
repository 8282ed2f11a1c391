// The metadata of one cuda-device step, laid out in one host staging area and uploaded in one
// copy: token ids, positions and KV slots of every new token, and for the attention kernels the
// decode steps (1 new token) and prefill steps (chunks) with their page tables. Pure host code.
//
//   StepLayout l = plan_step(batch, 16);
//   write_step(batch, 16, l, staging);   // staging: l.bytes bytes
//   // device pointers: meta + l.token_ids, meta + l.d_table, ...
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "prefixgate/engine/device.h"

namespace prefixgate::engine {

// Decode page tables are padded to a multiple of this many pages by default (1,024 tokens at 16
// per page), so that a decode step's shape, and its CUDA graph, change rarely as contexts grow.
inline constexpr std::size_t kDecodeWidthQuantum = 64;

struct StepLayout {
  // Byte offsets in the staging area, each 16-byte aligned:
  //   slots int64 [T], token_ids, positions int32 [T], sample_rows int32 [sampled] (the row of
  //   each sampled step's last token); decode: d_rows, d_lens int32 [decodes], d_table int32
  //   [decodes, decode_width]; prefill: p_start, p_new, p_pos int32 [prefills], p_table int32
  //   [prefills, prefill_width], p_tiles int32 [tiles, 2] (step, first token of the tile).
  std::size_t token_ids = 0, positions = 0, slots = 0, sample_rows = 0;
  std::size_t d_rows = 0, d_lens = 0, d_table = 0;
  std::size_t p_start = 0, p_new = 0, p_pos = 0, p_table = 0, p_tiles = 0;
  std::size_t bytes = 0;
  // Counts: new tokens, 1-token (decode) steps, chunk (prefill) steps, prefill query tiles,
  // sampled steps; page-table widths (decode padded to a multiple of the quantum).
  std::size_t tokens = 0, decodes = 0, prefills = 0, tiles = 0, sampled = 0;
  std::size_t decode_width = 1, prefill_width = 1;
};

StepLayout plan_step(std::span<const SequenceStep> batch, std::size_t page_tokens,
                     std::size_t decode_width_quantum = kDecodeWidthQuantum);
// Fills `staging` (layout.bytes bytes) for `batch`, which plan_step() planned. Padding entries of
// the decode tables are left as they are: kernels read a sequence's table only up to its length.
void write_step(std::span<const SequenceStep> batch, std::size_t page_tokens,
                const StepLayout& layout, std::uint8_t* staging);

}  // namespace prefixgate::engine
