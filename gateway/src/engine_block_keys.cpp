// EngineBlockKeys: a block's keys are computed once, when it is first stored with its tokens;
// from then on the engine's hash alone finds them. A key's state is recomputed from its parts'
// media whenever one of them changes, and reported only when it changes.
#include "prefixgate/gateway/engine_block_keys.h"

#include <algorithm>

#include "prefixgate/base/check.h"
#include "prefixgate/canonicalize/block_hash.h"

namespace prefixgate::gateway {
namespace {

using kv_events::EngineHash;

constexpr std::uint8_t kGpuBit = 1;
constexpr std::uint8_t kOffloadBit = 2;
// Keys one engine block may hold tokens of: E / G + 1 when E > G, more only when an engine
// names different blocks alike (SGLang once hashed a page's tokens without its prefix).
constexpr std::size_t kMaxKeysPerBlock = 64;

std::uint8_t medium_bit(kv_events::Medium m) {
  return m == kv_events::Medium::kGpu ? kGpuBit : kOffloadBit;
}

}  // namespace

EngineBlockKeys::EngineBlockKeys(BlockKeysConfig config) : config_(std::move(config)) {
  PG_CHECK(config_.block_size > 0);
  config_.max_blocks = std::max<std::size_t>(config_.max_blocks, 1);
}

std::size_t EngineBlockKeys::held_keys() const {
  return static_cast<std::size_t>(std::count_if(keys_.begin(), keys_.end(), [](const auto& kv) {
    return kv.second.reported != KeyState::kAbsent;
  }));
}

void EngineBlockKeys::stored(const kv_events::BlockStored& event, std::vector<KeyChange>& out) {
  const std::size_t n = event.block_hashes.size();
  if (n == 0) return;
  if (event.group != 0) {
    skips_.other_group += n;
    return;
  }
  if (event.lora) {
    skips_.lora += n;
    return;
  }
  // Tokens per engine block: the event's block size, or whatever splits the tokens evenly.
  std::size_t per_block = event.block_size;
  const std::size_t total = event.token_ids.size();
  if (total > 0 && (per_block == 0 || per_block * n != total)) {
    per_block = total % n == 0 ? total / n : 0;
  }
  const bool have_tokens = total > 0 && per_block > 0;
  if (total > 0 && !have_tokens) skips_.bad_tokens += n;

  // Where the chain stands before the first block: the root, or after the block at `at`.
  Chain root;
  bool placed = true;  // whether the chain is known
  Place at = kNone;
  if (!event.parent) {
    root.parent_key = canon::block_hash_root(config_.model_id, event.cache_salt);
  } else if (auto it = places_.find(*event.parent); it != places_.end()) {
    at = it->second;
  } else {
    placed = false;
  }
  const std::uint8_t bit = medium_bit(event.medium);
  for (std::size_t i = 0; i < n; ++i) {
    const EngineHash hash = event.block_hashes[i];
    Place place = kNone;
    if (auto it = places_.find(hash); it != places_.end()) {
      place = it->second;
      unlink(place);
      link_newest(place);
    } else if (placed && have_tokens) {
      place = add_block(hash, at == kNone ? &root : nullptr, at,
                        std::span(event.token_ids).subspan(i * per_block, per_block));
    } else {
      ++skips_.unknown_parent;
      placed = false;  // the rest of this chain cannot be placed either
      continue;
    }
    placed = true;
    at = place;
    set_media(place, static_cast<std::uint8_t>(blocks_[place].media | bit), out);
  }
  while (places_.size() > config_.max_blocks) forget_oldest(out);
}

EngineBlockKeys::Place EngineBlockKeys::add_block(EngineHash hash, const Chain* root, Place at,
                                                  std::span<const std::uint32_t> tokens) {
  Place place = kNone;
  if (!free_.empty()) {
    place = free_.back();
    free_.pop_back();
  } else {
    place = static_cast<Place>(blocks_.size());
    blocks_.emplace_back();
  }
  places_.emplace(hash, place);
  link_newest(place);
  // Read after the array may have grown: the block before it is in the array too.
  const Chain& before = root != nullptr ? *root : blocks_[at].after;
  Block& block = blocks_[place];
  block.hash = hash;

  // Our blocks completed by this one: the first also holds the unfinished block's tokens.
  const std::size_t g = config_.block_size;
  std::span<const std::uint32_t> buf = tokens;
  if (!before.partial.empty()) {
    scratch_.assign(before.partial.begin(), before.partial.end());
    scratch_.insert(scratch_.end(), tokens.begin(), tokens.end());
    buf = scratch_;
  }
  std::uint64_t parent = before.parent_key;
  std::size_t pos = 0;
  bool first = true;
  while (buf.size() - pos >= g) {
    const std::uint64_t key = canon::chain_block_hash(parent, buf.subspan(pos, g));
    Key& k = keys_[key];
    k.parts.clear();
    if (first && !before.partial.empty()) {
      k.parts.assign(before.partial_from.begin(), before.partial_from.end());
    }
    k.parts.push_back(hash);
    for (EngineHash part : k.parts) {
      Block* holder = &block;  // the new block is usually the key's only part
      if (part != hash) {
        auto it = places_.find(part);
        if (it == places_.end()) continue;
        holder = &blocks_[it->second];
      }
      auto& keys = holder->keys;
      if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
      if (keys.size() >= kMaxKeysPerBlock) keys.erase(keys.begin());
      keys.push_back(key);
    }
    parent = key;
    pos += g;
    first = false;
  }
  block.after.parent_key = parent;
  block.after.partial.assign(buf.begin() + static_cast<std::ptrdiff_t>(pos), buf.end());
  if (pos == 0) {
    block.after.partial_from = before.partial_from;  // nothing completed: still unfinished
    block.after.partial_from.push_back(hash);
  } else if (!block.after.partial.empty()) {
    block.after.partial_from = {hash};
  }
  return place;
}

void EngineBlockKeys::removed(const kv_events::BlockRemoved& event, std::vector<KeyChange>& out) {
  if (event.group != 0) {
    skips_.other_group += event.block_hashes.size();
    return;
  }
  const std::uint8_t bit = medium_bit(event.medium);
  for (EngineHash hash : event.block_hashes) {
    auto it = places_.find(hash);
    if (it == places_.end()) continue;  // never placed (or long forgotten): nothing of ours
    const Place place = it->second;
    set_media(place, static_cast<std::uint8_t>(blocks_[place].media & ~bit), out);
    // A block held nowhere is the first to forget when the map is full.
    if (blocks_[place].media == 0) {
      unlink(place);
      link_oldest(place);
    }
  }
}

void EngineBlockKeys::cleared(std::vector<KeyChange>& out) {
  for (const auto& [hash, place] : places_) blocks_[place].media = 0;
  for (auto& [key, k] : keys_) {
    if (k.reported == KeyState::kAbsent) continue;
    k.reported = KeyState::kAbsent;
    out.push_back({key, KeyState::kAbsent});
  }
}

void EngineBlockKeys::reset(std::vector<KeyChange>& out) {
  cleared(out);
  places_.clear();
  blocks_.clear();
  free_.clear();
  newest_ = oldest_ = kNone;
  keys_.clear();
}

void EngineBlockKeys::set_media(Place place, std::uint8_t media, std::vector<KeyChange>& out) {
  Block& block = blocks_[place];
  if (block.media == media) return;
  block.media = media;
  for (std::uint64_t key : block.keys) refresh_key(key, out, &block);
}

std::uint8_t EngineBlockKeys::media_of(EngineHash hash) const {
  auto it = places_.find(hash);
  return it == places_.end() ? 0 : blocks_[it->second].media;
}

void EngineBlockKeys::refresh_key(std::uint64_t key, std::vector<KeyChange>& out,
                                  const Block* known) {
  auto it = keys_.find(key);
  if (it == keys_.end()) return;
  Key& k = it->second;
  bool all_gpu = true, all_held = true;
  for (EngineHash part : k.parts) {
    const std::uint8_t media =
        known != nullptr && part == known->hash ? known->media : media_of(part);
    all_gpu = all_gpu && (media & kGpuBit) != 0;
    all_held = all_held && media != 0;
  }
  const KeyState state = all_gpu    ? KeyState::kPrimary
                         : all_held ? KeyState::kOffload
                                    : KeyState::kAbsent;
  if (state == k.reported) return;
  k.reported = state;
  out.push_back({key, state});
}

void EngineBlockKeys::forget_oldest(std::vector<KeyChange>& out) {
  const Place place = oldest_;
  PG_DCHECK(place != kNone);
  unlink(place);
  Block& block = blocks_[place];
  const auto keys = std::move(block.keys);
  places_.erase(block.hash);
  block = Block{};  // its vectors' memory back
  free_.push_back(place);
  for (std::uint64_t key : keys) {
    refresh_key(key, out);  // a part is gone: absent
    auto k = keys_.find(key);
    if (k == keys_.end()) continue;
    const bool any_part_left = std::any_of(k->second.parts.begin(), k->second.parts.end(),
                                           [&](EngineHash p) { return places_.contains(p); });
    if (!any_part_left) keys_.erase(k);
  }
}

void EngineBlockKeys::unlink(Place place) {
  Block& b = blocks_[place];
  (b.newer == kNone ? newest_ : blocks_[b.newer].older) = b.older;
  (b.older == kNone ? oldest_ : blocks_[b.older].newer) = b.newer;
  b.newer = b.older = kNone;
}

void EngineBlockKeys::link_newest(Place place) {
  Block& b = blocks_[place];
  b.newer = kNone;
  b.older = newest_;
  (newest_ == kNone ? oldest_ : blocks_[newest_].newer) = place;
  newest_ = place;
}

void EngineBlockKeys::link_oldest(Place place) {
  Block& b = blocks_[place];
  b.older = kNone;
  b.newer = oldest_;
  (oldest_ == kNone ? newest_ : blocks_[oldest_].older) = place;
  oldest_ = place;
}

}  // namespace prefixgate::gateway
