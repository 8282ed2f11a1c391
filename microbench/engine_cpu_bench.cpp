// The cpu device on builtin:small: what a prefix-cache hit saves on a 2k-token prompt, and
// decode throughput at batch 1 and 16.
//
//   build/release/microbench/engine_bench --benchmark_filter=Cpu
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <numeric>
#include <vector>

#include "prefixgate/engine/cpu_device.h"
#include "prefixgate/engine/model.h"

namespace prefixgate::engine {
namespace {

constexpr std::size_t kPageTokens = 16;

const Model& small_model() {
  static const Model model = [] {
    auto m = load_model("builtin:small");
    if (!m) std::abort();
    return std::move(*m);
  }();
  return model;
}

std::vector<canon::TokenId> prompt(std::size_t n, std::size_t salt) {
  std::vector<canon::TokenId> t(n);
  for (std::size_t i = 0; i < n; ++i)
    t[i] = static_cast<canon::TokenId>((i * 131 + salt * 17) % 256);
  return t;
}

// Pages [first, first + count) as a page table.
std::vector<PageId> page_range(std::size_t first, std::size_t count) {
  std::vector<PageId> pages(count);
  std::iota(pages.begin(), pages.end(), static_cast<PageId>(first));
  return pages;
}

const SamplingParams kGreedy{.temperature = 0.0};

// A 2048-token prompt of which the first `cached` tokens' K/V are already in the pages (computed
// once before timing); each iteration computes the rest and samples the first output token.
void prefill(benchmark::State& state, std::size_t cached) {
  constexpr std::size_t kPrompt = 2048;
  auto device = make_cpu_device(small_model());
  device->init_kv_cache(kPrompt / kPageTokens, kPageTokens);
  const auto tokens = prompt(kPrompt, 0);
  const auto pages = page_range(0, kPrompt / kPageTokens);
  if (cached > 0) {
    const SequenceStep warm{.tokens = std::span(tokens).first(cached), .pages = pages};
    device->execute(std::span(&warm, 1));
  }
  const SequenceStep step{.tokens = std::span(tokens).subspan(cached),
                          .start_position = cached,
                          .pages = pages,
                          .sample = true,
                          .sampling = &kGreedy};
  for (auto _ : state) {
    StepOutput out = device->execute(std::span(&step, 1));
    benchmark::DoNotOptimize(out.tokens);
  }
  state.counters["computed_tokens"] = static_cast<double>(kPrompt - cached);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * (kPrompt - cached)));
}

void BM_CpuPrefill2kCold(benchmark::State& state) {
  prefill(state, 0);
}
void BM_CpuPrefill2kCached1920(benchmark::State& state) {
  prefill(state, 1920);
}
BENCHMARK(BM_CpuPrefill2kCold)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CpuPrefill2kCached1920)->Unit(benchmark::kMillisecond)->UseRealTime();

// One decode step for `batch` sequences that each have 512 tokens of context. Each iteration
// writes the same next position again, so the context stays 512 + 1. items/s = tokens/s.
void BM_CpuDecode(benchmark::State& state) {
  constexpr std::size_t kContext = 512;
  const auto batch = static_cast<std::size_t>(state.range(0));
  const std::size_t pages_per_seq = kContext / kPageTokens + 1;
  auto device = make_cpu_device(small_model());
  device->init_kv_cache(batch * pages_per_seq, kPageTokens);
  std::vector<std::vector<canon::TokenId>> tokens;
  std::vector<std::vector<PageId>> pages;
  for (std::size_t s = 0; s < batch; ++s) {
    tokens.push_back(prompt(kContext + 1, s));
    pages.push_back(page_range(s * pages_per_seq, pages_per_seq));
    const SequenceStep warm{.tokens = std::span(tokens[s]).first(kContext), .pages = pages[s]};
    device->execute(std::span(&warm, 1));
  }
  std::vector<SequenceStep> steps;
  for (std::size_t s = 0; s < batch; ++s) {
    steps.push_back(SequenceStep{.tokens = std::span(tokens[s]).subspan(kContext, 1),
                                 .start_position = kContext,
                                 .pages = pages[s],
                                 .sample = true,
                                 .sampling = &kGreedy});
  }
  for (auto _ : state) {
    StepOutput out = device->execute(steps);
    benchmark::DoNotOptimize(out.tokens);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * batch));
}
BENCHMARK(BM_CpuDecode)->Arg(1)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace prefixgate::engine
