// Requests waiting for a gateway-wide slot, one first-in-first-out queue per tenant, served
// round robin across the tenants that have someone waiting: each freed slot goes to the next
// tenant in turn, so a tenant that sends ten times more requests gets no more of the slots than
// any other tenant with requests waiting (its own requests keep their order).
//
//   FairQueue q;
//   q.push("team-a", 1); q.push("team-a", 2); q.push("team-b", 3);
//   q.pop();  // 1 (team-a)      q.pop();  // 3 (team-b)      q.pop();  // 2 (team-a)
//   q.remove(id);   // a waiter that gave up (timed out, client gone)
//
// When the whole queue is full, longest() names the tenant holding the most places and its newest
// waiter, which AdmissionCore drops in favour of a tenant with fewer (longest-queue drop), so one
// tenant cannot fill the queue and lock the others out.
//
// Plain data, no clock, no lock: its owner synchronizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

namespace prefixgate::gateway {

class FairQueue {
 public:
  using Id = std::uint64_t;

  // Appends `id` (unique among those waiting) to its tenant's queue.
  void push(const std::string& tenant, Id id);
  // The next waiter, round robin across tenants; nullopt when none waits.
  std::optional<Id> pop();
  // Takes `id` out wherever it is; false when it is not waiting.
  bool remove(Id id);

  std::size_t size() const { return tenant_of_.size(); }
  bool empty() const { return tenant_of_.empty(); }
  std::size_t size(const std::string& tenant) const;

  struct Tail {
    std::string tenant;
    std::size_t waiting = 0;
    Id newest = 0;
  };
  // The tenant with the most waiters (the first in turn among equals) and its newest one.
  std::optional<Tail> longest() const;

 private:
  std::map<std::string, std::deque<Id>> queues_;  // only tenants with someone waiting
  std::deque<std::string> turn_;                  // those tenants, next to be served first
  std::unordered_map<Id, std::string> tenant_of_;
};

}  // namespace prefixgate::gateway
