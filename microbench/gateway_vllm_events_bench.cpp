// A vLLM or SGLang replica's KV events, as the gateway follows them (`kind: vllm` or `sglang`):
// each msgpack batch off the ZeroMQ socket decoded (kv_events/), and each block's keys, ours,
// recomputed from its token ids and the chain it continues (EngineBlockKeys, behind
// KvEventStream), which is what the index is then told. What one block costs here is what
// following a fleet of such replicas costs a gateway for each block their prefills store and
// their caches evict; the index's own share is gateway_index_scale_bench's.
//
//   BM_VllmEventBatch   a batch as a replica publishes it after a prefill: a BlockStored of 16
//                       new blocks of 16 tokens (continuing one of 64 conversations) and a
//                       BlockRemoved of the 16 it stored 1,024 batches before (a full cache
//                       evicting as much as it stores). items/s: blocks, stored and removed.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "prefixgate/gateway/kv_event_stream.h"
#include "prefixgate/kv_events/wire.h"
#include "synthetic_hashes.h"

namespace prefixgate::gateway {
namespace {

constexpr std::size_t kBlocksPerBatch = 16;
constexpr std::size_t kTokensPerBlock = 16;
constexpr std::size_t kConversations = 64;
constexpr std::size_t kEvictedAfter = 1024;  // batches
constexpr std::size_t kBatches = 8192;       // encoded once, replayed in order

std::uint64_t engine_hash(std::size_t batch, std::size_t i) {
  return synthetic_hashes::mix(0x7e11a000000 ^ (batch * kBlocksPerBatch + i));
}

// The batches, each continuing its conversation's chain from the block its last batch ended on
// (the first batch of each conversation starts a chain: no parent).
const std::vector<std::string>& batches() {
  static const std::vector<std::string> all = [] {
    std::vector<std::string> out;
    std::vector<std::uint32_t> tokens(kBlocksPerBatch * kTokensPerBlock);
    for (std::size_t b = 0; b < kBatches; ++b) {
      kv_events::BlockStored stored;
      for (std::size_t i = 0; i < kBlocksPerBatch; ++i)
        stored.block_hashes.push_back(engine_hash(b, i));
      if (b >= kConversations) stored.parent = engine_hash(b - kConversations, kBlocksPerBatch - 1);
      for (std::size_t t = 0; t < tokens.size(); ++t) {
        tokens[t] =
            static_cast<std::uint32_t>(synthetic_hashes::mix(b * tokens.size() + t) % 128000);
      }
      stored.token_ids = tokens;
      stored.block_size = kTokensPerBlock;
      kv_events::EventBatch batch;
      batch.ts = 1.0 + static_cast<double>(b) * 1e-3;
      batch.events.emplace_back(std::move(stored));
      if (b >= kEvictedAfter) {
        kv_events::BlockRemoved removed;
        for (std::size_t i = 0; i < kBlocksPerBatch; ++i) {
          removed.block_hashes.push_back(engine_hash(b - kEvictedAfter, i));
        }
        batch.events.emplace_back(std::move(removed));
      }
      out.push_back(kv_events::encode_event_batch(batch));
    }
    return out;
  }();
  return all;
}

void BM_VllmEventBatch(benchmark::State& state) {
  const std::vector<std::string>& all = batches();
  std::vector<KeyChange> changes;
  KvEventStream stream(BlockKeysConfig{}, KvStreamOptions{});
  // Once through, untimed, so that the maps and arrays have grown to what the replica's
  // blocks need, as a gateway's have after its first minutes.
  for (std::size_t b = 0; b < kBatches; ++b) {
    changes.clear();
    stream.live(static_cast<std::int64_t>(b), all[b], changes);
  }
  std::size_t blocks = 0;
  std::size_t next = kBatches;
  for (auto _ : state) {
    if (next == kBatches) {
      // The batches again from the first: a sequence number that starts over is an engine that
      // restarted, whose blocks the stream forgets (keeping its memory) before the batch.
      state.PauseTiming();
      changes.clear();
      stream.live(0, all[0], changes);
      next = 1;
      state.ResumeTiming();
    }
    changes.clear();
    stream.live(static_cast<std::int64_t>(next), all[next], changes);
    blocks += next >= kEvictedAfter ? 2 * kBlocksPerBatch : kBlocksPerBatch;
    ++next;
    benchmark::DoNotOptimize(changes.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(blocks));
}
BENCHMARK(BM_VllmEventBatch);

}  // namespace
}  // namespace prefixgate::gateway
