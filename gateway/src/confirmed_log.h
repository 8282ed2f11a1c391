// ConfirmedLog: the blocks one replica holds confirmed, for the prefix index to walk when the
// replica is cleared, reset or replaced by a snapshot (O(its blocks), not a scan of the index).
//
// Whether a replica holds a block is the index's entry's to say; this is only a list to walk. A
// store appends the block and a removal leaves it, so the list also has blocks removed since and
// repeats (a block removed and stored again). A sweep drops those, and it is incremental: it goes
// a few entries at a time (`advance`), as the index's stores call it, so that no single event
// waits for a walk over a large replica's blocks under the gateway's routing lock. Each step
// fetches the next step's entries ahead, so their cache misses overlap the index's other work.
// A sweep is a pass that drops the blocks no longer held:
//   dropping:   [0, kept) kept; [kept, read) dropped; [read, size) to look at.
// Repeats are dropped only when the pass leaves more than kRepeatShare more entries than the
// replica holds (repeats, or blocks removed after the pass looked at them), by a second pass that
// marks each block it keeps (Entry::marked) and drops an entry whose block is marked already, and
// a third that clears the marks again:
//   deduping:   as dropping, an entry kept only when its block is not marked (and it marks it);
//   unmarking:  the marks of [read, unmark_end) are still to be cleared; [0, read) are cleared.
// Entries appended meanwhile go to the end, looked at by a pass that has not finished. The marks
// are the index's entries', shared by every replica, so one log at a time sweeps; the index keeps
// the others waiting in turn.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>

namespace prefixgate::gateway {

class ConfirmedLog {
 public:
  enum class Phase : std::uint8_t { kIdle, kWaiting, kDropping, kDeduping, kUnmarking };

  // A sweep is due once the log is twice what its replica holds and more than kMinSwept: each
  // sweep then looks at no more than twice the blocks stored since the last, about two entries a
  // store. The log is then about 16 bytes a block held at most, past a small replica's kMinSwept
  // (more while it waits for another log's sweep).
  static constexpr std::size_t kMinSwept = 1024;
  // A pass that leaves more than held / kRepeatShare + kMinRepeats entries more than its replica
  // holds is followed by the passes that drop repeats (each twice the work of a pass).
  static constexpr std::size_t kRepeatShare = 4;
  static constexpr std::size_t kMinRepeats = 64;

  void append(std::uint64_t hash) { log_.push_back(hash); }
  Phase phase() const { return phase_; }
  bool sweep_due(std::size_t held) const {
    return phase_ == Phase::kIdle && log_.size() >= 2 * held + kMinSwept;
  }
  void set_waiting() { phase_ = Phase::kWaiting; }

  // Every block its replica holds is in the log at least once; the caller finishes a sweep of it
  // first (a pass in the middle has a dropped region in the middle).
  const std::deque<std::uint64_t>& entries() const { return log_; }

  // Forgets everything; the sweep's phase must be kIdle or kWaiting (no marks set).
  void clear() {
    log_ = {};  // the memory of a replica that restarts empty
    kept_ = read_ = unmark_end_ = 0;
  }

  void start_sweep() { start_pass(Phase::kDropping); }

  // Advances this log's sweep by up to `steps` entries; `held`: how many blocks its replica holds
  // now. `blocks` answers for the index, about this log's replica:
  //   held(hash)        whether the replica holds the block;
  //   held_first(hash)  the same, and the block is not marked yet: it marks it;
  //   unmark(hash)      clears the block's mark, if it still has an entry;
  //   prefetch(hash)    fetches what those read.
  // Returns whether the sweep finished (the phase is then kIdle).
  template <class Blocks>
  bool advance(std::size_t steps, std::size_t held, Blocks& blocks) {
    switch (phase_) {
      case Phase::kDropping:
      case Phase::kDeduping: {
        const bool dedupe = phase_ == Phase::kDeduping;
        const std::size_t end = read_ + std::min(steps, log_.size() - read_);
        for (; read_ < end; ++read_) {
          const std::uint64_t hash = log_[read_];
          // kept_ <= read_: written behind the reading.
          if (dedupe ? blocks.held_first(hash) : blocks.held(hash)) log_[kept_++] = hash;
        }
        if (read_ < log_.size()) break;
        log_.resize(kept_);
        if (dedupe) {
          phase_ = Phase::kUnmarking;
          unmark_end_ = kept_;
          read_ = 0;
        } else if (kept_ > held + held / kRepeatShare + kMinRepeats) {
          start_pass(Phase::kDeduping);
        } else {
          phase_ = Phase::kIdle;
          return true;
        }
        break;
      }
      case Phase::kUnmarking: {
        const std::size_t end = read_ + std::min(steps, unmark_end_ - read_);
        for (; read_ < end; ++read_) blocks.unmark(log_[read_]);
        if (read_ < unmark_end_) break;
        phase_ = Phase::kIdle;
        read_ = unmark_end_ = 0;
        return true;
      }
      case Phase::kIdle:
      case Phase::kWaiting: return true;
    }
    // The next step's entries, fetched while the index does other work until it comes.
    const std::size_t last = phase_ == Phase::kUnmarking ? unmark_end_ : log_.size();
    const std::size_t ahead = read_ + std::min(steps, last - read_);
    for (std::size_t i = read_; i < ahead; ++i) blocks.prefetch(log_[i]);
    return false;
  }

 private:
  // In chunks, not one array: an array that doubles would copy (and fault in) all of a large
  // replica's log at once, a pause of milliseconds for every event behind it.
  std::deque<std::uint64_t> log_;
  Phase phase_ = Phase::kIdle;
  std::size_t kept_ = 0;
  std::size_t read_ = 0;
  std::size_t unmark_end_ = 0;

  void start_pass(Phase phase) {
    phase_ = phase;
    kept_ = read_ = 0;
  }
};

}  // namespace prefixgate::gateway
