// A token bucket: holds at most `capacity` tokens and refills continuously at `capacity` per
// `period`, so a tenant's requests_per_minute of 600 is a bucket of 600 refilled at 10 a second:
// a burst of 600 at once, then 10 a second. Taking may leave the balance negative (a request that
// used more tokens than it was charged is settled after the fact), and a negative balance must
// refill before anything is admitted again.
//
// Time is passed in (no clock of its own), so tests step it by hand:
//
//   TokenBucket rpm(600, std::chrono::minutes(1), now);
//   if (auto wait = rpm.wait_for(1, now); wait.count() > 0) reject(retry_after = wait);
//   else rpm.take(1, now);
//
// Not synchronized: its owner (AdmissionCore) holds a lock around it.
#pragma once

#include <chrono>

namespace prefixgate::gateway {

class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts full.
  TokenBucket(double capacity, Clock::duration period, Clock::time_point now);

  // How long until `amount` tokens are there (zero when they are now); Clock::duration::max()
  // when `amount` exceeds the capacity and never will be. Takes nothing.
  Clock::duration wait_for(double amount, Clock::time_point now);
  // Takes `amount` tokens, even past zero (a debt later refills pay off).
  void take(double amount, Clock::time_point now);
  // Returns `amount` tokens (a refund), never past the capacity.
  void give_back(double amount, Clock::time_point now);
  // The balance at `now` (negative while in debt).
  double available(Clock::time_point now) const;
  double capacity() const { return capacity_; }
  // Whether the bucket is full at `now`: a full bucket remembers nothing a fresh one would not.
  bool full(Clock::time_point now) const { return available(now) >= capacity_; }

 private:
  void refill(Clock::time_point now);

  double capacity_;
  double per_second_;  // refill rate
  double tokens_;
  Clock::time_point last_;
};

}  // namespace prefixgate::gateway
