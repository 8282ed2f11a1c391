// The wire format of vLLM's and SGLang's KV-event streams, decoded and encoded.
//
// A ZeroMQ PUB socket sends each batch as three frames: [topic, sequence, payload], where the
// sequence is 8 bytes big-endian (numbered from 0 by the publisher) and the payload is a
// msgpack-encoded event batch. A ROUTER socket answers replay requests: a DEALER or REQ client
// sends the first sequence it wants (8 bytes big-endian) and receives [sequence, payload] for
// every buffered batch from there, then [-1, empty] (kEndOfReplay).
//
// Two msgpack encodings are in use (msgspec structs with and without array_like):
//   array form  batch [ts, [event...], rank?], event [tag, field...] (fields by position;
//               trailing fields at their default left out)   vLLM until 0.10, SGLang
//   map form    batch {"ts", "events", "data_parallel_rank"?}, event {"type": tag, field: ...}
//               (fields at their default left out)            vLLM since
// with tags "BlockStored", "BlockRemoved" and "AllBlocksCleared". Both decode to the same
// EventBatch; unknown fields are ignored and unknown event types skipped (counted).
//
//   auto batch = kv_events::decode_event_batch(payload);        // never throws
//   if (!batch) count_and_skip(batch.error().message);
//   std::string bytes = kv_events::encode_event_batch(*batch);  // map form, integer hashes
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "prefixgate/base/status.h"
#include "prefixgate/kv_events/events.h"

namespace prefixgate::kv_events {

// Decodes one payload. Any byte string is accepted as input: what is not a well-formed batch is
// a kInvalidValue error naming what is wrong; nothing throws, aborts or allocates more than a
// small multiple of the payload's size.
Result<EventBatch> decode_event_batch(std::span<const std::uint8_t> payload);
inline Result<EventBatch> decode_event_batch(std::string_view payload) {
  return decode_event_batch(
      std::span(reinterpret_cast<const std::uint8_t*>(payload.data()), payload.size()));
}

enum class WireForm { kMap, kArray };

// Encodes a batch as vLLM does: map form by default, hashes as integers, defaults left out.
std::string encode_event_batch(const EventBatch& batch, WireForm form = WireForm::kMap);

// The 8-byte big-endian sequence frame.
std::string encode_sequence(std::int64_t seq);
// nullopt unless `frame` is exactly 8 bytes.
std::optional<std::int64_t> decode_sequence(std::string_view frame);

// Folds a digest (vLLM's 32-byte block hash) into an EngineHash.
EngineHash fold_digest(std::span<const std::uint8_t> digest);

// The endpoint of data-parallel rank `rank` given rank 0's: vLLM and SGLang add the rank to a
// tcp:// port and append "_dp<rank>" to an inproc:// name. nullopt when `endpoint` has neither.
std::optional<std::string> endpoint_for_rank(std::string_view endpoint, std::size_t rank);

}  // namespace prefixgate::kv_events
