// prefixgate-bench simulate: a discrete-event simulation, in virtual time, of `replicas`
// prefixgate-engine sim replicas behind `gateways` prefixgate gateways, running the production
// code rather than a model of it:
//
//   - per gateway: the routing policy (make_policy), its own PrefixIndex and its own view of
//     every replica's load (ReplicaView), kept by replica_load.h's bookkeeping, exactly as the
//     gateway's ReplicaSet keeps it: predictions and in-flight counts on route, prefill done on
//     the first token, the end on the last;
//   - per replica: the engine's Scheduler, RadixCache and PagePool, and the sim device's cost
//     model for each step's duration (simulate_replica.h);
//   - between them: every replica's cache events (stored, removed) and its load reports (every
//     load_report_interval) reach every gateway `event_delay` after they happen; a gateway's
//     predictions stay its own, unless the gateways are peered (peer_delay_s >= 0): then each
//     tells the others what it routed where, its first tokens and its ends, in the gateway's
//     own datagrams (peer_sends.h), which reach them `peer_delay` later.
//
// Requests are sprayed uniformly at random over the gateways, as a plain load balancer would.
// Time is virtual: nothing sleeps, and a run is as fast as the host can step the code.
//
//   bench::SimConfig c{.replicas = 64, .gateways = 3, .policy = "cache_aware"};
//   c.request_rate = 0.8 * profile.capacity_rps_per_replica * 64;
//   bench::SimResult r = bench::run_simulation(workload, c);
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "percentiles.h"
#include "prefixgate/base/status.h"
#include "prefixgate/gateway/routing.h"
#include "simulate_replica.h"
#include "simulate_workload.h"

namespace prefixgate::bench {

struct SimConfig {
  std::size_t replicas = 8;
  std::size_t gateways = 1;
  std::string policy = "cache_aware";
  gateway::PolicyConfig policy_config;
  gateway::IndexConfig index_config;
  SimReplicaConfig replica;  // every replica's: profile, KV pages, scheduler limits
  // A mixed fleet: when not empty, replica r is replica_kinds[r % size] instead.
  std::vector<SimReplicaConfig> replica_kinds;
  double event_delay_s = 0.05;
  double load_report_interval_s = 0.1;  // prefixgate-engine's kv_events "load" line
  // >= 0: the gateways share their sends (prefixgate's `peers`), each datagram reaching the
  // others this long after it was written; < 0: each gateway sees only its own requests.
  double peer_delay_s = -1;
  // Offered requests per second. Sessions of a generated workload arrive as a Poisson process
  // at request_rate / (turns per session); a trace's timestamps are scaled to it. <= 0: a
  // trace at its own timestamps, a generated workload all at once.
  double request_rate = 0;
  std::size_t max_requests = 0;  // 0: the whole workload
  std::size_t warmup = 0;        // the first requests sent are left out of the measures
  std::uint64_t seed = 1;        // arrivals and the spray over gateways
  bool progress = false;         // a progress line on stderr
};

struct SimResult {
  std::size_t replicas = 0;
  std::size_t gateways = 0;
  double peer_delay_s = -1;  // < 0: not peered (or one gateway)
  std::string policy;
  double load = 0;           // offered rate / modelled capacity (set by the caller)
  double offered_rps = 0;    // requests/s offered
  std::size_t requests = 0;  // measured
  std::size_t errors = 0;    // refused by the engine (a prompt past max_model_len)
  std::size_t prompt_tokens = 0;
  std::size_t cached_tokens = 0;  // engine-reported, at admission
  std::size_t output_tokens = 0;
  double hit_rate = 0;
  double ceiling_hit_rate = 0;            // set by the caller
  Summary ttft_s, itl_s, e2e_s, queue_s;  // queue: arrival to the first step that runs it
  double imbalance = 0;                   // max / mean requests per replica
  std::size_t preemptions = 0;
  double gpu_seconds = 0;  // modelled busy time, every replica's steps
  double makespan_s = 0;   // first arrival to last token (modelled)
  double throughput_rps = 0;
  double output_tps = 0;
  std::map<std::string, std::size_t> route_reasons;
  // The run itself.
  std::uint64_t steps = 0;
  std::uint64_t events = 0;     // arrivals, step ends, load reports, kv events applied
  std::uint64_t kv_events = 0;  // engine cache events, each counted once per gateway
  double wall_s = 0;
};

// Errors: a turn the workload cannot prepare (a body the canonicalize path refuses), or a
// policy make_policy refuses.
Result<SimResult> run_simulation(const SimWorkload& workload, const SimConfig& config);

}  // namespace prefixgate::bench
