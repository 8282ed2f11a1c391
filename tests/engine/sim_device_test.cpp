#include "prefixgate/engine/sim_device.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

namespace prefixgate::engine {
namespace {

using canon::TokenId;

constexpr std::size_t kPageTokens = 16;
constexpr double kInf = std::numeric_limits<double>::infinity();

SimProfile profile_of(const char* text) {
  auto profile = parse_sim_profile(text);
  EXPECT_TRUE(profile.ok()) << (profile.ok() ? "" : profile.error().message);
  return *profile;
}

std::string error_of(const char* text) {
  auto profile = parse_sim_profile(text);
  EXPECT_FALSE(profile.ok()) << text << " parsed";
  return profile.ok() ? "" : profile.error().message;
}

SimStepCost cost_of(const SimProfile& profile, std::vector<SimSequenceWork> batch) {
  return sim_step_cost(profile, batch);
}

std::vector<SimSequenceWork> decode_batch(std::size_t sequences, std::size_t context) {
  return std::vector<SimSequenceWork>(sequences, SimSequenceWork{context - 1, 1, true});
}

// ---------------------------------------------------------------------------------------------
// Profiles

TEST(SimProfileTest, ParsesGpuAndModelWithAliases) {
  const SimProfile p = profile_of("h100:llama3-8b");
  EXPECT_EQ(p.name, "h100-sxm:llama3-8b@bf16");
  EXPECT_EQ(p.gpu.bf16_flops, 989e12);
  EXPECT_EQ(p.gpu.memory_bandwidth, 3.35e12);
  EXPECT_EQ(p.gpu.memory_bytes, 80.0 * (1 << 30));
  EXPECT_EQ(p.model.num_layers, 32u);
  EXPECT_EQ(p.model.hidden_size, 4096u);
  EXPECT_EQ(p.model.num_heads, 32u);
  EXPECT_EQ(p.model.num_kv_heads, 8u);
  EXPECT_EQ(p.model.head_dim, 128u);
  EXPECT_EQ(p.model.intermediate_size, 14336u);
  EXPECT_EQ(p.model.vocab_size, 128256u);
  EXPECT_EQ(p.weights, WeightDtype::kBf16);

  EXPECT_EQ(profile_of("h100-sxm:llama3-8b").name, p.name);
  EXPECT_EQ(profile_of("a100:qwen2.5-7b").name, "a100-80gb:qwen2.5-7b@bf16");
  EXPECT_EQ(profile_of("l4:llama3-8b@fp8").weights, WeightDtype::kFp8);
  // The model name may hold a colon of its own.
  const SimProfile tiny = profile_of("h200:builtin:tiny");
  EXPECT_EQ(tiny.model.id, "builtin:tiny");
  EXPECT_EQ(tiny.model.vocab_size, 263u);
}

TEST(SimProfileTest, Llama70bOnOneH200IsFp8ByDefault) {
  const SimProfile p = profile_of("h200:llama3-70b");
  EXPECT_EQ(p.name, "h200:llama3-70b@fp8");
  EXPECT_EQ(p.model.num_layers, 80u);
  EXPECT_EQ(p.model.hidden_size, 8192u);
  EXPECT_EQ(p.model.num_heads, 64u);
  EXPECT_EQ(p.model.intermediate_size, 28672u);
  EXPECT_GT(kv_capacity_tokens(p), 100000u);
}

TEST(SimProfileTest, UnknownNamesListTheChoices) {
  const std::string gpu = error_of("b300:llama3-8b");
  EXPECT_NE(gpu.find("\"b300\""), std::string::npos) << gpu;
  for (const char* name : {"h100-sxm", "h200", "a100-80gb", "l4", "h100", "a100"}) {
    EXPECT_NE(gpu.find(name), std::string::npos) << gpu;
  }
  const std::string model = error_of("h100:llama2-7b");
  EXPECT_NE(model.find("\"llama2-7b\""), std::string::npos) << model;
  for (const char* name : {"llama3-8b", "llama3-70b", "qwen2.5-7b", "builtin:tiny"}) {
    EXPECT_NE(model.find(name), std::string::npos) << model;
  }
  EXPECT_NE(error_of("h100:llama3-8b@int4").find("bf16, fp8"), std::string::npos);
  for (const char* bad : {"", "h100", "h100:", ":llama3-8b"}) {
    EXPECT_NE(error_of(bad).find("GPU:MODEL"), std::string::npos) << bad;
  }
}

TEST(SimProfileTest, RefusesWeightsThatLeaveNoRoomForKv) {
  // 141 GB of BF16 weights against 141 GiB * 0.9 usable.
  const std::string bf16 = error_of("h200:llama3-70b@bf16");
  EXPECT_NE(bf16.find("does not fit"), std::string::npos) << bf16;
  EXPECT_NE(bf16.find("try h200:llama3-70b@fp8"), std::string::npos) << bf16;
  // FP8 70B leaves an H100 less than one 8192-token sequence of KV.
  EXPECT_NE(error_of("h100:llama3-70b").find("8192-token"), std::string::npos);
  EXPECT_NE(error_of("l4:llama3-70b").find("does not fit"), std::string::npos);
}

TEST(SimProfileTest, ParsesSpeedup) {
  EXPECT_EQ(*parse_sim_speedup("10"), 10.0);
  EXPECT_EQ(*parse_sim_speedup("0.5"), 0.5);
  EXPECT_EQ(*parse_sim_speedup("1e3"), 1000.0);
  EXPECT_TRUE(std::isinf(*parse_sim_speedup("inf")));
  for (const char* bad : {"", "0", "-2", "nan", "10x", "fast", "1e999"}) {
    EXPECT_FALSE(parse_sim_speedup(bad).ok()) << bad;
  }
}

// ---------------------------------------------------------------------------------------------
// Cost model, against numbers worked out by hand from the published shapes.

TEST(SimCostTest, ParameterCountsMatchPublishedSizes) {
  // Hugging Face model cards: Llama 3 8B 8.03B, 70B 70.6B, Qwen2.5-7B 7.61B parameters.
  const ParameterBreakdown p8 = parameter_breakdown(profile_of("h100:llama3-8b").model);
  EXPECT_EQ(p8.layer_linear, 32.0 * (2 * 4096.0 * 4096 + 2 * 1024.0 * 4096 + 3 * 14336.0 * 4096));
  EXPECT_EQ(p8.embedding, 128256.0 * 4096);
  EXPECT_EQ(p8.lm_head, 128256.0 * 4096);
  EXPECT_EQ(p8.total(), 8030261248.0);
  EXPECT_EQ(parameter_breakdown(profile_of("h200:llama3-70b").model).total(), 70553706496.0);
  // 7,615,616,512 on the model card, less the 129,024 q/k/v bias terms ModelSpec cannot hold.
  EXPECT_EQ(parameter_breakdown(profile_of("h100:qwen2.5-7b").model).total(),
            7615616512.0 - 28 * (3584 + 512 + 512));
}

TEST(SimCostTest, KvCapacityIsWhatWeightsAndActivationsLeave) {
  const SimProfile p = profile_of("h100:llama3-8b");
  const double usable = 80.0 * 1024 * 1024 * 1024 * 0.9;
  const double weights = 8030261248.0 * 2;
  const double reserve = 1024.0 * 1024 * 1024 + 8192.0 * (3 * 14336 + 4 * 4096) * 2;
  const double per_token = 2.0 * 32 * 8 * 128 * 2;  // K and V, 32 layers, 8 heads, bf16
  const auto tokens = static_cast<std::size_t>((usable - weights - reserve) / per_token);
  EXPECT_EQ(kv_capacity_tokens(p), tokens);
  EXPECT_NEAR(static_cast<double>(tokens), 451676, 1);
  EXPECT_EQ(kv_capacity_pages(p, 16), tokens / 16);
  const SimMemoryPlan plan = sim_memory_plan(p);
  EXPECT_EQ(plan.weight_bytes, weights);
  EXPECT_EQ(plan.reserve_bytes, reserve);
  EXPECT_EQ(SimDevice(p, kInf).kv_page_bytes(16), 16u * 131072u);
}

TEST(SimCostTest, ColdPrefillIsComputeBoundFlopsOverRate) {
  const SimProfile p = profile_of("h100:llama3-8b");
  const SimStepCost c = cost_of(p, {{0, 2048, true}});
  // Linear: 2 FLOPs per weight per token through the layers, lm_head for the sampled token.
  const double linear = 2 * 6979321856.0 * 2048 + 2 * 525336576.0;
  // Attention: token p attends to p + 1 keys; 4 * layers * heads * head_dim FLOPs per key.
  const double attention = 4.0 * 32 * 32 * 128 * (2048.0 * 2049 / 2);
  EXPECT_DOUBLE_EQ(c.linear_flops, linear);
  EXPECT_DOUBLE_EQ(c.attention_flops, attention);
  const double compute = (linear + attention) / (989e12 * 0.55);
  EXPECT_NEAR(c.compute_seconds, compute, 1e-12);
  EXPECT_GT(c.compute_seconds, c.memory_seconds);
  EXPECT_NEAR(c.seconds, compute + 0.002, 1e-12);
  EXPECT_NEAR(c.seconds, 0.0566, 0.0005);
  EXPECT_EQ(c.new_tokens, 2048u);
}

TEST(SimCostTest, CachedPrefixIsMuchCheaperThanColdPrefill) {
  const SimProfile p = profile_of("h100:llama3-8b");
  const SimStepCost cold = cost_of(p, {{0, 2048, true}});
  const SimStepCost warm = cost_of(p, {{1920, 128, true}});
  EXPECT_LT(warm.seconds, cold.seconds / 5);
  // 128 new tokens do not saturate the tensor cores: reading the weights dominates.
  EXPECT_GT(warm.memory_seconds, warm.compute_seconds);
  // ... but the cached context is still attended to.
  EXPECT_DOUBLE_EQ(warm.attention_flops, 4.0 * 32 * 32 * 128 * (128.0 * 1920 + 128.0 * 129 / 2));
  // Prefill time grows with the uncached tokens.
  double previous = 0;
  for (std::size_t n = 256; n <= 8192; n *= 2) {
    const double seconds = cost_of(p, {{0, n, true}}).seconds;
    EXPECT_GT(seconds, previous) << n;
    previous = seconds;
  }
}

TEST(SimCostTest, DecodeIsWeightAndKvBytesOverBandwidth) {
  const SimProfile p = profile_of("h100:llama3-8b");
  // Streamed: layer weights, norms and lm_head in bf16; not the embedding table.
  const double weights = (6979321856.0 + 266240.0 + 525336576.0) * 2;
  const double kv_token = 2.0 * 32 * 8 * 128 * 2;
  const double bandwidth = 3.35e12 * 0.8;

  const SimStepCost one = cost_of(p, decode_batch(1, 2048));
  EXPECT_DOUBLE_EQ(one.weight_bytes, weights);
  EXPECT_DOUBLE_EQ(one.kv_bytes, 2048 * kv_token);
  EXPECT_NEAR(one.memory_seconds, (weights + 2048 * kv_token) / bandwidth, 1e-12);
  EXPECT_GT(one.memory_seconds, 10 * one.compute_seconds);
  EXPECT_NEAR(one.seconds, one.memory_seconds + 0.002, 1e-12);

  const SimStepCost many = cost_of(p, decode_batch(64, 2048));
  EXPECT_NEAR(many.memory_seconds, (weights + 64 * 2048 * kv_token) / bandwidth, 1e-12);
  // Batching amortizes the weights: 64 tokens for well under 64 times the time of one.
  EXPECT_LT(many.seconds, 2.5 * one.seconds);
  // More KV to read, more time: in batch size and in context length.
  EXPECT_GT(cost_of(p, decode_batch(65, 2048)).seconds, many.seconds);
  EXPECT_GT(cost_of(p, decode_batch(64, 4096)).seconds, many.seconds);
}

TEST(SimCostTest, MixedStepTakesTheSlowerOfComputeAndMemory) {
  const SimProfile p = profile_of("h100:llama3-8b");
  std::vector<SimSequenceWork> batch = decode_batch(32, 1024);
  batch.push_back({512, 512, false});  // a chunk of a longer prefill: no sample yet
  const SimStepCost mixed = cost_of(p, batch);
  const SimStepCost chunk = cost_of(p, {{512, 512, false}});
  const SimStepCost decode = cost_of(p, decode_batch(32, 1024));
  EXPECT_DOUBLE_EQ(mixed.linear_flops, chunk.linear_flops + decode.linear_flops);
  EXPECT_DOUBLE_EQ(mixed.attention_flops, chunk.attention_flops + decode.attention_flops);
  EXPECT_DOUBLE_EQ(mixed.kv_bytes, chunk.kv_bytes + decode.kv_bytes);
  EXPECT_DOUBLE_EQ(mixed.weight_bytes, decode.weight_bytes);  // read once for the whole batch
  EXPECT_DOUBLE_EQ(mixed.seconds,
                   std::max(mixed.compute_seconds, mixed.memory_seconds) + p.step_overhead_seconds);
  EXPECT_EQ(mixed.sequences, 33u);
  EXPECT_EQ(mixed.new_tokens, 32u + 512u);
  EXPECT_EQ(cost_of(p, {}).seconds, 0.0);
}

TEST(SimCostTest, Fp8WeightsHalveLayerBytesAndUseFp8TensorCores) {
  const SimProfile bf16 = profile_of("h100:llama3-8b");
  const SimProfile fp8 = profile_of("h100:llama3-8b@fp8");
  const SimStepCost b = cost_of(bf16, {{0, 4096, true}});
  const SimStepCost f = cost_of(fp8, {{0, 4096, true}});
  EXPECT_DOUBLE_EQ(f.weight_bytes, b.weight_bytes - 6979321856.0);
  EXPECT_DOUBLE_EQ(f.linear_flops, b.linear_flops);
  EXPECT_NEAR(f.compute_seconds,
              f.linear_flops / (1979e12 * 0.55) + f.attention_flops / (989e12 * 0.55), 1e-12);
  // The A100 has no FP8 tensor cores: FP8 weights save bytes, not FLOPs.
  const SimStepCost a = cost_of(profile_of("a100:llama3-8b@fp8"), {{0, 4096, true}});
  EXPECT_NEAR(a.compute_seconds, (a.linear_flops + a.attention_flops) / (312e12 * 0.55), 1e-12);
}

// ---------------------------------------------------------------------------------------------
// The device

// A sequence's share of a step, with a page table of consecutive pages from `first_page`.
struct Seq {
  std::vector<TokenId> tokens;
  std::size_t start = 0;
  std::vector<PageId> pages;
  SamplingParams sampling;

  Seq(std::size_t start_position, std::size_t new_tokens, PageId first_page, std::uint64_t seed)
      : tokens(new_tokens), start(start_position) {
    std::iota(tokens.begin(), tokens.end(), 7);
    const std::size_t end = start + new_tokens;
    for (std::size_t i = 0; i < (end + kPageTokens - 1) / kPageTokens; ++i) {
      pages.push_back(static_cast<PageId>(first_page + i));
    }
    sampling.seed = seed;
  }
  SequenceStep step(bool sample = true) const {
    SequenceStep s;
    s.tokens = tokens;
    s.start_position = start;
    s.pages = pages;
    s.sample = sample;
    s.sampling = &sampling;
    return s;
  }
};

std::unique_ptr<SimDevice> device_of(const char* profile, double speedup) {
  auto device = make_sim_device(profile_of(profile), speedup);
  device->init_kv_cache(kv_capacity_pages(device->profile(), kPageTokens), kPageTokens);
  return device;
}

TEST(SimDeviceTest, ChargesTheCostOfWhatTheSchedulerSent) {
  auto device = device_of("h100:llama3-8b", kInf);
  EXPECT_EQ(device->name(), "sim");
  const Seq cached(1920, 128, 0, 1);
  const Seq decode(2047, 1, 200, 2);
  const std::vector<SequenceStep> batch = {cached.step(), decode.step()};
  device->execute(batch);
  const SimStepCost expected = cost_of(device->profile(), {{1920, 128, true}, {2047, 1, true}});
  EXPECT_DOUBLE_EQ(device->last_step().seconds, expected.seconds);
  EXPECT_DOUBLE_EQ(device->last_step().attention_flops, expected.attention_flops);
  device->execute(batch);
  EXPECT_EQ(device->steps(), 2u);
  EXPECT_DOUBLE_EQ(device->simulated_seconds(), 2 * expected.seconds);
}

// What the load reports announce: marginal costs from the cost model, so a slower GPU's are
// larger by about its peak ratio (compute for prefill, bandwidth for decode).
TEST(SimCostTest, SpeedIsTheMarginalCostOfPrefillTokensAndDecodingSequences) {
  const SimProfile h100 = profile_of("h100:llama3-8b");
  const SimProfile l4 = profile_of("l4:llama3-8b");
  const DeviceSpeed fast = sim_speed(h100);
  const DeviceSpeed slow = sim_speed(l4);
  // A cold prefill is compute-bound: 2 x 8B FLOPs a token at 55 % of 989 TFLOP/s, ~30 us.
  EXPECT_GT(fast.prefill_seconds_per_token, 20e-6);
  EXPECT_LT(fast.prefill_seconds_per_token, 45e-6);
  EXPECT_NEAR(slow.prefill_seconds_per_token / fast.prefill_seconds_per_token, 989.0 / 121.0, 1.5);
  // A decoding sequence at 2k context reads its KV: 2,048 x 128 KiB at 80 % of 3.35 TB/s.
  EXPECT_NEAR(fast.decode_seconds_per_sequence, 2048.0 * 131072 / (3.35e12 * 0.8), 2e-5);
  EXPECT_NEAR(slow.decode_seconds_per_sequence / fast.decode_seconds_per_sequence, 3.35 / 0.3, 1.5);
  // The device announces them at its clock's pace, and nothing on the virtual clock.
  EXPECT_DOUBLE_EQ(SimDevice(h100, 4.0).speed().prefill_seconds_per_token,
                   fast.prefill_seconds_per_token / 4.0);
  EXPECT_EQ(SimDevice(h100, kInf).speed().decode_seconds_per_sequence, 0.0);
}

TEST(SimDeviceTest, WaitsAtLeastTheModelledTimeOverSpeedup) {
  constexpr double kSpeedup = 20;
  auto device = device_of("h100:llama3-8b", kSpeedup);
  const Seq cold(0, 2048, 0, 1);
  const Seq decode(2047, 1, 200, 2);
  const std::vector<SequenceStep> prefill = {cold.step()};
  const std::vector<SequenceStep> decode_step = {decode.step()};
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) {
    device->execute(prefill);
    for (int j = 0; j < 4; ++j) device->execute(decode_step);
  }
  const std::chrono::duration<double> measured = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(device->steps(), 15u);
  // No upper bound: a loaded machine may always be slower.
  EXPECT_GE(measured.count(), device->simulated_seconds() / kSpeedup * 0.9);
  EXPECT_GT(device->simulated_seconds(), 0.2);
}

TEST(SimDeviceTest, TokensAreDeterministicAndNeverEos) {
  auto a = device_of("h100:llama3-8b", kInf);
  auto b = device_of("h100:llama3-8b", kInf);
  const Seq first(0, 300, 0, 42);
  const Seq same_seed(0, 300, 100, 42);
  const Seq other_seed(0, 300, 200, 43);
  const Seq not_sampled(0, 300, 300, 42);
  const std::vector<SequenceStep> batch = {first.step(), same_seed.step(), other_seed.step(),
                                           not_sampled.step(false)};
  const StepOutput out_a = a->execute(batch);
  const StepOutput out_b = b->execute(batch);
  ASSERT_EQ(out_a.tokens.size(), 4u);
  EXPECT_EQ(out_a.tokens, out_b.tokens);
  EXPECT_EQ(out_a.tokens[0], out_a.tokens[1]);  // pages differ; the prefix and seed do not
  EXPECT_EQ(out_a.tokens[3], 0u);
  EXPECT_EQ(out_a.tokens[0], sim_next_token(a->spec(), 7 + 299, 300, 42));

  // Over many positions: seeds and positions change the token; no special token ever comes out.
  const ModelSpec& spec = a->spec();
  std::size_t seed_differs = 0;
  std::vector<TokenId> seen;
  for (std::size_t pos = 1; pos < 5000; ++pos) {
    const TokenId t = sim_next_token(spec, 100, pos, 42);
    EXPECT_LT(t, 128000u);  // below <|begin_of_text|>: no special tokens, so never EOS
    seed_differs += t != sim_next_token(spec, 100, pos, 43);
    seen.push_back(t);
  }
  EXPECT_GT(seed_differs, 4900u);
  std::sort(seen.begin(), seen.end());
  EXPECT_GT(std::unique(seen.begin(), seen.end()) - seen.begin(), 4800);

  const SimProfile tiny = profile_of("h100:builtin:tiny");
  for (std::size_t pos = 1; pos < 2000; ++pos) {
    EXPECT_LT(sim_next_token(tiny.model, 65, pos, 0), 256u);  // bytes only
  }
}

TEST(SimDeviceTest, OutputTokensNarrowWhatIsGenerated) {
  const std::vector<TokenId> letters = {'a', 'b', 'c', 'd'};
  std::vector<std::size_t> count(4, 0);
  for (std::size_t pos = 1; pos < 4000; ++pos) {
    const TokenId t = sim_next_token(letters, 'a', pos, 42);
    ASSERT_TRUE(t >= 'a' && t <= 'd') << t;
    ++count[t - 'a'];
  }
  for (std::size_t c : count) EXPECT_GT(c, 800u);  // every one drawn, about evenly

  auto device = device_of("h100:builtin:tiny", kInf);
  device->set_output_tokens(letters);
  Seq seq(8, 16, 0, 1);
  const std::vector<SequenceStep> batch = {seq.step()};
  const TokenId t = device->execute(batch).tokens[0];
  EXPECT_EQ(
      t, sim_next_token(letters, batch[0].tokens.back(),
                        batch[0].start_position + batch[0].tokens.size(), batch[0].sampling->seed));
}

#ifndef NDEBUG
TEST(SimDeviceDeathTest, AssertsPageTablesCoverThePositions) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto device = device_of("h100:builtin:tiny", kInf);
  Seq short_table(32, 16, 0, 1);
  short_table.pages.pop_back();  // positions 32..47 have no page
  const std::vector<SequenceStep> uncovered = {short_table.step()};
  EXPECT_DEATH(device->execute(uncovered), "page_tokens");

  Seq outside(0, 16, 0, 1);
  outside.pages[0] = static_cast<PageId>(kv_capacity_pages(device->profile(), kPageTokens));
  const std::vector<SequenceStep> foreign = {outside.step()};
  EXPECT_DEATH(device->execute(foreign), "num_pages");

  EXPECT_DEATH(device->init_kv_cache(kv_capacity_pages(device->profile(), 16) + 1, 16),
               "kv_capacity_pages");
}

// Positions stop at the modelled model's context (8,192 for builtin:tiny), unless the engine
// serves a longer --max-model-len, which the sim then models (a long byte-tokenized prompt).
TEST(SimDeviceDeathTest, PositionsStopAtTheContextTheEngineServes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto device = device_of("h100:builtin:tiny", kInf);
  ASSERT_EQ(device->profile().model.max_position, 8192u);
  const Seq past_context(8192, 16, 0, 1);
  const std::vector<SequenceStep> batch = {past_context.step()};
  EXPECT_DEATH(device->execute(batch), "max_positions_");

  device->set_max_model_len(4096);  // shorter than the model's context: the context stands
  EXPECT_DEATH(device->execute(batch), "max_positions_");
  device->set_max_model_len(65536);
  EXPECT_EQ(device->execute(batch).tokens.size(), 1u);
  EXPECT_EQ(device->steps(), 1u);
}
#endif

}  // namespace
}  // namespace prefixgate::engine
