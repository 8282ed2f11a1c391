// One engine's KV-event stream as a subscriber follows it: sequence numbers checked, gaps
// filled from the engine's replay socket or else marked lost, engine restarts detected, and
// every batch decoded and applied to the engine's EngineBlockKeys. The socket loop
// (gateway/src/server/kv_events_zmq.cpp) hands it frames and does what it answers.
//
//   - start(): with a replay socket, replay from 0 (the engine answers with what it still
//     buffers): a gateway that starts, or reconnects, in front of a running engine learns at
//     once what the buffer holds instead of waiting for new events.
//   - live(seq): the next one is applied; one already applied through a replay is skipped; one
//     past a gap asks for a replay from the first missing sequence (and is applied after it);
//     one at or below a sequence already received live means the engine restarted: everything
//     it held is forgotten and its history replayed from 0.
//   - what a replay did not deliver (the engine's buffer had moved on, or it did not answer), and
//     a batch that cannot be decoded, is lost: every key of this engine becomes absent until
//     stored again (routing falls back to the gateway's own predictions for them).
//
// Plain data structure, no threads or I/O.
//
//   gateway::KvEventStream s(keys_config, {.replay = true});
//   if (auto from = s.start()) ask_replay(*from);           // then replayed()..., replay_done()
//   if (auto from = s.live(seq, payload, changes)) ask_replay(*from);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "prefixgate/gateway/engine_block_keys.h"

namespace prefixgate::gateway {

// Cumulative counts, for metrics.
struct KvStreamStats {
  std::uint64_t batches = 0;  // applied
  std::uint64_t stored_events = 0, removed_events = 0, cleared_events = 0;
  std::uint64_t unknown_events = 0;      // event types the decoder does not know, skipped
  std::uint64_t malformed_payloads = 0;  // batches that could not be decoded
  std::uint64_t gaps_replayed = 0;       // gaps a replay filled completely
  std::uint64_t gaps_lost = 0;           // gaps (or parts of them) nothing filled
  std::uint64_t replays = 0;             // replay requests asked for
  std::uint64_t resets = 0;              // engine restarts seen
};

struct KvStreamOptions {
  bool replay = false;  // the engine has a replay socket
};

class KvEventStream {
 public:
  KvEventStream(BlockKeysConfig keys, KvStreamOptions options);

  // Where to replay from when the subscription starts (0 with a replay socket), or nullopt
  // (also once the first live batch asked for it).
  std::optional<std::int64_t> start();
  // The connection came back after a loss: where to replay from to catch up on what it missed
  // (the next sequence expected), or nullopt.
  std::optional<std::int64_t> reconnected();
  // A batch from the PUB socket. Returns where to replay from when it revealed a gap or a
  // restart: the caller replays and calls replay_done() before the next live batch.
  std::optional<std::int64_t> live(std::int64_t seq, std::string_view payload,
                                   std::vector<KeyChange>& out);
  // A batch from the replay socket, and its end (the end marker, or no answer in time).
  void replayed(std::int64_t seq, std::string_view payload, std::vector<KeyChange>& out);
  void replay_done(std::vector<KeyChange>& out);

  bool replaying() const { return replaying_; }
  // The next sequence expected, once the stream has a position.
  std::optional<std::int64_t> next() const {
    return positioned_ ? std::optional<std::int64_t>(next_) : std::nullopt;
  }
  const KvStreamStats& stats() const { return stats_; }
  const EngineBlockKeys& keys() const { return keys_; }

 private:
  // Why a replay was asked: catching up at start (nothing counted), filling a gap a live batch
  // revealed, or catching up after a reconnection (a gap only if it brought something).
  enum class ReplayReason { kStartup, kGap, kReconnect };
  std::optional<std::int64_t> ask_replay(std::int64_t from, ReplayReason reason);
  void apply(std::int64_t seq, std::string_view payload, std::vector<KeyChange>& out);
  void lose(std::vector<KeyChange>& out);

  EngineBlockKeys keys_;
  KvStreamOptions options_;
  KvStreamStats stats_;
  bool started_ = false;     // the start-up replay was asked for
  bool positioned_ = false;  // next_ is meaningful
  std::int64_t next_ = 0;
  std::optional<std::int64_t> last_live_;  // the last sequence received on the PUB socket
  bool replaying_ = false;
  ReplayReason reason_ = ReplayReason::kStartup;
  bool replay_lost_ = false;        // part of what the replay in progress should fill was lost
  std::size_t replay_applied_ = 0;  // batches it brought
  std::optional<std::pair<std::int64_t, std::string>> pending_;  // the live batch past a gap
};

}  // namespace prefixgate::gateway
