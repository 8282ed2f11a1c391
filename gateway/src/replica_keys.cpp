#include "prefixgate/gateway/replica_keys.h"

#include "prefixgate/base/check.h"

namespace prefixgate::gateway {

ReplicaKeys::ReplicaKeys(std::size_t ranks) : ranks_(ranks) {
  PG_CHECK(ranks >= 1 && ranks <= kMaxRanks);
}

KeyState ReplicaKeys::state_of(const Holders& h) {
  return h.primary != 0   ? KeyState::kPrimary
         : h.offload != 0 ? KeyState::kOffload
                          : KeyState::kAbsent;
}

void ReplicaKeys::apply(std::size_t rank, std::span<const KeyChange> changes,
                        std::vector<KeyChange>& out) {
  PG_DCHECK(rank < ranks_);
  const std::uint64_t bit = std::uint64_t{1} << rank;
  for (const KeyChange& c : changes) {
    auto it = keys_.find(c.key);
    if (it == keys_.end()) {
      if (c.state == KeyState::kAbsent) continue;
      it = keys_.emplace(c.key, Holders{}).first;
    }
    Holders& h = it->second;
    const KeyState before = state_of(h);
    h.primary = c.state == KeyState::kPrimary ? h.primary | bit : h.primary & ~bit;
    h.offload = c.state == KeyState::kOffload ? h.offload | bit : h.offload & ~bit;
    const KeyState after = state_of(h);
    if (after == KeyState::kAbsent) keys_.erase(it);
    if (after != before) out.push_back({c.key, after});
  }
}

std::vector<KeyChange> ReplicaKeys::held() const {
  std::vector<KeyChange> out;
  out.reserve(keys_.size());
  for (const auto& [key, h] : keys_) out.push_back({key, state_of(h)});
  return out;
}

}  // namespace prefixgate::gateway
