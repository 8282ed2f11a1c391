// What each replica holds in its prefix cache, as chained block hashes (canonicalize/'s), and
// the longest cached prefix of a prompt on every replica at once.
//
// Two sources per replica:
//   - confirmed: the engine's cache events (prefixgate-engine's /v1/kv_events; vLLM's and
//     SGLang's ZeroMQ streams, translated to our keys by EngineBlockKeys). Authoritative. A
//     confirmed block is held on the device (kPrimary) or only on a lower tier such as CPU
//     memory (kOffload): longest_match counts those separately, for the cost model.
//   - predicted: blocks the gateway just routed there, valid for `prediction_ttl` unless an event
//     confirms them first. They make concurrent requests of a new prefix converge on one replica
//     before any event can arrive. For a replica without events (`openai` upstreams, and vLLM or
//     SGLang ones while their event stream is not connected) predictions are the only source:
//     they do not expire but live in an LRU bounded by the replica's KV capacity.
//
// Plain data structure, no threads or I/O; the gateway serializes access to it.
//
//   gateway::PrefixIndex index;
//   auto r = index.add_replica({gateway::ReplicaKind::kPrefixgate, 0});
//   index.apply_stored(r, hash);
//   std::vector<std::size_t> blocks(index.replica_count());
//   index.longest_match(prompt_hashes, now, blocks);   // blocks[r]: leading blocks cached on r
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace prefixgate::gateway {

using Clock = std::chrono::steady_clock;
using ReplicaId = std::uint32_t;

enum class ReplicaKind {
  kPrefixgate,  // prefixgate-engine: kv_events and load reports
  kOpenai,      // any OpenAI-compatible server: predictions only, LRU-bounded
  kVllm,        // vLLM: ZeroMQ KV events, Prometheus load
  kSglang,      // SGLang: the same protocol, its own metric names
};

// Where a confirmed block is held.
enum class CacheTier : std::uint8_t {
  kPrimary,  // the device's KV cache
  kOffload,  // a lower tier (CPU memory, disk): saves prefill too, after a load
};

// Replicas without a configured capacity (the LRU bound of predictions made without events): 64k
// blocks, 1M tokens at block size 16, about what one 80 GB GPU caches for an 8B model; a bound, so
// an unconfigured replica cannot grow the index without limit.
inline constexpr std::size_t kDefaultOpenaiCapacityBlocks = 65536;

// Where a replica holds one of our block keys.
enum class KeyState : std::uint8_t {
  kAbsent,
  kOffload,  // held, but (partly) on a lower tier than the device: CPU memory, disk
  kPrimary,  // in the device's KV cache
};

// A block a replica's events stored (kPrimary, kOffload) or removed (kAbsent).
struct KeyChange {
  std::uint64_t key = 0;
  KeyState state = KeyState::kAbsent;
};

struct ReplicaIndexConfig {
  ReplicaKind kind = ReplicaKind::kPrefixgate;
  // How many blocks the replica's KV cache holds: the LRU bound of its predictions while it
  // has no events (kOpenai always; kVllm and kSglang until set_events_live). 0 means
  // kDefaultOpenaiCapacityBlocks. Ignored for kPrefixgate.
  std::size_t capacity_blocks = 0;
};

struct IndexConfig {
  // With events, a prediction lives while its request waits for prefill (at most
  // max_prefill_wait), then prediction_ttl from its first token (settle()): long enough for the
  // engine's events to confirm the blocks it just computed. A fixed life from routing would
  // expire while the request still queues on a loaded replica, and its siblings would scatter.
  std::chrono::milliseconds prediction_ttl{2000};
  std::chrono::milliseconds max_prefill_wait{60000};
};

class PrefixIndex {
 public:
  explicit PrefixIndex(IndexConfig config = {});
  ~PrefixIndex();
  PrefixIndex(PrefixIndex&&) noexcept;
  PrefixIndex& operator=(PrefixIndex&&) noexcept;

  ReplicaId add_replica(ReplicaIndexConfig config);
  std::size_t replica_count() const;

  // Authoritative updates from a replica's kv_events. Order between blocks does not matter (a
  // child stored before its parent is fine): the index is a set per replica, and chained hashes
  // make prefix order implicit. Removing a block the replica does not hold is a no-op.
  // Predictions are untouched, except that a confirmed block drops its prediction.
  void apply_snapshot(ReplicaId replica, std::span<const std::uint64_t> hashes);  // replaces all
  // Stores the block, or moves it to `tier` when the replica already holds it.
  void apply_stored(ReplicaId replica, std::uint64_t hash, CacheTier tier = CacheTier::kPrimary);
  void apply_removed(ReplicaId replica, std::uint64_t hash);
  // A run of the replica's events in order, as apply_stored and apply_removed would apply them
  // one by one. Their blocks' entries are fetched from memory a few changes ahead, so that on a
  // large index the cache misses of a run overlap instead of coming one after the other.
  void apply_changes(ReplicaId replica, std::span<const KeyChange> changes);
  void apply_cleared(ReplicaId replica);
  // Forgets everything about a replica (event stream lost, replica ejected).
  void reset(ReplicaId replica);
  // kVllm and kSglang: whether the replica's event stream is connected. While it is, predictions
  // expire after prediction_ttl (events confirm what is cached); while it is not, they live in
  // the LRU of capacity_blocks, as an openai replica's. Predictions made in one mode carry over
  // to the other (an LRU prediction gets the TTL from `now`). Starts false.
  void set_events_live(ReplicaId replica, bool live, Clock::time_point now);

  // The gateway sent a request with these block hashes to `replica`. Also drops that replica's
  // expired predictions. Blocks the replica holds confirmed are not predicted again; with events,
  // the leading run it holds confirmed is searched for as longest_match searches (so a hole in
  // that run of a long prompt may go unpredicted) and only the blocks after it are visited. With
  // events, the predictions live until settle() (at most max_prefill_wait). Returns where the
  // predictions began: the leading blocks held confirmed, with events (0 without).
  std::size_t predict(ReplicaId replica, std::span<const std::uint64_t> hashes,
                      Clock::time_point now);
  // The request predicted with these hashes got its first token (or ended without one): with
  // events, its predictions that are still pending now expire prediction_ttl after `now`.
  // Creates none, and leaves alone a prediction a later request renewed for longer.
  // `predicted_from`: what predict() returned for the request, when known. Its blocks before that
  // were held confirmed and got no prediction from it, so they are not searched again, and a
  // block evicted and predicted by another request since keeps that request's pending count.
  // kPredictedFromUnknown: the leading run held confirmed now is searched for instead.
  static constexpr std::size_t kPredictedFromUnknown = static_cast<std::size_t>(-1);
  void settle(ReplicaId replica, std::span<const std::uint64_t> hashes, Clock::time_point now,
              std::size_t predicted_from = kPredictedFromUnknown);
  // Drops every replica's expired predictions (they already stop matching once expired; this
  // frees their memory and keeps blocks() exact). Optional: call it from a periodic timer.
  void expire_predictions(Clock::time_point now);

  // For every replica r, out[r] = how many leading blocks of `hashes` r holds (confirmed, or
  // predicted and not expired). out.size() must equal replica_count(). When `offloaded` has
  // replica_count() entries too, offloaded[r] = how many of those out[r] blocks r holds only on a
  // lower tier (confirmed kOffload).
  // Prompts of 16 blocks or more are searched (galloping, then binary search) rather than walked
  // block by block, which relies on a prefix cache's property: what r holds of `hashes` is a
  // leading run. Where r has a hole in the middle of its run instead, out[r] may skip the hole:
  // it is then some i with block i - 1 held and block i not, never less than the first hole.
  // Exact whatever the holes for shorter prompts, and when `offloaded` is given while some
  // replica holds a block on a lower tier (that count is made block by block).
  void longest_match(std::span<const std::uint64_t> hashes, Clock::time_point now,
                     std::span<std::size_t> out, std::span<std::size_t> offloaded = {}) const;

  // Blocks known per replica (confirmed + predictions not yet dropped), for metrics. Predictions
  // expired but not yet dropped by predict()/expire_predictions() still count here.
  std::size_t blocks(ReplicaId replica) const;
  std::size_t size() const;  // distinct hashes indexed
  // Bytes of the block table mapped from the kernel apart from the heap (a table of 2 MiB or
  // more), which heap statistics do not see; the rest of the index is on the heap.
  std::size_t mapped_bytes() const;
  // Blocks the replica evicted since it was added: confirmed blocks its events removed and, while
  // it has no events, predictions its LRU dropped (not clears, resets or snapshots). How fast it
  // grows says how young the replica's LRU tail is: what a new prefix there would evict.
  std::uint64_t evicted_blocks(ReplicaId replica) const;
  // evicted_blocks of every replica, by id: valid until the next change to the index.
  std::span<const std::uint64_t> evicted_counts() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prefixgate::gateway
