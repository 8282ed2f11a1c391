#include "simulate_replica.h"

#include <limits>

#include "prefixgate/base/check.h"

namespace prefixgate::bench {

SimReplica::SimReplica(const SimReplicaConfig& config)
    : pool_(config.num_pages),
      cache_(pool_, config.page_tokens, config.model_id),
      scheduler_(config.scheduler, cache_, pool_),
      device_(engine::make_sim_device(config.profile, std::numeric_limits<double>::infinity())),
      speed_(engine::sim_speed(config.profile)) {
  device_->init_kv_cache(config.num_pages, config.page_tokens);
  // As prefixgate-engine does: a --max-model-len past the profile model's context (a Mooncake
  // trace at full length) is the sim's context too.
  device_->set_max_model_len(config.scheduler.max_model_len);
}

SimReplica::~SimReplica() = default;

void SimReplica::submit(std::uint64_t id, std::vector<canon::TokenId> prompt,
                        std::size_t max_tokens) {
  engine::SequenceRequest r;
  r.id = id;
  r.prompt = std::move(prompt);
  // What prefixgate-bench's requests ask for: greedy, ignore_eos, max_tokens.
  r.sampling.temperature = 0;
  r.sampling.ignore_eos = true;
  r.sampling.max_tokens = max_tokens;
  r.sampling.seed = id;
  inbox_.push_back(std::move(r));
}

std::optional<double> SimReplica::start_step() {
  if (stepping_) return std::nullopt;
  // The engine loop's order: the inbox joins the scheduler, then one schedule() and one step.
  for (engine::SequenceRequest& r : inbox_) scheduler_.add(std::move(r));
  inbox_.clear();
  plan_ = scheduler_.schedule();
  if (plan_.empty()) return std::nullopt;
  output_ = device_->execute(plan_.batch);
  stepping_ = true;
  step_seconds_ = engine::smooth_step_seconds(step_seconds_, device_->last_step().seconds);
  return device_->last_step().seconds;
}

std::vector<engine::SequenceUpdate> SimReplica::end_step() {
  if (!stepping_) return scheduler_.take_finished();
  stepping_ = false;
  std::vector<engine::SequenceUpdate> updates = scheduler_.complete(plan_, output_);
  plan_ = {};
  return updates;
}

gateway::LoadReport SimReplica::load_report() const {
  const engine::SchedulerStats s = scheduler_.stats();
  return {.running = s.running,
          .waiting = s.waiting,
          .kv_pages_used = pool_.used_count(),
          .kv_pages_total = pool_.capacity(),
          .tokens_queued_for_prefill = s.tokens_queued_for_prefill,
          .preemptions_total = s.preemptions_total,
          .prefill_seconds_per_token = speed_.prefill_seconds_per_token,
          .decode_seconds_per_sequence = speed_.decode_seconds_per_sequence,
          .admission_wait_seconds = static_cast<double>(s.steps_until_admission) * step_seconds_,
          .batch_slots = s.batch_slots,
          .admission_interval_seconds = s.steps_per_admission * step_seconds_,
          .next_end_seconds = static_cast<double>(s.steps_until_next_end) * step_seconds_};
}

}  // namespace prefixgate::bench
