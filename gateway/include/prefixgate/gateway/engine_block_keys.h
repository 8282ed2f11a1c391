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

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <string>
#include <unordered_map>
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

  std::size_t tracked_blocks() const { return blocks_.size(); }
  std::size_t held_keys() const;  // keys not absent
  const BlockKeysSkips& skips() const { return skips_; }

 private:
  // Where a chain stands after a block: our last full key, and the tokens (and the engine
  // blocks they came from) of our next, unfinished block.
  struct Chain {
    std::uint64_t parent_key = 0;
    std::vector<std::uint32_t> partial;
    std::vector<kv_events::EngineHash> partial_from;
  };
  struct Block {
    std::uint8_t media = 0;  // kGpuBit | kOffloadBit
    Chain after;
    std::vector<std::uint64_t> keys;  // our keys this block holds tokens of
    std::list<kv_events::EngineHash>::iterator lru;
  };
  struct Key {
    std::vector<kv_events::EngineHash> parts;  // the engine blocks holding its tokens
    KeyState reported = KeyState::kAbsent;
  };

  Block& add_block(kv_events::EngineHash hash, const Chain& before,
                   std::span<const std::uint32_t> tokens);
  void set_media(Block& block, std::uint8_t media, std::vector<KeyChange>& out);
  void refresh_key(std::uint64_t key, std::vector<KeyChange>& out);
  void forget_oldest(std::vector<KeyChange>& out);

  BlockKeysConfig config_;
  std::unordered_map<kv_events::EngineHash, Block> blocks_;  // node-based: references stay valid
  std::unordered_map<std::uint64_t, Key> keys_;
  std::list<kv_events::EngineHash> lru_;  // front: most recently stored; removed blocks at the back
  BlockKeysSkips skips_;
};

}  // namespace prefixgate::gateway
