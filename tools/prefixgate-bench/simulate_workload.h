// What `prefixgate-bench simulate` sends: a workload's sessions of turns, each turn prepared only
// when it is sent into the token ids a replica runs and the block hashes a gateway routes on,
// so that a run of 100,000 full-length requests never holds more than those in flight.
//
//   - generated workloads (shared-prefix, multi-turn, agent, volatile): each body goes through
//     the path compare's ceiling takes and a gateway on its default rules: parse, canonicalize
//     (tool JSON and order rewritten), render with the chat template, tokenize, hash;
//   - Mooncake traces: each hash id becomes the same block of token ids `compare` sends
//     (trace.h's trace_prompt), at full length unless length_scale says otherwise. `copies` > 1
//     replays the trace that many times as separate tenants (hash ids shifted so that copies
//     share nothing, timestamps shifted by equal fractions of the trace's span): traffic for a
//     fleet far larger than the trace was recorded on.
//
// profile_workload() reads every turn once in the ceiling's order: the ceiling hit rate, and the
// cost model's price of each request at that hit rate, which gives the fleet's capacity.
//
//   auto w = bench::SimWorkload::from_trace(records, {.length_scale = 1}, 25, model);
//   auto profile = bench::profile_workload(*w, capacity_model);   // ceiling, capacity
//   auto turn = w->prepare(session, 0);                            // tokens, block hashes
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ceiling.h"
#include "prefixgate/base/status.h"
#include "prefixgate/engine/scheduler.h"
#include "prefixgate/engine/sim_device.h"
#include "workload.h"
#include "workloads/trace.h"

namespace prefixgate::bench {

struct SimTurn {
  std::vector<canon::TokenId> tokens;  // the prompt, as the replica runs it
  std::vector<std::uint64_t> block_hashes;
  std::size_t max_tokens = 0;
};

class SimWorkload {
 public:
  // `model` renders, tokenizes and hashes the bodies (policy: what the gateway rewrites);
  // `tokenizer` owns the tokenizer it points at.
  static SimWorkload from_workload(Workload workload, const CeilingModel& model,
                                   std::shared_ptr<const canon::Tokenizer> tokenizer);
  static SimWorkload from_trace(std::vector<TraceRecord> records, const TraceOptions& options,
                                std::size_t copies, const std::string& model_id,
                                std::size_t block_size, std::uint64_t seed);

  const std::string& name() const { return name_; }
  std::size_t sessions() const { return sessions_.size(); }
  std::size_t turns(std::size_t session) const { return sessions_[session].turns; }
  std::size_t requests() const { return requests_; }
  std::size_t block_size() const { return block_size_; }
  // A trace's arrival offsets, seconds from its start (copies interleaved); empty for a
  // generated workload, whose sessions arrive as the load says.
  bool timed() const { return timed_; }
  double arrival_s(std::size_t session) const { return sessions_[session].arrival_s; }
  // The wait after turn `turn - 1`'s response before `turn` is sent.
  double think_time_s(std::size_t session, std::size_t turn) const;
  Result<SimTurn> prepare(std::size_t session, std::size_t turn) const;

 private:
  struct SessionRef {
    double arrival_s = -1;
    std::uint32_t source = 0;  // workload session or trace record
    std::uint32_t copy = 0;    // trace copy
    std::uint32_t turns = 1;
  };
  std::string name_;
  std::vector<SessionRef> sessions_;
  std::size_t requests_ = 0;
  std::size_t block_size_ = 16;
  bool timed_ = false;
  // Generated.
  std::shared_ptr<const Workload> workload_;
  CeilingModel model_;
  std::shared_ptr<const canon::Tokenizer> tokenizer_;
  // Trace.
  std::shared_ptr<const std::vector<TraceRecord>> records_;
  TraceOptions trace_;
  std::uint64_t id_stride_ = 0;  // hash-id offset between copies
  std::uint64_t root_ = 0;       // block-hash root of the model id
  std::uint64_t seed_ = 0;
};

// The cost model's view of a replica, for the capacity estimate.
struct CapacityModel {
  engine::SimProfile profile;
  engine::SchedulerConfig scheduler;
  std::size_t kv_tokens = 0;
};

struct WorkloadProfile {
  std::size_t requests = 0;
  double ceiling_hit_rate = 0;  // one unbounded cache seeing every request in order
  double mean_prompt_tokens = 0;
  double mean_output_tokens = 0;
  // Modelled GPU-seconds a request takes on average with the ceiling's hits, its prefill at
  // full compute and its decode in a full batch (capacity_rps below), and what one replica
  // therefore serves at most.
  double gpu_seconds_per_request = 0;
  double capacity_rps_per_replica = 0;
  double trace_span_s = 0;  // last arrival - first, for a timed workload
};

// One pass over every turn in the ceiling's order (sessions by arrival, turn by turn).
// `max_requests` > 0 stops after that many, as a run with --num-requests does.
Result<WorkloadProfile> profile_workload(const SimWorkload& workload, const CapacityModel& model,
                                         std::size_t max_requests = 0);

// The modelled GPU-seconds of one request of `prompt_tokens` with `cached_tokens` served from
// cache and `output_tokens` generated: its prefill chunks' compute, and its decode steps'
// share of a batch of as many such sequences as fit (max_num_seqs, and the KV).
double request_gpu_seconds(const CapacityModel& model, std::size_t prompt_tokens,
                           std::size_t cached_tokens, std::size_t output_tokens);

}  // namespace prefixgate::bench
