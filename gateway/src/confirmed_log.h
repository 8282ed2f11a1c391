// ConfirmedLog: the blocks one replica holds confirmed, for the prefix index to walk when the
// replica is cleared, reset or replaced by a snapshot (O(its blocks), not a scan of the index).
//
// Whether a replica holds a block is the index's entry's to say; this is only a list to walk. A
// store appends the block to the log; a removal appends it to the log's notes of removals instead
// of being looked for in the log. A block's stores and removals alternate, so the log less its
// notes is exactly what the replica holds: a block held is listed once more than it is noted
// removed, a block not held as often.
//
// A sweep settles the notes, a few entries at a time (`advance`, which the index calls for every
// block stored, so that no event waits for a walk over a large replica's blocks under the
// gateway's routing lock). It first gathers the notes it starts with (up to kMaxGathered) into a
// multiset (the index's, shared by the sweeps, `removed`), then passes over the log, dropping each
// entry whose block is in the multiset (taking that copy out) and keeping the rest in order:
//   gathering:  [0, gather_left_) of the notes still to move into `removed`;
//   dropping:   [0, kept) kept; [kept, read) dropped; [read, size) to look at.
// Entries appended meanwhile go to the end and are looked at too; notes made meanwhile wait for
// the next sweep. Each note gathered pairs with an entry the pass reaches, so the multiset is
// empty when the pass ends, ready for the next sweep. A sweep reads nothing of the index's
// table: where checking each entry against it cost a cache miss in a table of every replica's
// blocks, the notes are a table of one replica's, kept in cache by the sweep. That is also why
// one log at a time sweeps, the index keeping the others waiting in turn: a multiset for each
// replica would cost memory all the time and be out of cache when its replica's turn came.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>

#include "hash_multiset.h"

namespace prefixgate::gateway {

class ConfirmedLog {
 public:
  enum class Phase : std::uint8_t { kIdle, kWaiting, kGathering, kDropping };

  // A sweep is due once the notes reach a kRemovedShare-th of what the replica holds, and
  // kMinSwept: the log and its notes are then at most about 1 + 2/kRemovedShare times what is held
  // (8 bytes an entry each: 16 a block held, as much as a log swept at twice what is held), and a
  // sweep looks at about kRemovedShare + 2 entries a note. A sweep gathers at most kMaxGathered
  // notes, so that the multiset is made once, at its full size (2 MiB), and never grows under the
  // routing lock: growing it to a large replica's notes, zeroed and faulted in at once, held an
  // event for milliseconds. A replica holding more than about 2 x kMaxGathered blocks is swept
  // once kMaxGathered notes wait, each sweep looking at its whole log for them: held / kMaxGathered
  // + 2 entries a note (9.6 at a million blocks).
  static constexpr std::size_t kMinSwept = 1024;
  static constexpr std::size_t kRemovedShare = 2;
  static constexpr std::size_t kMaxGathered = std::size_t{1} << 17;

  void append(std::uint64_t hash) { log_.push_back(hash); }
  void note_removed(std::uint64_t hash) { notes_.push_back(hash); }

  Phase phase() const { return phase_; }
  bool sweep_due(std::size_t held) const {
    return phase_ == Phase::kIdle &&
           notes_.size() >= std::min(held / kRemovedShare + kMinSwept, kMaxGathered);
  }
  void set_waiting() { phase_ = Phase::kWaiting; }

  // `removed`: empty; this log's until the sweep finishes or the log is cleared. It is made room
  // for kMaxGathered once (the first sweep) and never grows.
  void start_sweep(HashMultiset& removed) {
    phase_ = Phase::kGathering;
    gather_left_ = std::min(notes_.size(), kMaxGathered);
    removed.reserve(kMaxGathered);
    kept_ = read_ = 0;
  }

  // Advances this log's sweep by up to `steps` entries (notes gathered or log entries looked at).
  // Returns whether the sweep finished (the phase is then kIdle, and `removed` empty).
  bool advance(std::size_t steps, HashMultiset& removed) {
    // Iterators rather than indexes within a call (nothing is appended during it): a deque's index
    // costs a division's worth of work, its iterator's step a comparison.
    if (phase_ == Phase::kGathering) {
      const std::size_t n = std::min(steps, gather_left_);
      auto note = notes_.begin();
      for (std::size_t i = 0; i < n; ++i, ++note) removed.insert(*note);
      notes_.erase(notes_.begin(), note);
      gather_left_ -= n;
      steps -= n;
      if (gather_left_ > 0) return false;
      phase_ = Phase::kDropping;
    }
    if (phase_ != Phase::kDropping) return true;
    const std::size_t n = std::min(steps, log_.size() - read_);
    auto read = log_.begin() + static_cast<std::ptrdiff_t>(read_);
    auto kept = log_.begin() + static_cast<std::ptrdiff_t>(kept_);  // kept <= read: behind it
    for (std::size_t i = 0; i < n; ++i, ++read) {
      if (!removed.erase_one(*read)) *kept++ = *read;
    }
    read_ += n;
    kept_ = static_cast<std::size_t>(kept - log_.begin());
    if (read_ < log_.size()) return false;
    log_.resize(kept_);
    phase_ = Phase::kIdle;
    kept_ = read_ = 0;
    return true;
  }

  // Every block its replica holds is in the log at least once; so are blocks it no longer holds,
  // and during a pass its dropped region keeps stale copies of entries already looked at. A walk
  // (the index's clear) checks each against the index's entry.
  const std::deque<std::uint64_t>& entries() const { return log_; }
  // Removals not yet gathered by a sweep.
  std::size_t notes() const { return notes_.size(); }

  // Forgets the blocks, the notes and a sweep under way (its phase then kIdle; the caller empties
  // its multiset); a log waiting for its sweep stays kWaiting, and its sweep, when its turn
  // comes, has nothing to do.
  void clear() {
    log_ = {};  // the memory of a replica that restarts empty
    notes_ = {};
    kept_ = read_ = gather_left_ = 0;
    if (phase_ != Phase::kWaiting) phase_ = Phase::kIdle;
  }

 private:
  // In chunks, not arrays: an array that doubles would copy (and fault in) all of a large
  // replica's log at once, a pause of milliseconds for every event behind it.
  std::deque<std::uint64_t> log_;
  std::deque<std::uint64_t> notes_;
  Phase phase_ = Phase::kIdle;
  std::size_t gather_left_ = 0;
  std::size_t kept_ = 0;
  std::size_t read_ = 0;
};

}  // namespace prefixgate::gateway
