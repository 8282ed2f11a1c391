// TokenBucket: lazy continuous refill (the balance is brought up to date whenever it is read),
// in doubles so that a bucket of 2,000,000 tokens a minute refills by fractions between calls.
#include "prefixgate/gateway/token_bucket.h"

#include <algorithm>
#include <cmath>

namespace prefixgate::gateway {

TokenBucket::TokenBucket(double capacity, Clock::duration period, Clock::time_point now)
    : capacity_(capacity),
      per_second_(capacity / std::chrono::duration<double>(period).count()),
      tokens_(capacity),
      last_(now) {}

void TokenBucket::refill(Clock::time_point now) {
  if (now <= last_) return;  // a caller's clock read before ours: nothing to add
  tokens_ = available(now);
  last_ = now;
}

TokenBucket::Clock::duration TokenBucket::wait_for(double amount, Clock::time_point now) {
  if (amount > capacity_) return Clock::duration::max();
  refill(now);
  if (tokens_ >= amount) return Clock::duration::zero();
  const double seconds = (amount - tokens_) / per_second_;
  // Rounded up to the clock's tick, so that waiting exactly this long is enough.
  return std::chrono::ceil<Clock::duration>(std::chrono::duration<double>(seconds));
}

void TokenBucket::take(double amount, Clock::time_point now) {
  refill(now);
  tokens_ -= amount;
}

void TokenBucket::give_back(double amount, Clock::time_point now) {
  refill(now);
  tokens_ = std::min(capacity_, tokens_ + amount);
}

double TokenBucket::available(Clock::time_point now) const {
  if (now <= last_) return tokens_;
  const double elapsed = std::chrono::duration<double>(now - last_).count();
  return std::min(capacity_, tokens_ + elapsed * per_second_);
}

}  // namespace prefixgate::gateway
