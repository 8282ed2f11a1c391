#include "prefixgate/gateway/kv_event_stream.h"

#include <variant>

#include "prefixgate/base/check.h"
#include "prefixgate/kv_events/wire.h"

namespace prefixgate::gateway {

KvEventStream::KvEventStream(BlockKeysConfig keys, KvStreamOptions options)
    : keys_(std::move(keys)), options_(options) {}

std::optional<std::int64_t> KvEventStream::start() {
  if (!options_.replay || started_ || positioned_ || replaying_) return std::nullopt;
  started_ = true;
  return ask_replay(0, ReplayReason::kStartup);
}

std::optional<std::int64_t> KvEventStream::reconnected() {
  if (!options_.replay || replaying_) return std::nullopt;
  if (!positioned_) return start();
  return ask_replay(next_, ReplayReason::kReconnect);
}

std::optional<std::int64_t> KvEventStream::ask_replay(std::int64_t from, ReplayReason reason) {
  replaying_ = true;
  reason_ = reason;
  replay_lost_ = false;
  replay_applied_ = 0;
  ++stats_.replays;
  return from;
}

std::optional<std::int64_t> KvEventStream::live(std::int64_t seq, std::string_view payload,
                                                std::vector<KeyChange>& out) {
  PG_DCHECK(!replaying_, "live batch during a replay");
  if (positioned_ && seq < next_ && last_live_ && seq <= *last_live_) {
    // The engine numbers from 0 again: it restarted, and its cache with it.
    ++stats_.resets;
    keys_.reset(out);
    positioned_ = false;
    last_live_.reset();
    if (options_.replay && seq > 0) {
      pending_.emplace(seq, std::string(payload));
      return ask_replay(0, ReplayReason::kStartup);
    }
  }
  if (!positioned_ && options_.replay && !started_) {
    // A batch before start() (the connection's notice can come after its first batch): the
    // engine's history first, then this one.
    started_ = true;
    pending_.emplace(seq, std::string(payload));
    return ask_replay(0, ReplayReason::kStartup);
  }
  if (!positioned_) {
    positioned_ = true;
    next_ = seq;
  }
  if (seq < next_) {  // already applied through a replay
    last_live_ = seq;
    return std::nullopt;
  }
  if (seq > next_) {
    if (options_.replay) {
      pending_.emplace(seq, std::string(payload));
      return ask_replay(next_, ReplayReason::kGap);
    }
    ++stats_.gaps_lost;
    lose(out);
    next_ = seq;
  }
  last_live_ = seq;
  apply(seq, payload, out);
  return std::nullopt;
}

void KvEventStream::replayed(std::int64_t seq, std::string_view payload,
                             std::vector<KeyChange>& out) {
  if (!replaying_ || seq < 0) return;
  if (!positioned_) {
    // Catching up from the oldest batch the engine still buffers: that is where we start.
    positioned_ = true;
    next_ = seq;
  }
  if (seq < next_) return;  // already applied
  if (seq > next_) {
    // The engine's buffer no longer holds [next_, seq).
    replay_lost_ = true;
    lose(out);
    next_ = seq;
  }
  ++replay_applied_;
  apply(seq, payload, out);
}

void KvEventStream::replay_done(std::vector<KeyChange>& out) {
  if (!replaying_) return;
  replaying_ = false;
  if (pending_) {
    auto [seq, payload] = std::move(*pending_);
    pending_.reset();
    if (!positioned_) {
      positioned_ = true;
      next_ = seq;
    }
    if (seq > next_) {
      replay_lost_ = true;
      lose(out);
      next_ = seq;
    }
    last_live_ = seq;
    if (seq == next_) apply(seq, payload, out);
  }
  // At start-up the oldest buffered batch is where the stream begins: nothing was lost.
  if (reason_ == ReplayReason::kGap ||
      (reason_ == ReplayReason::kReconnect && (replay_lost_ || replay_applied_ > 0))) {
    ++(replay_lost_ ? stats_.gaps_lost : stats_.gaps_replayed);
  }
}

void KvEventStream::apply(std::int64_t seq, std::string_view payload, std::vector<KeyChange>& out) {
  next_ = seq + 1;
  auto batch = kv_events::decode_event_batch(payload);
  if (!batch) {
    // What changed in it cannot be known: as lost as a batch never received.
    ++stats_.malformed_payloads;
    lose(out);
    return;
  }
  ++stats_.batches;
  stats_.unknown_events += batch->unknown_events;
  for (const kv_events::Event& event : batch->events) {
    if (const auto* stored = std::get_if<kv_events::BlockStored>(&event)) {
      ++stats_.stored_events;
      keys_.stored(*stored, out);
    } else if (const auto* removed = std::get_if<kv_events::BlockRemoved>(&event)) {
      ++stats_.removed_events;
      keys_.removed(*removed, out);
    } else {
      ++stats_.cleared_events;
      keys_.cleared(out);
    }
  }
}

void KvEventStream::lose(std::vector<KeyChange>& out) {
  keys_.cleared(out);
}

}  // namespace prefixgate::gateway
