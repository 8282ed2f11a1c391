// The cuda device against the cpu device, and against itself across the ways the scheduler
// splits work (cached prefixes, batches, chunks), in the CPU emulator (cuda_device_emu_tests)
// and on a GPU (cuda_device_gpu_tests, label gpu).
//
// The cpu device runs the same weights rounded to bf16, so the difference is the cuda device's
// bf16 activations (h, q/k/v, attention output, gate/up) and fp32 accumulation order. Bound:
// max |cuda - cpu| <= 1e-2 * max |cpu logit| per sampled row (measured in the emulator: 8e-4 on
// builtin:tiny, 2e-3 on builtin:small), and the token the cuda device picks greedily is one
// whose cpu logit is within that bound of the cpu maximum. Runs of the cuda device against
// itself: 1e-2 (equal in the emulator). FP8 KV against bf16 KV: 2e-2 (measured 1.3e-3).
#include "prefixgate/engine/cuda_device.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "backend.h"
#include "engine/device_harness.h"
#include "prefixgate/engine/cpu_device.h"
#include "prefixgate/engine/model.h"
#include "prefixgate/engine/sim_device.h"

namespace prefixgate::engine {
namespace {

using canon::TokenId;
using testing::Sequence;
using testing::Work;

constexpr std::size_t kPageTokens = 16;

Model builtin(std::string_view name) {
  auto model = load_model(name);
  EXPECT_TRUE(model.ok()) << model.error().message;
  return std::move(*model);
}

// The same model with every weight rounded to bf16, as the cuda device holds it.
Model rounded_to_bf16(const Model& model) {
  ModelWeights w = *model.weights;
  const auto round = [](std::vector<float>& v) {
    for (float& x : v) x = kernels::from_bf16(kernels::to_bf16(x));
  };
  round(w.embed);
  round(w.lm_head);
  for (LayerWeights& l : w.layers) {
    round(l.wq);
    round(l.wk);
    round(l.wv);
    round(l.wo);
    round(l.w_gate);
    round(l.w_up);
    round(l.w_down);
  }
  Model out = model;
  out.weights = std::make_shared<const ModelWeights>(std::move(w));
  return out;
}

std::vector<TokenId> prompt_tokens(std::size_t n, std::uint32_t seed, std::size_t vocab) {
  std::mt19937 rng(seed);
  std::vector<TokenId> t(n);
  for (TokenId& id : t) id = static_cast<TokenId>(rng() % vocab);
  return t;
}

// A device of either kind with its own page pool.
struct Rig {
  Rig(std::unique_ptr<Device> dev, std::size_t num_pages)
      : device(std::move(dev)), pool(num_pages) {
    device->init_kv_cache(num_pages, kPageTokens);
  }
  StepOutput step(std::vector<Work> work, const SamplingParams& sampling = testing::greedy()) {
    return testing::run_step(*device, pool, kPageTokens, std::move(work), sampling);
  }
  std::unique_ptr<Device> device;
  PagePool pool;
};

std::unique_ptr<Device> cuda_device(kernels::Ops& ops, const Model& model,
                                    kernels::KvDtype dtype = kernels::KvDtype::kBf16,
                                    bool return_logits = true, bool graphs = true,
                                    int* replays = nullptr, std::size_t width_quantum = 64) {
  // The device owns its Ops; tests share one per binary, so hand it a non-owning wrapper.
  struct Borrowed final : kernels::Ops {
    explicit Borrowed(kernels::Ops& o) : o_(o) {}
    std::string name() const override { return o_.name(); }
    bool is_gpu() const override { return o_.is_gpu(); }
    int multiprocessor_count() const override { return o_.multiprocessor_count(); }
    kernels::MemoryInfo memory_info() const override { return o_.memory_info(); }
    void* alloc(std::size_t b) override { return o_.alloc(b); }
    void free(void* p) override { o_.free(p); }
    void* alloc_host(std::size_t b) override { return o_.alloc_host(b); }
    void free_host(void* p) override { o_.free_host(p); }
    void copy_to_device(void* d, const void* s, std::size_t b) override {
      o_.copy_to_device(d, s, b);
    }
    void copy_to_host(void* d, const void* s, std::size_t b) override { o_.copy_to_host(d, s, b); }
    void copy_on_device(void* d, const void* s, std::size_t b) override {
      o_.copy_on_device(d, s, b);
    }
    void fill_zero(void* d, std::size_t b) override { o_.fill_zero(d, b); }
    void synchronize() override { o_.synchronize(); }
    void embedding(const kernels::EmbeddingParams& p) override { o_.embedding(p); }
    void rms_norm(const kernels::RmsNormParams& p) override { o_.rms_norm(p); }
    void silu_mul(const kernels::SiluMulParams& p) override { o_.silu_mul(p); }
    void rope_table(const kernels::RopeTableParams& p) override { o_.rope_table(p); }
    void rope_kv_write(const kernels::RopeKvParams& p) override { o_.rope_kv_write(p); }
    void decode_attention(const kernels::DecodeAttentionParams& p) override {
      o_.decode_attention(p);
    }
    void prefill_attention(const kernels::PrefillAttentionParams& p) override {
      o_.prefill_attention(p);
    }
    void argmax(const kernels::ArgmaxParams& p) override { o_.argmax(p); }
    void fill_random(const kernels::FillRandomParams& p) override { o_.fill_random(p); }
    void gemm(const kernels::GemmParams& p) override { o_.gemm(p); }
    double time_ms(const std::function<void()>& w) override { return o_.time_ms(w); }
    bool begin_capture() override { return o_.begin_capture(); }
    int end_capture() override { return o_.end_capture(); }
    void replay(int graph) override {
      if (replays_ != nullptr) ++*replays_;
      o_.replay(graph);
    }
    void release_graph(int graph) override { o_.release_graph(graph); }
    kernels::Ops& o_;
    int* replays_ = nullptr;
  };
  auto borrowed = std::make_unique<Borrowed>(ops);
  borrowed->replays_ = replays;
  auto device = make_cuda_device(model, std::move(borrowed),
                                 {.kv_dtype = dtype,
                                  .max_batch_tokens = 256,
                                  .max_seqs = 8,
                                  .return_logits = return_logits,
                                  .cuda_graphs = graphs,
                                  .decode_width_quantum_pages = width_quantum});
  EXPECT_TRUE(device.ok()) << device.error().message;
  return std::move(*device);
}

::testing::AssertionResult rows_near(std::span<const float> got, std::span<const float> want,
                                     std::size_t vocab, double relative) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << got.size() << " logits vs " << want.size();
  }
  for (std::size_t r = 0; r * vocab < got.size(); ++r) {
    const auto g = got.subspan(r * vocab, vocab);
    const auto w = want.subspan(r * vocab, vocab);
    const testing::Diff d = testing::diff(g, w);
    const double bound = relative * std::max(1.0, d.max_abs_want);
    if (d.max_abs_diff > bound) {
      return ::testing::AssertionFailure()
             << "row " << r << ": max abs diff " << d.max_abs_diff << " > " << bound;
    }
  }
  return ::testing::AssertionSuccess();
}

// The greedy token the cuda device took is (near) the best one by the cpu device's logits.
::testing::AssertionResult token_near_best(TokenId token, std::span<const float> cpu_logits,
                                           double relative) {
  const float best = *std::max_element(cpu_logits.begin(), cpu_logits.end());
  double scale = 1.0;
  for (float v : cpu_logits) scale = std::max(scale, static_cast<double>(std::abs(v)));
  if (best - cpu_logits[token] <= relative * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "token " << token << " has logit " << cpu_logits[token] << ", the best is " << best;
}

void expect_matches_cpu(kernels::Ops& ops, std::string_view model_name, std::size_t prompt_len,
                        std::size_t decode_steps) {
  const Model model = builtin(model_name);
  const Model model_bf16 = rounded_to_bf16(model);
  Rig cuda(cuda_device(ops, model), 64);
  Rig cpu(make_cpu_device(model_bf16, 1), 64);
  Sequence a{.tokens = prompt_tokens(prompt_len, 1, 256)};
  Sequence b = a;
  const std::size_t vocab = model.spec.vocab_size;
  std::size_t count = prompt_len;
  for (std::size_t step = 0; step <= decode_steps; ++step) {
    const StepOutput got = cuda.step({{&a, count, true}});
    const StepOutput want = cpu.step({{&b, count, true}});
    ASSERT_TRUE(rows_near(got.logits, want.logits, vocab, 1e-2)) << "step " << step;
    ASSERT_TRUE(token_near_best(got.tokens[0], want.logits, 1e-2)) << "step " << step;
    // Both continue from the cuda device's choice, so the contexts stay the same.
    b.tokens.back() = a.tokens.back();
    count = 1;
  }
}

TEST(CudaDeviceTest, ForwardPassMatchesCpuDeviceOnTinyModel) {
  PREFIXGATE_OPS_OR_SKIP(ops);
  expect_matches_cpu(ops, "builtin:tiny", 40, 4);
}

TEST(CudaDeviceTest, ForwardPassMatchesCpuDeviceOnSmallModel) {
  PREFIXGATE_OPS_OR_SKIP(ops);
  expect_matches_cpu(ops, "builtin:small", 37, 2);
}

TEST(CudaDeviceTest, CachedPrefixGivesTheSameLogitsAsCold) {
  PREFIXGATE_OPS_OR_SKIP(ops);
  const Model model = builtin("builtin:tiny");
  Rig rig(cuda_device(ops, model), 64);
  const std::vector<TokenId> prompt = prompt_tokens(50, 2, 256);
  // Cold: the whole prompt in one step.
  Sequence cold{.tokens = prompt};
  const StepOutput want = rig.step({{&cold, prompt.size(), true}});
  // Hit: a first request leaves 32 tokens (2 pages) of K/V; the second reuses those pages and
  // computes only the rest.
  Sequence first{.tokens = std::vector<TokenId>(prompt.begin(), prompt.begin() + 32)};
  rig.step({{&first, 32, false}});
  Sequence hit{.tokens = prompt, .pages = first.pages, .computed = 32};
  const StepOutput got = rig.step({{&hit, prompt.size() - 32, true}});
  EXPECT_TRUE(rows_near(got.logits, want.logits, model.spec.vocab_size, 1e-2));
  EXPECT_EQ(got.tokens, want.tokens);
}

TEST(CudaDeviceTest, BatchedAndChunkedEqualAlone) {
  PREFIXGATE_OPS_OR_SKIP(ops);
  const Model model = builtin("builtin:tiny");
  const std::size_t vocab = model.spec.vocab_size;
  const std::vector<TokenId> p1 = prompt_tokens(21, 3, 256), p2 = prompt_tokens(45, 4, 256);
  // Alone: each prompt in one step, then two decode steps.
  std::vector<std::vector<float>> alone;
  for (const auto* prompt : {&p1, &p2}) {
    Rig rig(cuda_device(ops, model), 64);
    Sequence s{.tokens = *prompt};
    std::size_t count = prompt->size();
    for (int step = 0; step < 3; ++step) {
      alone.push_back(rig.step({{&s, count, true}}).logits);
      count = 1;
    }
  }
  // Together, with p2 prefilled in two chunks (the first not sampled) beside p1's decodes.
  Rig rig(cuda_device(ops, model), 64);
  Sequence s1{.tokens = p1}, s2{.tokens = p2};
  const StepOutput first = rig.step({{&s1, 21, true}, {&s2, 30, false}});
  EXPECT_TRUE(rows_near(first.logits, alone[0], vocab, 1e-2));
  const StepOutput second = rig.step({{&s1, 1, true}, {&s2, 15, true}});
  EXPECT_TRUE(rows_near(std::span(second.logits).subspan(0, vocab), alone[1], vocab, 1e-2));
  EXPECT_TRUE(rows_near(std::span(second.logits).subspan(vocab, vocab), alone[3], vocab, 1e-2));
  const StepOutput third = rig.step({{&s1, 1, true}, {&s2, 1, true}});
  EXPECT_TRUE(rows_near(std::span(third.logits).subspan(0, vocab), alone[2], vocab, 1e-2));
  EXPECT_TRUE(rows_near(std::span(third.logits).subspan(vocab, vocab), alone[4], vocab, 1e-2));
}

// Decode steps replayed from graphs against the same steps launched directly: the graph holds
// parameters by value, so anything that changes per step must travel through device memory.
// Page tables padded to 2 pages (32 tokens) here, so that the decode steps cross two widths
// at which the step's shape, and graph, change; and a step where one sequence stops sampling
// changes the shape too. Prefill steps never use graphs.
TEST(CudaDeviceTest, DecodeGraphsGiveWhatDirectLaunchesGive) {
  PREFIXGATE_OPS_OR_SKIP(ops);
  const Model model = builtin("builtin:tiny");
  int replays = 0;
  Rig graphs(cuda_device(ops, model, kernels::KvDtype::kBf16, true, true, &replays, 2), 32);
  Rig direct(cuda_device(ops, model, kernels::KvDtype::kBf16, true, false, nullptr, 2), 32);
  Sequence a1{.tokens = prompt_tokens(25, 9, 256)}, b1{.tokens = prompt_tokens(50, 10, 256)};
  Sequence a2 = a1, b2 = b1;
  graphs.step({{&a1, 25, true}, {&b1, 50, true}});
  direct.step({{&a2, 25, true}, {&b2, 50, true}});
  for (int step = 0; step < 44; ++step) {
    const bool b_samples = step != 20;  // one step where b only writes its K/V
    const StepOutput got = graphs.step({{&a1, 1, true}, {&b1, 1, b_samples}});
    const StepOutput want = direct.step({{&a2, 1, true}, {&b2, 1, b_samples}});
    ASSERT_TRUE(rows_near(got.logits, want.logits, model.spec.vocab_size, 1e-5)) << step;
    ASSERT_EQ(got.tokens, want.tokens) << step;
    if (!b_samples) {  // keep b's two copies alike: it fed back a token it did not sample
      b1.tokens.push_back(7);
      b2.tokens.push_back(7);
    }
  }
  EXPECT_GT(a1.tokens.size(), 64u);  // a crossed 32 and 64 tokens: widths 2 and 4 pages
  EXPECT_EQ(replays, 44);
}

TEST(CudaDeviceTest, Fp8KvCacheStaysWithinStatedBoundOfBf16) {
  PREFIXGATE_OPS_OR_SKIP(ops);
  const Model model = builtin("builtin:tiny");
  Rig bf16(cuda_device(ops, model, kernels::KvDtype::kBf16), 64);
  Rig fp8(cuda_device(ops, model, kernels::KvDtype::kFp8E4m3), 64);
  // A page: 2 (K, V) x layers x KV heads x 16 slots x head_dim values, plus a 4-byte scale per
  // row in fp8.
  const std::size_t rows = 2 * model.spec.num_layers * model.spec.num_kv_heads * 16;
  EXPECT_EQ(bf16.device->kv_page_bytes(16), rows * model.spec.head_dim * 2);
  EXPECT_EQ(fp8.device->kv_page_bytes(16), rows * (model.spec.head_dim + 4));
  Sequence a{.tokens = prompt_tokens(60, 5, 256)};
  Sequence b = a;
  std::size_t count = 60;
  for (int step = 0; step < 3; ++step) {
    const StepOutput want = bf16.step({{&a, count, true}});
    const StepOutput got = fp8.step({{&b, count, true}});
    ASSERT_TRUE(rows_near(got.logits, want.logits, model.spec.vocab_size, 2e-2)) << step;
    b.tokens.back() = a.tokens.back();
    count = 1;
  }
}

TEST(CudaDeviceTest, SampledRowsDrawWhatTheHostSamplerDraws) {
  PREFIXGATE_OPS_OR_SKIP(ops);
  const Model model = builtin("builtin:tiny");
  const SamplingParams sampling{.temperature = 0.9, .top_p = 0.9, .top_k = 40, .seed = 7};
  // Without return_logits the device copies only the sampled rows' logits back.
  Rig lean(cuda_device(ops, model, kernels::KvDtype::kBf16, /*return_logits=*/false), 64);
  Rig full(cuda_device(ops, model), 64);
  Sequence a{.tokens = prompt_tokens(30, 6, 256)};
  Sequence b = a;
  std::size_t count = 30;
  for (int step = 0; step < 4; ++step) {
    const StepOutput got = lean.step({{&a, count, true}}, sampling);
    const StepOutput want = full.step({{&b, count, true}}, sampling);
    EXPECT_TRUE(got.logits.empty());
    ASSERT_EQ(got.tokens[0], sample_token(want.logits, sampling, b.generated - 1));
    count = 1;
  }
}

TEST(CudaDeviceTest, GeneratedWeightsAreDeterministic) {
  PREFIXGATE_OPS_OR_SKIP(ops);
  auto spec = builtin_spec("builtin:tiny");
  ASSERT_TRUE(spec.ok());
  std::vector<TokenId> tokens[2];
  for (auto& out : tokens) {
    std::unique_ptr<kernels::Ops> own_ops = kernels::make_emu_ops();
    if (ops.is_gpu()) {
      auto gpu = kernels::make_cuda_ops();
      ASSERT_TRUE(gpu.ok) << gpu.error;
      own_ops = std::move(gpu.ops);
    }
    auto device = make_generated_cuda_device(*spec, 42, std::move(own_ops),
                                             {.max_batch_tokens = 64, .max_seqs = 2});
    ASSERT_TRUE(device.ok()) << device.error().message;
    EXPECT_GT((*device)->weight_bytes(), 0u);
    Rig rig(std::move(*device), 16);
    Sequence s{.tokens = prompt_tokens(20, 8, 256)};
    std::size_t count = 20;
    for (int step = 0; step < 4; ++step) {
      rig.step({{&s, count, true}});
      count = 1;
    }
    out = s.tokens;
  }
  EXPECT_EQ(tokens[0], tokens[1]);
}

TEST(CudaDeviceTest, RefusesShapesTheKernelsDoNotHave) {
  auto spec = builtin_spec("builtin:tiny");
  ASSERT_TRUE(spec.ok());
  spec->head_dim = 48;
  auto device = make_generated_cuda_device(*spec, 1, kernels::make_emu_ops(), {});
  ASSERT_FALSE(device.ok());
  EXPECT_NE(device.error().message.find("head_dim must be 16, 32, 64, 128 or 256"),
            std::string::npos)
      << device.error().message;
}

TEST(CudaDeviceTest, KvPagesForUtilization) {
  EXPECT_EQ(kv_pages_for_utilization(1000, 0.5, 100), 5u);
  EXPECT_EQ(kv_pages_for_utilization(1000, 1.5, 100), 10u);  // capped at all of it
  EXPECT_EQ(kv_pages_for_utilization(1000, 0.0, 100), 0u);
  EXPECT_EQ(kv_pages_for_utilization(99, 1.0, 100), 0u);
}

}  // namespace
}  // namespace prefixgate::engine
