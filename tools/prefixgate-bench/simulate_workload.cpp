#include "simulate_workload.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "prefixgate/canonicalize/block_hash.h"
#include "prefixgate/canonicalize/prompt.h"
#include "prefixgate/canonicalize/request.h"

namespace prefixgate::bench {

SimWorkload SimWorkload::from_workload(Workload workload, const CeilingModel& model,
                                       std::shared_ptr<const canon::Tokenizer> tokenizer) {
  SimWorkload w;
  w.tokenizer_ = std::move(tokenizer);
  w.name_ = workload.name;
  w.block_size_ = model.block_size;
  w.model_ = model;
  w.sessions_.reserve(workload.sessions.size());
  for (std::size_t s = 0; s < workload.sessions.size(); ++s) {
    const Session& session = workload.sessions[s];
    w.sessions_.push_back({.arrival_s = -1,
                           .source = static_cast<std::uint32_t>(s),
                           .turns = static_cast<std::uint32_t>(session.turns.size())});
    w.requests_ += session.turns.size();
  }
  w.workload_ = std::make_shared<const Workload>(std::move(workload));
  return w;
}

SimWorkload SimWorkload::from_trace(std::vector<TraceRecord> records, const TraceOptions& options,
                                    std::size_t copies, const std::string& model_id,
                                    std::size_t block_size, std::uint64_t seed) {
  SimWorkload w;
  w.name_ = "trace";
  w.timed_ = true;
  w.block_size_ = block_size;
  w.trace_ = options;
  w.seed_ = seed;
  w.root_ = canon::block_hash_root(model_id);
  copies = std::max<std::size_t>(1, copies);
  double first = INFINITY, last = -INFINITY;
  std::uint64_t max_id = 0;
  for (const TraceRecord& r : records) {
    first = std::min(first, r.timestamp_ms);
    last = std::max(last, r.timestamp_ms);
    for (std::uint64_t id : r.hash_ids) max_id = std::max(max_id, id);
  }
  w.id_stride_ = max_id + 1;
  // The trace's span, one mean gap longer, so that shifted copies wrap without colliding.
  const double span_s = records.empty() ? 0
                                        : (last - first) / 1000.0 * options.time_scale *
                                              (1.0 + 1.0 / static_cast<double>(records.size()));
  for (std::size_t c = 0; c < copies; ++c) {
    const double shift = span_s * static_cast<double>(c) / static_cast<double>(copies);
    for (std::size_t i = 0; i < records.size(); ++i) {
      double t = (records[i].timestamp_ms - first) / 1000.0 * options.time_scale + shift;
      if (t >= span_s && span_s > 0) t -= span_s;
      w.sessions_.push_back({.arrival_s = t,
                             .source = static_cast<std::uint32_t>(i),
                             .copy = static_cast<std::uint32_t>(c),
                             .turns = 1});
    }
  }
  std::stable_sort(
      w.sessions_.begin(), w.sessions_.end(),
      [](const SessionRef& a, const SessionRef& b) { return a.arrival_s < b.arrival_s; });
  w.requests_ = w.sessions_.size();
  w.records_ = std::make_shared<const std::vector<TraceRecord>>(std::move(records));
  return w;
}

double SimWorkload::think_time_s(std::size_t session, std::size_t turn) const {
  if (!workload_) return 0;
  return workload_->sessions[sessions_[session].source].turns[turn].think_time_s;
}

Result<SimTurn> SimWorkload::prepare(std::size_t session, std::size_t turn) const {
  const SessionRef& ref = sessions_[session];
  SimTurn out;
  if (records_) {
    TraceRecord r = (*records_)[ref.source];
    for (std::uint64_t& id : r.hash_ids) id += id_stride_ * ref.copy;
    out.tokens = trace_prompt(r, trace_, seed_);
    out.max_tokens = std::max<std::size_t>(1, r.output_length);
    if (trace_.max_output_len > 0) out.max_tokens = std::min(out.max_tokens, trace_.max_output_len);
    out.block_hashes = canon::block_hashes(out.tokens, block_size_, root_);
    return out;
  }
  // As compute_ceiling() and a gateway on model_'s rules: parse, canonicalize, render, tokenize.
  const Turn& t = workload_->sessions[ref.source].turns[turn];
  const canon::Endpoint endpoint = t.api == Api::kCompletions ? canon::Endpoint::kCompletions
                                                              : canon::Endpoint::kChatCompletions;
  auto parsed = canon::parse_request(t.body, endpoint);
  if (!parsed) return parsed.error();
  canon::ParsedRequest request = std::move(*parsed);
  const canon::CanonicalizeOutcome canonical = canon::canonicalize(request, model_.policy);
  if (!canonical.changes.empty()) {
    auto again = canon::parse_request_value(canonical.body, endpoint);
    if (!again) return again.error();
    request = std::move(*again);
  }
  const canon::PromptModel prompt_model{model_.chat_format, model_.tokenizer, model_.block_size,
                                        model_.model_id};
  auto prompt = canon::analyze_prompt(request, prompt_model);
  if (!prompt) return prompt.error();
  out.tokens = std::move(prompt->tokens.tokens);
  out.block_hashes = std::move(prompt->block_hashes);
  out.max_tokens = t.max_tokens;
  return out;
}

double request_gpu_seconds(const CapacityModel& model, std::size_t prompt_tokens,
                           std::size_t cached_tokens, std::size_t output_tokens) {
  double seconds = 0;
  // Prefill: each chunk's compute. Its weight reads are shared with the decodes of the step it
  // rides in, so only the compute is this request's own.
  std::size_t done = std::min(cached_tokens, prompt_tokens == 0 ? 0 : prompt_tokens - 1);
  const std::size_t chunk_max = std::max<std::size_t>(1, model.scheduler.max_num_batched_tokens);
  while (done < prompt_tokens) {
    const std::size_t chunk = std::min(chunk_max, prompt_tokens - done);
    const engine::SimSequenceWork work{done, chunk, done + chunk == prompt_tokens};
    seconds += engine::sim_step_cost(model.profile, std::span(&work, 1)).compute_seconds;
    done += chunk;
  }
  // Decode: the first token came with the prefill; each further one is a share of a step of a
  // full batch (as many such sequences as max_num_seqs and the KV allow), at mid-generation.
  if (output_tokens > 1) {
    const std::size_t footprint = std::max<std::size_t>(1, prompt_tokens + output_tokens);
    const std::size_t batch = std::clamp<std::size_t>(
        model.kv_tokens / footprint, 1, std::max<std::size_t>(1, model.scheduler.max_num_seqs));
    const std::vector<engine::SimSequenceWork> step(
        batch, engine::SimSequenceWork{prompt_tokens + output_tokens / 2, 1, true});
    const double step_seconds = engine::sim_step_cost(model.profile, step).seconds;
    seconds += static_cast<double>(output_tokens - 1) * step_seconds / static_cast<double>(batch);
  }
  return seconds;
}

Result<WorkloadProfile> profile_workload(const SimWorkload& workload, const CapacityModel& model,
                                         std::size_t max_requests) {
  WorkloadProfile p;
  PrefixCeiling ceiling(workload.block_size());
  // The ceiling's order (ceiling.h's nominal_order): sessions by arrival, turn by turn.
  std::vector<std::size_t> order(workload.sessions());
  std::iota(order.begin(), order.end(), 0);
  if (workload.timed()) {
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return workload.arrival_s(a) < workload.arrival_s(b);
    });
    if (!order.empty()) {
      p.trace_span_s = workload.arrival_s(order.back()) - workload.arrival_s(order.front());
    }
  }
  double prompt = 0, output = 0, gpu = 0;
  std::size_t priced = 0;
  bool more = true;
  for (std::size_t t = 0; more; ++t) {
    more = false;
    for (std::size_t s : order) {
      if (t >= workload.turns(s)) continue;
      more = true;
      if (max_requests > 0 && p.requests >= max_requests) break;
      auto turn = workload.prepare(s, t);
      if (!turn) return turn.error();
      const std::size_t n = turn->tokens.size();
      const std::size_t hit = ceiling.add(turn->block_hashes, n);
      ++p.requests;
      prompt += static_cast<double>(n);
      output += static_cast<double>(turn->max_tokens);
      if (n >= model.scheduler.max_model_len) continue;  // the engine refuses it: no work
      gpu += request_gpu_seconds(model, n, hit, turn->max_tokens);
      ++priced;
    }
    if (max_requests > 0 && p.requests >= max_requests) break;
  }
  if (p.requests == 0) return make_error(ErrorCode::kInvalidValue, "the workload has no requests");
  p.ceiling_hit_rate = ceiling.hit_rate();
  p.mean_prompt_tokens = prompt / static_cast<double>(p.requests);
  p.mean_output_tokens = output / static_cast<double>(p.requests);
  if (priced > 0 && gpu > 0) {
    p.gpu_seconds_per_request = gpu / static_cast<double>(priced);
    p.capacity_rps_per_replica = 1.0 / p.gpu_seconds_per_request;
  }
  return p;
}

}  // namespace prefixgate::bench
