// RadixCache costs on the scheduler thread, where every microsecond delays a whole batch:
// matching and inserting a 32k-token prompt (2048 blocks of 16) fully cached and cold, lock and
// unlock of its path, eviction throughput in pages per second, and a request mix in requests
// per second (match, lock, allocate with eviction, insert, unlock, release).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "prefixgate/canonicalize/block_hash.h"
#include "prefixgate/engine/page_pool.h"
#include "prefixgate/engine/radix_cache.h"

namespace prefixgate::engine {
namespace {

constexpr std::size_t kPageTokens = canon::kDefaultBlockSize;
constexpr std::size_t kPromptTokens = 32 * 1024;
constexpr std::size_t kPromptBlocks = kPromptTokens / kPageTokens;
constexpr char kModel[] = "bench-model";

std::vector<TokenId> random_tokens(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<TokenId> tokens(n);
  for (auto& t : tokens) t = rng() % 128000;
  return tokens;
}

std::vector<PageId> allocate(PagePool& pool, std::size_t n) {
  std::vector<PageId> pages;
  if (!pool.allocate(n, pages)) std::abort();
  return pages;
}

void BM_MatchPrefix32kFullyCached(benchmark::State& state) {
  PagePool pool(kPromptBlocks);
  RadixCache cache(pool, kPageTokens, kModel);
  const auto tokens = random_tokens(kPromptTokens, 1);
  cache.insert("", tokens, allocate(pool, kPromptBlocks));
  for (auto _ : state) {
    auto m = cache.match_prefix("", tokens);
    benchmark::DoNotOptimize(m.pages.data());
    if (m.tokens != kPromptTokens) state.SkipWithError("prompt not fully matched");
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kPromptTokens));
}
BENCHMARK(BM_MatchPrefix32kFullyCached)->Unit(benchmark::kMicrosecond);

// A cold prompt under a salt that has other prompts cached: the walk stops at the first block.
void BM_MatchPrefix32kCold(benchmark::State& state) {
  PagePool pool(kPromptBlocks);
  RadixCache cache(pool, kPageTokens, kModel);
  cache.insert("", random_tokens(kPromptTokens, 1), allocate(pool, kPromptBlocks));
  const auto tokens = random_tokens(kPromptTokens, 2);
  for (auto _ : state) {
    auto m = cache.match_prefix("", tokens);
    benchmark::DoNotOptimize(m.pages.data());
  }
}
BENCHMARK(BM_MatchPrefix32kCold)->Unit(benchmark::kMicrosecond);

void BM_Insert32kCold(benchmark::State& state) {
  PagePool pool(kPromptBlocks);
  RadixCache cache(pool, kPageTokens, kModel);
  const auto tokens = random_tokens(kPromptTokens, 1);
  const auto pages = allocate(pool, kPromptBlocks);  // the caller keeps its references
  std::vector<PageId> cached;
  for (auto _ : state) {
    cache.insert("", tokens, pages, &cached);
    state.PauseTiming();
    cache.clear();
    cache.drain_events();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kPromptTokens));
}
BENCHMARK(BM_Insert32kCold)->Unit(benchmark::kMicrosecond);

void BM_Insert32kFullyCached(benchmark::State& state) {
  PagePool pool(2 * kPromptBlocks);
  RadixCache cache(pool, kPageTokens, kModel);
  const auto tokens = random_tokens(kPromptTokens, 1);
  cache.insert("", tokens, allocate(pool, kPromptBlocks));
  const auto mine = allocate(pool, kPromptBlocks);
  std::vector<PageId> cached;
  for (auto _ : state) {
    cache.insert("", tokens, mine, &cached);
    benchmark::DoNotOptimize(cached.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kPromptTokens));
}
BENCHMARK(BM_Insert32kFullyCached)->Unit(benchmark::kMicrosecond);

void BM_LockUnlock32k(benchmark::State& state) {
  PagePool pool(kPromptBlocks);
  RadixCache cache(pool, kPageTokens, kModel);
  const auto tokens = random_tokens(kPromptTokens, 1);
  RadixCache::Node* node = cache.insert("", tokens, allocate(pool, kPromptBlocks));
  for (auto _ : state) {
    cache.lock(node);
    cache.unlock(node);
  }
}
BENCHMARK(BM_LockUnlock32k)->Unit(benchmark::kMicrosecond);

// Evicts a cache of many short cached conversations (4096 prompts of 4 blocks sharing nothing)
// down to empty; items are pages freed.
void BM_EvictAll(benchmark::State& state) {
  constexpr std::size_t kPrompts = 4096;
  constexpr std::size_t kBlocks = 4;
  PagePool pool(kPrompts * kBlocks);
  RadixCache cache(pool, kPageTokens, kModel);
  std::vector<std::vector<TokenId>> prompts;
  for (std::size_t i = 0; i < kPrompts; ++i) {
    prompts.push_back(random_tokens(kBlocks * kPageTokens, static_cast<std::uint32_t>(i)));
  }
  for (auto _ : state) {
    state.PauseTiming();
    for (const auto& prompt : prompts) {
      const auto pages = allocate(pool, kBlocks);
      cache.insert("", prompt, pages);
      for (PageId p : pages) pool.release(p);
    }
    cache.drain_events();
    state.ResumeTiming();
    if (cache.evict(kPrompts * kBlocks) != kPrompts * kBlocks) state.SkipWithError("short");
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kPrompts * kBlocks));
}
BENCHMARK(BM_EvictAll)->Unit(benchmark::kMicrosecond);

// A scheduler's request path: one of 32 shared 1024-token system prompts plus a fresh
// 256-token user turn under one of two salts, in a pool a quarter the size of the system
// prompts' blocks, so most admissions evict.
void BM_RequestMix(benchmark::State& state) {
  constexpr std::size_t kSystemPrompts = 32;
  PagePool pool(1024);
  RadixCache cache(pool, kPageTokens, kModel);
  std::vector<std::vector<TokenId>> systems;
  for (std::uint32_t i = 0; i < kSystemPrompts; ++i) systems.push_back(random_tokens(1024, i));
  std::mt19937 rng(99);
  std::vector<TokenId> tokens;
  std::vector<PageId> pages;
  std::vector<PageId> cached;
  for (auto _ : state) {
    tokens = systems[rng() % kSystemPrompts];
    for (int i = 0; i < 256; ++i) tokens.push_back(rng() % 128000);
    const char* salt = (rng() & 1) ? "tenant-a" : "tenant-b";
    auto m = cache.match_prefix(salt, tokens);
    cache.lock(m.node);
    pages = m.pages;
    for (PageId p : pages) pool.retain(p);
    const std::size_t needed = tokens.size() / kPageTokens - pages.size();
    if (pool.free_count() < needed) cache.evict(needed - pool.free_count());
    if (!pool.allocate(needed, pages)) {
      state.SkipWithError("pool too small");
      break;
    }
    RadixCache::Node* node = cache.insert(salt, tokens, pages, &cached);
    cache.lock(node);
    cache.unlock(m.node);
    cache.unlock(node);
    for (PageId p : pages) pool.release(p);
    benchmark::DoNotOptimize(cache.drain_events());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_RequestMix)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace prefixgate::engine
