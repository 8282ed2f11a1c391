// encode_event_batch: what a vLLM publisher sends, so that routers built for vLLM (and
// prefixgate's own gateway) can follow prefixgate-engine. Required fields are always written
// (nil when unset), optional ones only when they differ from their default, as msgspec does with
// omit_defaults.
#include <cstring>
#include <msgpack.hpp>
#include <type_traits>

#include "prefixgate/kv_events/wire.h"

namespace prefixgate::kv_events {
namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

void pack_str(Packer& p, std::string_view s) {
  p.pack_str(static_cast<std::uint32_t>(s.size()));
  p.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
}

// A float64 always, as msgspec writes a Python float. msgpack-c++'s pack_double writes an integral
// double as an integer instead, and converts 2^64 to uint64_t on the way (undefined behaviour).
void pack_float64(msgpack::sbuffer& out, double d) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &d, sizeof bits);
  char bytes[9] = {static_cast<char>(0xcb)};
  for (int i = 0; i < 8; ++i) bytes[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
  out.write(bytes, sizeof bytes);
}

void pack_medium(Packer& p, Medium m) {
  pack_str(p, m == Medium::kGpu ? "GPU" : "CPU");
}

void pack_hashes(Packer& p, const std::vector<EngineHash>& hashes) {
  p.pack_array(static_cast<std::uint32_t>(hashes.size()));
  for (EngineHash h : hashes) p.pack_uint64(h);
}

// extra_keys: [[salt], nil, nil, ...] for a chain that starts at the root with a cache salt.
void pack_extra_keys(Packer& p, const BlockStored& e) {
  p.pack_array(static_cast<std::uint32_t>(e.block_hashes.size()));
  for (std::size_t i = 0; i < e.block_hashes.size(); ++i) {
    if (i == 0) {
      p.pack_array(1);
      pack_str(p, e.cache_salt);
    } else {
      p.pack_nil();
    }
  }
}

bool has_extra_keys(const BlockStored& e) {
  return !e.parent && !e.cache_salt.empty() && !e.block_hashes.empty();
}

void pack_stored(Packer& p, const BlockStored& e, WireForm form) {
  const bool extra = has_extra_keys(e);
  const bool group = e.group != 0;
  if (form == WireForm::kArray) {
    // [tag, block_hashes, parent, token_ids, block_size, lora_id, medium, lora_name, extra_keys,
    //  group_idx], trailing defaults left out.
    const std::uint32_t n = group ? 10 : extra ? 9 : 7;
    p.pack_array(n);
    pack_str(p, "BlockStored");
  } else {
    p.pack_map(8 + (extra ? 1 : 0) + (group ? 1 : 0));
    pack_str(p, "type");
    pack_str(p, "BlockStored");
  }
  const bool map = form == WireForm::kMap;
  if (map) pack_str(p, "block_hashes");
  pack_hashes(p, e.block_hashes);
  if (map) pack_str(p, "parent_block_hash");
  if (e.parent) {
    p.pack_uint64(*e.parent);
  } else {
    p.pack_nil();
  }
  if (map) pack_str(p, "token_ids");
  p.pack_array(static_cast<std::uint32_t>(e.token_ids.size()));
  for (std::uint32_t t : e.token_ids) p.pack_uint32(t);
  if (map) pack_str(p, "block_size");
  p.pack_uint64(e.block_size);
  if (map) pack_str(p, "lora_id");
  p.pack_nil();
  if (map) pack_str(p, "medium");
  pack_medium(p, e.medium);
  if (map || extra || group) {
    if (map) pack_str(p, "lora_name");
    p.pack_nil();
  }
  if (extra || (group && !map)) {
    if (map) pack_str(p, "extra_keys");
    if (extra) {
      pack_extra_keys(p, e);
    } else {
      p.pack_nil();
    }
  }
  if (group) {
    if (map) pack_str(p, "group_idx");
    p.pack_uint32(e.group);
  }
}

void pack_removed(Packer& p, const BlockRemoved& e, WireForm form) {
  const bool group = e.group != 0;
  if (form == WireForm::kArray) {
    p.pack_array(group ? 4 : 3);
    pack_str(p, "BlockRemoved");
    pack_hashes(p, e.block_hashes);
    pack_medium(p, e.medium);
    if (group) p.pack_uint32(e.group);
    return;
  }
  p.pack_map(group ? 4 : 3);
  pack_str(p, "type");
  pack_str(p, "BlockRemoved");
  pack_str(p, "block_hashes");
  pack_hashes(p, e.block_hashes);
  pack_str(p, "medium");
  pack_medium(p, e.medium);
  if (group) {
    pack_str(p, "group_idx");
    p.pack_uint32(e.group);
  }
}

void pack_cleared(Packer& p, WireForm form) {
  if (form == WireForm::kArray) {
    p.pack_array(1);
  } else {
    p.pack_map(1);
    pack_str(p, "type");
  }
  pack_str(p, "AllBlocksCleared");
}

}  // namespace

std::string encode_event_batch(const EventBatch& batch, WireForm form) {
  msgpack::sbuffer buffer;
  Packer p(buffer);
  const bool rank = batch.data_parallel_rank.has_value();
  if (form == WireForm::kArray) {
    p.pack_array(rank ? 3 : 2);
  } else {
    p.pack_map(rank ? 3 : 2);
    pack_str(p, "ts");
  }
  pack_float64(buffer, batch.ts);
  if (form == WireForm::kMap) pack_str(p, "events");
  p.pack_array(static_cast<std::uint32_t>(batch.events.size()));
  for (const Event& event : batch.events) {
    std::visit(
        [&](const auto& e) {
          using T = std::decay_t<decltype(e)>;
          if constexpr (std::is_same_v<T, BlockStored>) {
            pack_stored(p, e, form);
          } else if constexpr (std::is_same_v<T, BlockRemoved>) {
            pack_removed(p, e, form);
          } else {
            pack_cleared(p, form);
          }
        },
        event);
  }
  if (rank) {
    if (form == WireForm::kMap) pack_str(p, "data_parallel_rank");
    p.pack_int64(*batch.data_parallel_rank);
  }
  return std::string(buffer.data(), buffer.size());
}

}  // namespace prefixgate::kv_events
