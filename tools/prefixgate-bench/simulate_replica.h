// One replica of `prefixgate-bench simulate`: prefixgate-engine's own scheduler, radix KV cache
// and page pool, and the sim device with the virtual clock (speedup inf: the device never
// sleeps; each step's modelled duration is read from the device's cost model instead). It is
// the engine loop (engine_loop.cpp) unrolled into the simulator's events: requests that arrive
// during a step wait for the next schedule(), a step's tokens and cache events come out when
// its modelled time has passed.
//
//   bench::SimReplica replica(config);
//   replica.submit(id, prompt_tokens, max_tokens);
//   if (auto seconds = replica.start_step()) schedule_step_end(now + *seconds);
//   ... at the step's end:
//   for (const engine::SequenceUpdate& u : replica.end_step()) deliver(u);
//   publish(replica.drain_events());
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "prefixgate/engine/page_pool.h"
#include "prefixgate/engine/radix_cache.h"
#include "prefixgate/engine/scheduler.h"
#include "prefixgate/engine/sim_device.h"
#include "prefixgate/gateway/replica_load.h"

namespace prefixgate::bench {

struct SimReplicaConfig {
  engine::SimProfile profile;
  std::size_t num_pages = 0;  // KV capacity in pages of page_tokens
  std::size_t page_tokens = 16;
  std::string model_id;  // seeds the block hashes the cache reports, as the engine's --model
  engine::SchedulerConfig scheduler;
};

class SimReplica {
 public:
  explicit SimReplica(const SimReplicaConfig& config);
  ~SimReplica();
  SimReplica(const SimReplica&) = delete;
  SimReplica& operator=(const SimReplica&) = delete;

  // A request for this replica; it joins the scheduler before the next step (now, if idle).
  void submit(std::uint64_t id, std::vector<canon::TokenId> prompt, std::size_t max_tokens);

  // Starts the next step if none is running and there is work: schedules a batch, runs it on the
  // sim device (which samples its tokens and prices it) and returns its modelled seconds.
  // nullopt: no step (idle, or a step already runs).
  std::optional<double> start_step();
  bool stepping() const { return stepping_; }
  // The running step's sequences (StepPlan::sequence_ids).
  const std::vector<std::uint64_t>& step_sequences() const { return plan_.sequence_ids; }
  // Ends the running step (or, with none, collects requests refused without running): what it
  // did to each sequence, in the scheduler's order.
  std::vector<engine::SequenceUpdate> end_step();
  // Cache changes since the last call, oldest first (what /v1/kv_events streams).
  std::vector<engine::CacheEvent> drain_events() { return cache_.drain_events(); }

  // What the engine's periodic kv_events "load" line would say now.
  gateway::LoadReport load_report() const;
  // Work queued or running (the engine is not idle).
  bool busy() const { return stepping_ || !inbox_.empty() || !scheduler_.idle(); }
  double gpu_seconds() const { return device_->simulated_seconds(); }
  std::uint64_t steps() const { return device_->steps(); }
  std::size_t preemptions() const { return scheduler_.stats().preemptions_total; }

 private:
  engine::PagePool pool_;
  engine::RadixCache cache_;
  engine::Scheduler scheduler_;
  std::unique_ptr<engine::SimDevice> device_;
  std::vector<engine::SequenceRequest> inbox_;
  engine::DeviceSpeed speed_;  // announced in load reports, as prefixgate-engine's sim device
  engine::StepPlan plan_;
  engine::StepOutput output_;
  bool stepping_ = false;
  double step_seconds_ = 0;  // engine::smooth_step_seconds of the modelled steps
};

}  // namespace prefixgate::bench
