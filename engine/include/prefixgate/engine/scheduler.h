// The scheduler: continuous batching over the paged KV cache.
//
// Each step it builds one batch under a token budget (`max_num_batched_tokens`) and a cap on
// running sequences (`max_num_seqs`):
//   1. running sequences first, in admission order: one token for those decoding, the next
//      chunk of the prompt for those still prefilling (chunked prefill, so a long prompt shares
//      steps with running generations instead of stalling them);
//   2. then waiting sequences in arrival order (preempted ones first), each admitted only when
//      pages for its first chunk can be had: it first reuses the longest cached prefix from the
//      radix cache, so a cache hit skips that prefill entirely.
// When pages run out it evicts unlocked cached blocks (LRU), and when that is not enough it
// preempts by recompute: the most recently admitted running sequence drops its private pages
// and goes back to the front of the queue, to be re-admitted (mostly from cache) later.
//
// Plain data structure, no threads: the engine thread owns it with the cache and the device.
//
//   engine::Scheduler sched(config, cache, pool);
//   sched.add(request);
//   engine::StepPlan plan = sched.schedule();
//   engine::StepOutput out = device.execute(plan.batch);
//   for (const engine::SequenceUpdate& u : sched.complete(plan, out)) deliver(u);
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "prefixgate/engine/device.h"
#include "prefixgate/engine/radix_cache.h"

namespace prefixgate::engine {

struct SchedulerConfig {
  std::size_t max_num_batched_tokens = 2048;
  std::size_t max_num_seqs = 64;
  std::size_t max_model_len = 8192;  // prompt + generated
  canon::TokenId eos_token = 0;
};

enum class FinishReason { kNone, kStop, kLength, kAbort };
const char* finish_reason_name(FinishReason reason);  // "stop", "length", "abort"

struct SequenceRequest {
  std::uint64_t id = 0;
  std::string salt;                    // cache salt: sequences of different salts share nothing
  std::vector<canon::TokenId> prompt;  // at least one token
  SamplingParams sampling;
};

// What one step did to one sequence.
struct SequenceUpdate {
  std::uint64_t id = 0;
  bool has_token = false;
  canon::TokenId token = 0;  // a newly generated token, when has_token
  FinishReason finished = FinishReason::kNone;
  std::size_t prompt_tokens = 0;
  std::size_t cached_tokens = 0;  // prompt tokens served from the prefix cache at admission
  bool first_token = false;       // this is the first generated token (for TTFT)
};

struct StepPlan {
  std::vector<SequenceStep> batch;          // what the device runs
  std::vector<std::uint64_t> sequence_ids;  // batch[i] belongs to sequence_ids[i]
  std::size_t num_batched_tokens = 0;
  std::size_t num_prefill_tokens = 0;
  bool empty() const { return batch.empty(); }
};

struct SchedulerStats {
  std::size_t running = 0;
  std::size_t waiting = 0;
  std::size_t preemptions_total = 0;
  // Requests that waited, once or more, for a prefill under way to compute their next blocks
  // instead of computing them beside it (schedule()).
  std::size_t shared_prefill_waits_total = 0;
  std::size_t tokens_queued_for_prefill = 0;   // prompt tokens not yet computed
  std::size_t prompt_tokens_total = 0;         // of admitted requests
  std::size_t cached_prompt_tokens_total = 0;  // of those, served from the prefix cache
  // Decode steps before a request arriving now is admitted: 0 while requests are admitted as
  // they come or wait only for the step's token budget (tokens_queued_for_prefill prices that);
  // with a full batch, or no KV room, the steps until enough running sequences reach their
  // max_tokens to admit those ahead and then it. An upper bound (a stop string or EOS ends a
  // sequence sooner); what a full replica costs a newcomer, which its queue of short prefills
  // does not show.
  std::size_t steps_until_admission = 0;
  // The batch's places (max_num_seqs), and the decode steps between two running sequences ending
  // in steady state (their mean max_tokens over their count; 0 with none running): what each
  // request beyond a full batch adds to the wait of those behind it.
  std::size_t batch_slots = 0;
  double steps_per_admission = 0;
  // Decode steps until the first running sequence reaches its max_tokens (0 with none running):
  // the wait for a place of the first request past a full batch. One admission interval in
  // steady state; a whole lifetime when the batch filled in a burst and ends in one.
  std::size_t steps_until_next_end = 0;
};

// A step's duration smoothed over about the last ten steps (the first taken whole), which
// converts steps_until_admission into seconds.
inline double smooth_step_seconds(double smoothed, double step_seconds) {
  return smoothed > 0 ? smoothed + 0.1 * (step_seconds - smoothed) : step_seconds;
}

class Scheduler {
 public:
  Scheduler(SchedulerConfig config, RadixCache& cache, PagePool& pool);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. Its prompt must be non-empty and shorter than max_model_len; a request
  // that could never fit in the KV pool finishes at once with kLength on the next step.
  void add(SequenceRequest request);

  // Ends a sequence (client gone, stop string seen): frees its pages, keeps what it cached.
  // The update comes out of the next complete()/take_finished(). Unknown ids are ignored.
  void finish(std::uint64_t id, FinishReason reason);

  // Builds the next batch. The spans in plan.batch stay valid until complete(plan, ...).
  StepPlan schedule();

  // Applies the device's output: appends sampled tokens, ends sequences on EOS or length, moves
  // full blocks into the radix cache, and returns what changed, in batch order, followed by
  // sequences that finished outside the batch (finish(), requests that cannot fit).
  std::vector<SequenceUpdate> complete(const StepPlan& plan, const StepOutput& output);

  // Updates for sequences that finished without running (for an idle engine loop).
  std::vector<SequenceUpdate> take_finished();

  bool idle() const;
  SchedulerStats stats() const;
  const SchedulerConfig& config() const { return config_; }

 private:
  struct Sequence;
  using SequencePtr = std::unique_ptr<Sequence>;

  // stats()'s batch_slots, steps_until_admission and steps_per_admission.
  void admission_stats(SchedulerStats& s) const;

  bool ensure_pages(Sequence& seq, std::size_t positions, bool may_preempt);
  bool preempt_one(const Sequence* keep);
  void release(Sequence& seq);
  void cache_full_blocks(Sequence& seq);
  void finish_sequence(Sequence& seq, FinishReason reason, std::vector<SequenceUpdate>& out);
  bool admit(Sequence& seq, std::size_t& budget, StepPlan& plan);
  // A waiting prompt whose next blocks a prefill under way computes (schedule() admits it later).
  static constexpr std::size_t kSharedPrefillBlocks = 2;
  bool waits_for_shared_prefill(const Sequence& seq) const;
  void add_step(Sequence& seq, std::size_t count, StepPlan& plan);

  SchedulerConfig config_;
  RadixCache& cache_;
  PagePool& pool_;
  std::map<std::uint64_t, SequencePtr> sequences_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // admission order
  std::vector<SequenceUpdate> finished_outside_;
  std::size_t preemptions_ = 0;
  std::size_t shared_prefill_waits_ = 0;
  // Whether KV memory is what kept the waiting requests out at the last schedule() that tried
  // to admit one (a refused admission or a preemption): tells admission_stats() a queue that
  // waits for pages from one that waits only for the token budget, without an O(pool) count of
  // what eviction could free at every load report.
  bool waiting_for_memory_ = false;
  std::size_t prompt_tokens_total_ = 0;
  std::size_t cached_prompt_tokens_total_ = 0;
};

}  // namespace prefixgate::engine
