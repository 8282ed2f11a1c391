// Mooncake-format traces (kvcache-ai/Mooncake, FAST25-release/traces): one JSON object per
// line, `timestamp` (ms since the trace's start), `input_length` and `output_length` (tokens),
// `hash_ids` (one id per 512-token block of the prompt; equal ids are identical blocks).
//
// Replay turns each hash id into a fixed block of token ids (drawn from a generator seeded by
// the id, in the byte tokenizer's ordinary range 0..255), so two requests share exactly the
// blocks the trace says they share, and sends the prompt as token ids (/v1/completions with
// `prompt` an int array). `length_scale` shrinks blocks and lengths alike (0.0625: 32-token
// blocks), `time_scale` multiplies timestamps (0.1 replays ten times faster).
//
//   auto trace = bench::parse_trace(text);          // Result<std::vector<TraceRecord>>
//   bench::Workload w = bench::make_trace_workload(*trace, {.length_scale = 0.0625});
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/base/status.h"
#include "prefixgate/canonicalize/tokenizer.h"
#include "workload.h"

namespace prefixgate::bench {

struct TraceRecord {
  double timestamp_ms = 0;
  std::size_t input_length = 0;
  std::size_t output_length = 0;
  std::vector<std::uint64_t> hash_ids;
};

// Errors name the line: "line 3: hash_ids: expected an array of non-negative integers".
Result<std::vector<TraceRecord>> parse_trace(std::string_view jsonl);

struct TraceOptions {
  std::size_t trace_block_tokens = 512;  // the trace's block size (Mooncake: 512)
  double length_scale = 1.0;
  double time_scale = 1.0;
  std::size_t max_output_len = 0;  // 0: the trace's output lengths; else capped to this
  std::string model = "builtin:tiny";
};

// The scaled block size: max(1, round(trace_block_tokens * length_scale)).
std::size_t scaled_block_tokens(const TraceOptions& o);
// The token ids of one request's prompt (scaled), and of the block a hash id stands for.
std::vector<canon::TokenId> trace_prompt(const TraceRecord& r, const TraceOptions& o,
                                         std::uint64_t seed);

Workload make_trace_workload(const std::vector<TraceRecord>& records, const TraceOptions& o,
                             std::uint64_t seed);

}  // namespace prefixgate::bench
