// The common KV-event batches decoded by a cursor over their msgpack bytes, without msgpack-c++'s
// object tree: the tree is an object for every value (a BlockStored of 16 blocks of 16 tokens is
// over 270), and building it was about 1,000 instructions a block, more than half of what
// following a vLLM replica cost (gateway_bench BM_VllmEventBatch).
//
// It decodes only what it can decode exactly as the tree's reading does (wire_decode.cpp): both
// forms, integer and byte hashes, and the fields vLLM and SGLang send for a batch without LoRA
// names or SGLang's metadata; unknown fields and event types skipped as the tree's reading skips
// them. Anything else (another value type where a field is read, a duplicate name, a value the
// tree's reading refuses, a payload nested deeper than a batch is) returns nullopt, and the tree
// decodes it, errors included, so the two cannot disagree (tests/kv_events/wire_scan_test.cpp and
// the fuzz_kv_events program compare them).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "prefixgate/base/status.h"
#include "prefixgate/kv_events/events.h"

namespace prefixgate::kv_events::internal {

std::optional<EventBatch> scan_event_batch(std::span<const std::uint8_t> payload);

// The same decoding through msgpack-c++'s object tree for every payload: what
// decode_event_batch answers, at its cost (what it falls back to; the tests compare the two).
Result<EventBatch> decode_event_batch_tree(std::span<const std::uint8_t> payload);

}  // namespace prefixgate::kv_events::internal
