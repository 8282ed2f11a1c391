// prefixgate-bench simulate: the event loop over the real scheduler, cache, index and policies.
#include "simulate.h"

#include <gtest/gtest.h>

#include <limits>

#include "prefixgate/engine/sim_device.h"
#include "workloads/workloads.h"

namespace prefixgate::bench {
namespace {

// A trace of `n` requests of the same `blocks` x 512-token prompt, `gap_ms` apart.
std::vector<TraceRecord> repeated(std::size_t n, std::size_t blocks, double gap_ms,
                                  std::size_t output = 4) {
  std::vector<TraceRecord> out;
  for (std::size_t i = 0; i < n; ++i) {
    TraceRecord r;
    r.timestamp_ms = gap_ms * static_cast<double>(i);
    r.input_length = blocks * 512;
    r.output_length = output;
    for (std::size_t b = 0; b < blocks; ++b) r.hash_ids.push_back(b);
    out.push_back(r);
  }
  return out;
}

SimConfig config(std::size_t replicas, const std::string& policy) {
  auto profile = engine::parse_sim_profile("h100:llama3-8b");
  EXPECT_TRUE(profile.ok());
  SimConfig c;
  c.replicas = replicas;
  c.policy = policy;
  c.replica.profile = *profile;
  c.replica.num_pages = 4096;
  c.replica.model_id = "builtin:tiny";
  return c;
}

SimWorkload trace_workload(std::vector<TraceRecord> records, std::size_t copies = 1) {
  return SimWorkload::from_trace(std::move(records), {}, copies, "builtin:tiny", 16, 1);
}

TEST(SimulateTest, ARequestOnAnIdleReplicaTakesItsModelledPrefill) {
  // One 1,024-token prompt, one output token: its TTFT is one prefill step of the cost model.
  const SimWorkload w = trace_workload(repeated(1, 2, 0, /*output=*/1));
  SimConfig c = config(1, "round_robin");
  auto r = run_simulation(w, c);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const engine::SimSequenceWork work{0, 1024, true};
  const double step = engine::sim_step_cost(c.replica.profile, std::span(&work, 1)).seconds;
  EXPECT_EQ(r->requests, 1U);
  EXPECT_DOUBLE_EQ(r->ttft_s.p50, step);
  EXPECT_DOUBLE_EQ(r->e2e_s.p50, step);
  EXPECT_DOUBLE_EQ(r->gpu_seconds, step);
  EXPECT_EQ(r->queue_s.p50, 0);
}

TEST(SimulateTest, ARepeatedPromptHitsTheEnginesCacheOnceTheFirstIsComputed) {
  // 4 copies of a 2,048-token prompt, 1 s apart: the first computes it, the others hit every
  // full block but the last (the last token always runs): 127 of 128 blocks.
  const SimWorkload w = trace_workload(repeated(4, 4, 1000));
  auto r = run_simulation(w, config(2, "cache_aware"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->prompt_tokens, 4U * 2048);
  EXPECT_EQ(r->cached_tokens, 3U * 2032);
  EXPECT_DOUBLE_EQ(r->imbalance, 2.0) << "every copy should go where the prompt is cached";
}

TEST(SimulateTest, IsDeterministic) {
  SharedPrefixOptions o{.groups = 6, .prompts_per_group = 5, .system_len = 600, .output_len = 16};
  std::shared_ptr<const canon::Tokenizer> tokenizer = canon::make_byte_tokenizer();
  CeilingModel m;
  m.tokenizer = tokenizer.get();
  const SimWorkload w = SimWorkload::from_workload(make_shared_prefix(o, 3), m, tokenizer);
  SimConfig c = config(3, "cache_aware");
  c.gateways = 2;
  c.request_rate = 40;
  auto a = run_simulation(w, c);
  auto b = run_simulation(w, c);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->cached_tokens, b->cached_tokens);
  EXPECT_EQ(a->events, b->events);
  EXPECT_EQ(a->ttft_s.p99, b->ttft_s.p99);
  EXPECT_EQ(a->route_reasons, b->route_reasons);
  EXPECT_GT(a->cached_tokens, 0U);
}

TEST(SimulateTest, EveryGatewayLearnsWhatEveryReplicaCaches) {
  // dynamo_kv routes on the engines' events alone (no predictions), its ties at random: a
  // prompt repeated 1 s apart lands where it is cached only if the gateway that routes it has
  // heard the events, whichever gateway routed the first one.
  const SimWorkload w = trace_workload(repeated(12, 2, 1000));
  SimConfig c = config(8, "dynamo_kv");
  c.gateways = 3;
  c.event_delay_s = 0.05;
  auto heard = run_simulation(w, c);
  ASSERT_TRUE(heard.ok());
  EXPECT_EQ(heard->cached_tokens, 11U * 1008);
  // Events that arrive only after the run: every copy lands at random.
  c.event_delay_s = 1e6;
  auto deaf = run_simulation(w, c);
  ASSERT_TRUE(deaf.ok());
  EXPECT_LT(deaf->cached_tokens, heard->cached_tokens);
}

TEST(SimulateTest, PeeredGatewaysHearEachOthersSends) {
  // least_load behind 3 gateways, the engines' reports never arriving: 8 long requests 10 ms
  // apart over 8 replicas. A gateway sees only what it sent itself, so the gateways pile onto the
  // same replicas; peered gateways are told of each send within a millisecond, and each request
  // goes to a replica with nothing in flight.
  const SimWorkload w = trace_workload(repeated(8, 2, 10, /*output=*/400));
  SimConfig c = config(8, "least_load");
  c.gateways = 3;
  c.event_delay_s = 1e6;
  auto alone = run_simulation(w, c);
  ASSERT_TRUE(alone.ok());
  EXPECT_LT(alone->peer_delay_s, 0);
  EXPECT_GT(alone->imbalance, 1.0);
  c.peer_delay_s = 0.001;
  auto peered = run_simulation(w, c);
  ASSERT_TRUE(peered.ok()) << peered.error().message;
  EXPECT_EQ(peered->peer_delay_s, 0.001);
  EXPECT_DOUBLE_EQ(peered->imbalance, 1.0) << "one request a replica";
  // One gateway has no peers to hear.
  c.gateways = 1;
  auto one = run_simulation(w, c);
  ASSERT_TRUE(one.ok());
  EXPECT_LT(one->peer_delay_s, 0);
}

TEST(SimulateTest, RequestsPastTheContextAreRefusedAsErrors) {
  const SimWorkload w = trace_workload(repeated(3, 20, 100));  // 10,240 tokens
  SimConfig c = config(1, "round_robin");
  c.replica.scheduler.max_model_len = 8192;
  auto r = run_simulation(w, c);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->requests, 3U);
  EXPECT_EQ(r->errors, 3U);
  EXPECT_EQ(r->prompt_tokens, 0U);
}

// A --max-model-len past the profile model's context (llama3-8b's 8,192), as full-length
// Mooncake runs ask for: the requests are served, not refused (and in builds with invariant
// checks the sim device accepts their positions).
TEST(SimulateTest, AMaxModelLenPastTheModelsContextServesLongerPrompts) {
  const SimWorkload w = trace_workload(repeated(2, 20, 100));  // 10,240 tokens
  SimConfig c = config(1, "round_robin");
  c.replica.scheduler.max_model_len = 16384;
  auto r = run_simulation(w, c);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->requests, 2U);
  EXPECT_EQ(r->errors, 0U);
  EXPECT_EQ(r->prompt_tokens, 2U * 10240);
}

TEST(SimulateTest, WarmupRequestsLoadTheCacheButAreNotMeasured) {
  const SimWorkload w = trace_workload(repeated(3, 4, 1000));
  SimConfig c = config(1, "round_robin");
  c.warmup = 1;
  auto r = run_simulation(w, c);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->requests, 2U);
  EXPECT_EQ(r->cached_tokens, 2U * 2032);
}

TEST(SimulateTest, TheRateScalesATracesTimestamps) {
  // 5 requests over 4 s at 10 requests/s (requests / span): 0.5 s from first to last arrival.
  // One replica each, so every one is a cold prefill of the same length.
  const SimWorkload w = trace_workload(repeated(5, 1, 1000, /*output=*/1));
  SimConfig c = config(5, "round_robin");
  auto own = run_simulation(w, c);
  c.request_rate = 10;
  auto fast = run_simulation(w, c);
  ASSERT_TRUE(own.ok() && fast.ok());
  EXPECT_NEAR(own->makespan_s, 4.0 + own->e2e_s.p50, 1e-3);
  EXPECT_NEAR(fast->makespan_s, 0.5 + fast->e2e_s.p50, 1e-3);
}

TEST(SimWorkloadTest, TraceCopiesShareNothingAndKeepTheCeiling) {
  std::vector<TraceRecord> records = repeated(3, 4, 1000);
  records[1].hash_ids = {0, 1, 7, 8};  // shares two blocks with the others
  const CapacityModel model{config(1, "round_robin").replica.profile, {}, 1 << 20};
  auto one = profile_workload(trace_workload(records, 1), model);
  auto three = profile_workload(trace_workload(records, 3), model);
  ASSERT_TRUE(one.ok() && three.ok());
  EXPECT_EQ(three->requests, 3 * one->requests);
  EXPECT_DOUBLE_EQ(three->ceiling_hit_rate, one->ceiling_hit_rate);
  EXPECT_GT(one->ceiling_hit_rate, 0);
}

TEST(SimWorkloadTest, ProfileCeilingIsCompareCeiling) {
  SharedPrefixOptions o{.groups = 4, .prompts_per_group = 6, .system_len = 500, .output_len = 8};
  const Workload generated = make_shared_prefix(o, 5);
  std::shared_ptr<const canon::Tokenizer> tokenizer = canon::make_byte_tokenizer();
  CeilingModel m;
  m.tokenizer = tokenizer.get();
  auto expected = compute_ceiling(generated, m);
  ASSERT_TRUE(expected.ok());
  const CapacityModel model{config(1, "round_robin").replica.profile, {}, 1 << 20};
  auto p = profile_workload(SimWorkload::from_workload(generated, m, tokenizer), model);
  ASSERT_TRUE(p.ok());
  EXPECT_DOUBLE_EQ(p->ceiling_hit_rate, expected->hit_rate);
  EXPECT_EQ(p->requests, 24U);
}

TEST(SimWorkloadTest, ACachedPrefixCostsLessGpuTimeAndCapacityFollows) {
  const CapacityModel model{config(1, "round_robin").replica.profile, {}, 451675};
  const double cold = request_gpu_seconds(model, 8192, 0, 100);
  const double warm = request_gpu_seconds(model, 8192, 8000, 100);
  EXPECT_LT(warm, cold / 3);
  // Prefill alone: the chunks' compute, 4 x 2,048 tokens.
  double chunks = 0;
  for (std::size_t done = 0; done < 8192; done += 2048) {
    const engine::SimSequenceWork w{done, 2048, done + 2048 == 8192};
    chunks += engine::sim_step_cost(model.profile, std::span(&w, 1)).compute_seconds;
  }
  EXPECT_DOUBLE_EQ(request_gpu_seconds(model, 8192, 0, 1), chunks);
}

}  // namespace
}  // namespace prefixgate::bench
