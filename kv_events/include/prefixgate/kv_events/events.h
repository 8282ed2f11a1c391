// KV-cache events as vLLM and SGLang publish them (vllm/distributed/kv_events.py,
// sglang/srt/disaggregation/kv_events.py), typed: what an engine stored in, removed from or
// cleared out of its prefix cache, in batches numbered by the publisher.
//
// An engine names its blocks with its own hashes (vLLM: a 32-byte sha256 digest or a 64-bit
// integer; SGLang: a 64-bit integer). They are folded here into one 64-bit EngineHash so they can
// key a map; they are never compared with prefixgate's own block keys, which a consumer
// recomputes from `token_ids` (canonicalize/'s block_hash.h).
//
//   kv_events::EventBatch batch = *kv_events::decode_event_batch(payload);   // wire.h
//   for (const kv_events::Event& e : batch.events) {
//     if (auto* stored = std::get_if<kv_events::BlockStored>(&e)) ...
//   }
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace prefixgate::kv_events {

// An engine's block hash: a 64-bit integer as sent (a negative one as its two's complement), or a
// digest folded to 64 bits (XXH3 of its bytes).
using EngineHash = std::uint64_t;

// Where a block lives. vLLM says "GPU" (or nothing) for its device cache and "CPU" for blocks
// offloaded to host memory; SGLang says "GPU", "CPU_PINNED", "DISK" or "EXTERNAL". Every tier but
// the device's is kOffload: a hit there still saves prefill, but costs a load first.
enum class Medium : std::uint8_t { kGpu, kOffload };

struct BlockStored {
  std::vector<EngineHash> block_hashes = {};  // one per block, parent first
  std::optional<EngineHash> parent = {};      // the block before the first; none: the chain's root
  std::vector<std::uint32_t> token_ids = {};  // every block's tokens, concatenated (may be empty)
  std::size_t block_size = 0;                 // tokens per block
  Medium medium = Medium::kGpu;
  bool lora = false;            // stored for a LoRA adapter (lora_id or lora_name set)
  std::string cache_salt = {};  // the request's cache_salt, when the first block carries it
  std::uint32_t group = 0;      // the KV-cache group (vLLM's group_idx; 0 = the full-attention one)

  bool operator==(const BlockStored&) const = default;
};

struct BlockRemoved {
  std::vector<EngineHash> block_hashes = {};
  Medium medium = Medium::kGpu;
  std::uint32_t group = 0;

  bool operator==(const BlockRemoved&) const = default;
};

struct AllBlocksCleared {
  bool operator==(const AllBlocksCleared&) const = default;
};

using Event = std::variant<BlockStored, BlockRemoved, AllBlocksCleared>;

struct EventBatch {
  double ts = 0;  // the publisher's wall clock, seconds
  std::vector<Event> events = {};
  std::optional<std::int64_t> data_parallel_rank = {};
  std::size_t unknown_events = 0;  // events of a type this decoder does not know, skipped
};

// The replay socket's end-of-replay sequence number (-1 as 8 bytes big-endian).
inline constexpr std::int64_t kEndOfReplay = -1;

}  // namespace prefixgate::kv_events
