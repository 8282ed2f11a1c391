// ConfirmedLog: the blocks one replica holds confirmed, for the prefix index to walk when the
// replica is cleared, reset or replaced by a snapshot (O(its blocks), not a scan of the index).
//
// Whether a replica holds a block is the index's entry's to say; this is only a list to walk. A
// store appends the block and a removal leaves it, so the list also has blocks removed since and
// repeats (a block removed and stored again). A sweep drops those, and it is incremental: it goes
// a few entries at a time (`advance`), as the index's stores call it, so that no single event
// waits for a walk over a large replica's blocks under the gateway's routing lock. A sweep runs
// in two phases:
//   filtering:  [0, kept) kept, each with its entry marked; [kept, read) dropped; [read, size)
//               to look at. An entry is kept when its replica holds it and it is not marked (a
//               marked one is a repeat of one kept already).
//   unmarking:  the marks of [read, unmark_end) are still to be cleared; [0, read) are cleared.
// Entries appended meanwhile go to the end, looked at by the filtering if it has not finished.
// The marks are the index's entries' (Entry::marked), shared by every replica, so one log at a
// time sweeps; the index keeps the others waiting in turn.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>

namespace prefixgate::gateway {

class ConfirmedLog {
 public:
  enum class Phase : std::uint8_t { kIdle, kWaiting, kFiltering, kUnmarking };

  // A sweep is due once the log is twice what its replica holds and more than kMinSwept: each
  // sweep then looks at no more than twice the blocks stored since the last, and clears the marks
  // of what it kept, about three entries a store. The log is then about 16 bytes a block held
  // at most, past a small replica's kMinSwept (more while it waits for another log's sweep).
  static constexpr std::size_t kMinSwept = 1024;

  void append(std::uint64_t hash) { log_.push_back(hash); }
  std::size_t size() const { return log_.size(); }
  Phase phase() const { return phase_; }
  bool sweep_due(std::size_t held) const {
    return phase_ == Phase::kIdle && log_.size() >= 2 * held + kMinSwept;
  }
  void set_waiting() { phase_ = Phase::kWaiting; }

  // Every block its replica holds is in the log at least once; the caller finishes a sweep of it
  // first (a sweep in the middle of its filtering has a dropped region in the middle).
  const std::deque<std::uint64_t>& entries() const { return log_; }

  // Forgets everything; the sweep's phase must be kIdle or kWaiting (no marks set).
  void clear() {
    log_ = {};  // the memory of a replica that restarts empty
    kept_ = read_ = unmark_end_ = 0;
  }

  void start_sweep() {
    phase_ = Phase::kFiltering;
    kept_ = read_ = 0;
  }

  // Advances this log's sweep by up to `steps` entries. keep(hash): whether to keep the entry
  // (its replica holds the block and no earlier entry was kept for it: it marks the block);
  // unmark(hash): clears the block's mark if it still has an entry; prefetch(hash): fetches what
  // the two will read. Returns whether the sweep finished (the phase is then kIdle).
  template <class Keep, class Unmark, class Prefetch>
  bool advance(std::size_t steps, Keep&& keep, Unmark&& unmark, Prefetch&& prefetch) {
    if (phase_ == Phase::kFiltering) {
      const std::size_t end = read_ + std::min(steps, log_.size() - read_);
      for (std::size_t i = read_; i < end; ++i) prefetch(log_[i]);
      for (; read_ < end; ++read_) {
        const std::uint64_t hash = log_[read_];
        if (keep(hash)) log_[kept_++] = hash;  // kept_ <= read_: written behind the reading
      }
      if (read_ < log_.size()) return false;
      log_.resize(kept_);
      phase_ = Phase::kUnmarking;
      unmark_end_ = kept_;
      read_ = 0;
      return false;
    }
    if (phase_ == Phase::kUnmarking) {
      const std::size_t end = read_ + std::min(steps, unmark_end_ - read_);
      for (std::size_t i = read_; i < end; ++i) prefetch(log_[i]);
      for (; read_ < end; ++read_) unmark(log_[read_]);
      if (read_ < unmark_end_) return false;
      phase_ = Phase::kIdle;
      read_ = unmark_end_ = 0;
      return true;
    }
    return true;
  }

 private:
  // In chunks, not one array: an array that doubles would copy (and fault in) all of a large
  // replica's log at once, a pause of milliseconds for every event behind it.
  std::deque<std::uint64_t> log_;
  Phase phase_ = Phase::kIdle;
  std::size_t kept_ = 0;
  std::size_t read_ = 0;
  std::size_t unmark_end_ = 0;
};

}  // namespace prefixgate::gateway
