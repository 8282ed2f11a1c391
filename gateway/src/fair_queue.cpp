// FairQueue: a deque of ids per tenant and a rotation of the tenants with waiters. Removing a
// waiter from the middle is linear in its tenant's queue, which is bounded by the gateway's
// admission.max_queue and happens only for waiters that give up.
#include "prefixgate/gateway/fair_queue.h"

#include <algorithm>

#include "prefixgate/base/check.h"

namespace prefixgate::gateway {

void FairQueue::push(const std::string& tenant, Id id) {
  const bool inserted = tenant_of_.emplace(id, tenant).second;
  PG_CHECK(inserted, "a waiter id is queued once");
  std::deque<Id>& q = queues_[tenant];
  if (q.empty()) turn_.push_back(tenant);  // a tenant joins the rotation at its end
  q.push_back(id);
}

std::optional<FairQueue::Id> FairQueue::pop() {
  if (turn_.empty()) return std::nullopt;
  std::string tenant = std::move(turn_.front());
  turn_.pop_front();
  auto it = queues_.find(tenant);
  PG_DCHECK(it != queues_.end() && !it->second.empty(), "a tenant in turn has a waiter");
  const Id id = it->second.front();
  it->second.pop_front();
  tenant_of_.erase(id);
  if (it->second.empty()) {
    queues_.erase(it);
  } else {
    turn_.push_back(std::move(tenant));  // served: to the back of the rotation
  }
  return id;
}

bool FairQueue::remove(Id id) {
  auto owner = tenant_of_.find(id);
  if (owner == tenant_of_.end()) return false;
  auto it = queues_.find(owner->second);
  PG_DCHECK(it != queues_.end(), "a waiting id's tenant has a queue");
  std::deque<Id>& q = it->second;
  q.erase(std::find(q.begin(), q.end(), id));
  if (q.empty()) {
    turn_.erase(std::find(turn_.begin(), turn_.end(), owner->second));
    queues_.erase(it);
  }
  tenant_of_.erase(owner);
  return true;
}

std::size_t FairQueue::size(const std::string& tenant) const {
  auto it = queues_.find(tenant);
  return it == queues_.end() ? 0 : it->second.size();
}

std::optional<FairQueue::Tail> FairQueue::longest() const {
  std::optional<Tail> best;
  for (const std::string& tenant : turn_) {
    const std::deque<Id>& q = queues_.at(tenant);
    if (!best || q.size() > best->waiting) best = Tail{tenant, q.size(), q.back()};
  }
  return best;
}

}  // namespace prefixgate::gateway
