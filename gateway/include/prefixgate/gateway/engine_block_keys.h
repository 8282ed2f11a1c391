// What one engine's KV events say about prefixgate's own block keys.
//
// vLLM and SGLang name their blocks with their own hashes (a seeded sha256, Python's hash(), a
// per-process seed): nothing the gateway can compute from a prompt. But every BlockStored carries
// the blocks' token ids, and the chain it continues (its parent's hash). So the keys are
// recomputed here with the function the gateway applies to a request's tokens,
// canon::chain_block_hash from canon::block_hash_root(model_id, cache_salt), and a bounded map
// remembers, per engine hash, where the chain stands after that block (our parent key and the
// tokens of an unfinished block of ours) and which of our keys it is part of. Then:
//   - a BlockStored continuing a known chain extends it; one whose parent is unknown (stored
//     before the gateway was listening and not replayed) cannot be placed and is skipped;
//   - a BlockRemoved finds our keys by the engine's hash, without tokens;
//   - a BlockStored of a known hash on another medium (vLLM's CPU offloading sends no tokens)
//     finds them the same way.
// The engine's block size E and ours G may differ either way: our key k covers tokens
// [k*G, (k+1)*G) of the chain, and is held while every engine block holding one of those tokens
// is (so a key spans several engine blocks when E < G, and an engine block holds several keys
// when E > G). A key is kPrimary when every part is in the engine's device cache, kOffload when
// every part is held somewhere but some only on a lower tier, else kAbsent.
//
// Plain data structure, no threads or I/O; one per engine (per data-parallel rank).
//
//   gateway::EngineBlockKeys keys({.model_id = "llama-3-8b", .block_size = 16});
//   std::vector<gateway::KeyChange> changes;
//   keys.stored(block_stored_event, changes);   // changes: our keys now held, and where
//   keys.removed(block_removed_event, changes);
#pragma once

#include <boost/container/small_vector.hpp>
#include <boost/unordered/unordered_flat_map.hpp>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "prefixgate/gateway/prefix_index.h"
#include "prefixgate/kv_events/events.h"

namespace prefixgate::gateway {

// KeyState and KeyChange (where a replica holds one of our block keys) are the index's
// vocabulary: prefix_index.h.

struct BlockKeysConfig {
  std::string model_id = "builtin:tiny";  // seeds the root, as the gateway's model entry does
  std::size_t block_size = 16;            // ours (G)
  // Engine blocks remembered, least recently stored first out. A block forgotten while still
  // cached makes its keys absent: the index never holds what the map cannot take back.
  std::size_t max_blocks = std::size_t{1} << 18;
};

// Why blocks of a BlockStored were not placed (cumulative).
struct BlockKeysSkips {
  std::uint64_t unknown_parent = 0;  // the chain it continues was never seen
  std::uint64_t lora = 0;            // stored for a LoRA adapter: other keys than a prompt's
  std::uint64_t other_group = 0;     // a KV-cache group other than the full-attention one
  std::uint64_t bad_tokens = 0;      // token ids that do not split into the blocks
};

class EngineBlockKeys {
 public:
  explicit EngineBlockKeys(BlockKeysConfig config);

  // Each appends the keys whose state changed to `out`, in the order they changed.
  void stored(const kv_events::BlockStored& event, std::vector<KeyChange>& out);
  void removed(const kv_events::BlockRemoved& event, std::vector<KeyChange>& out);
  // Every key absent; what each engine hash means is kept, so blocks stored or removed later
  // are still placed (AllBlocksCleared, or events lost in a gap).
  void cleared(std::vector<KeyChange>& out);
  // Every key absent and every engine hash forgotten (the engine restarted).
  void reset(std::vector<KeyChange>& out);

  std::size_t tracked_blocks() const { return places_.size(); }
  std::size_t held_keys() const;  // keys not absent
  const BlockKeysSkips& skips() const { return skips_; }

 private:
  // Blocks live in one array, found by the engine's hash through a flat map, and linked in
  // recency order by their places in it: a node per block in a hash map and a list, with a
  // vector or two each, was most of what following a vLLM replica cost (about 750 ns a block,
  // gateway_bench BM_VllmEventBatch).
  using Place = std::uint32_t;
  static constexpr Place kNone = ~Place{0};

  // Where a chain stands after a block: our last full key, and the tokens (and the engine
  // blocks they came from) of our next, unfinished block: none when the engine's blocks are a
  // multiple of ours.
  struct Chain {
    std::uint64_t parent_key = 0;
    std::vector<std::uint32_t> partial;
    std::vector<kv_events::EngineHash> partial_from;
  };
  struct Block {
    kv_events::EngineHash hash = 0;
    std::uint8_t media = 0;  // kGpuBit | kOffloadBit
    Chain after;
    // Our keys this block holds tokens of: one when the engine's blocks are ours, E / G + 1 at
    // most when larger.
    boost::container::small_vector<std::uint64_t, 2> keys;
    Place newer = kNone, older = kNone;  // the recency list
  };
  struct Key {
    // The engine blocks holding its tokens: one when the engine's blocks are ours or larger.
    boost::container::small_vector<kv_events::EngineHash, 2> parts;
    KeyState reported = KeyState::kAbsent;
  };

  // A new block's place, linked as the most recent, with its keys and the chain after it; the
  // chain before it is `root`, or when that is null the one after the block at `at`.
  Place add_block(kv_events::EngineHash hash, const Chain* root, Place at,
                  std::span<const std::uint32_t> tokens);
  void set_media(Place place, std::uint8_t media, std::vector<KeyChange>& out);
  // `known`: a block whose media just changed, read directly if it is one of the key's parts.
  void refresh_key(std::uint64_t key, std::vector<KeyChange>& out, const Block* known = nullptr);
  void forget_oldest(std::vector<KeyChange>& out);
  std::uint8_t media_of(kv_events::EngineHash hash) const;
  void unlink(Place place);
  void link_newest(Place place);
  void link_oldest(Place place);

  BlockKeysConfig config_;
  boost::unordered_flat_map<kv_events::EngineHash, Place> places_;
  std::vector<Block> blocks_;  // by place; a forgotten block's place is reused
  std::vector<Place> free_;
  Place newest_ = kNone, oldest_ = kNone;  // stored most recently; removed blocks go oldest
  boost::unordered_flat_map<std::uint64_t, Key> keys_;
  std::vector<std::uint32_t> scratch_;  // add_block's tokens
  BlockKeysSkips skips_;
};

}  // namespace prefixgate::gateway
