// The engine thread: the single owner of the scheduler, the KV cache and the device.
//
// HTTP threads hand it requests with submit() and get results back through the request's own
// EventSink, called on the engine thread after every step that touched the request; abort()
// (client gone) ends a request and frees its pages. Cache changes go to a KvEventLog that
// /v1/kv_events readers follow; stats() is a snapshot taken after every step.
//
//   engine::EngineLoop loop(config, std::move(device));
//   auto id = loop.submit(request, [](const engine::GenerationEvent& e) { /* post to client */ });
//   loop.abort(id);
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "prefixgate/engine/device.h"
#include "prefixgate/engine/radix_cache.h"
#include "prefixgate/engine/scheduler.h"
#include "prefixgate/engine/speed_estimator.h"

namespace prefixgate::engine {

struct EngineConfig {
  SchedulerConfig scheduler;
  std::size_t page_tokens = 16;
  std::size_t num_pages = 4096;
  std::string model_id;  // seeds the block hashes the cache reports
  // Cache events kept for /v1/kv_events readers that fall behind (about 160 bytes each with
  // 16-token blocks: 65,536 hold ~10 MB, filled after that many events).
  std::size_t kv_events_history = 65536;
};

struct GenerationRequest {
  std::string salt;
  std::vector<canon::TokenId> prompt;
  SamplingParams sampling;
};

// What happened to one request in one step. The last event of a request has `finished` set.
struct GenerationEvent {
  std::uint64_t id = 0;
  std::vector<canon::TokenId> tokens;  // generated this step (zero or one today)
  FinishReason finished = FinishReason::kNone;
  std::size_t prompt_tokens = 0;
  std::size_t cached_tokens = 0;
  bool first_token = false;
};

// Called on the engine thread: must be quick and must not call back into the loop.
using EventSink = std::function<void(const GenerationEvent&)>;

// Cache events in order, numbered from 1, with a bounded history so a reader that fell behind
// can tell it must start over from a snapshot.
class KvEventLog {
 public:
  struct Entry {
    std::uint64_t seq = 0;
    CacheEvent event;
  };
  explicit KvEventLog(std::size_t history = 65536) : history_(history) {}

  void append(std::vector<CacheEvent> events);
  // Events after `since`; nullopt when some of them were already dropped (a gap).
  std::optional<std::vector<Entry>> since(std::uint64_t since) const;
  std::uint64_t last_seq() const;
  // Blocks until an event after `since` exists or `timeout` passes.
  void wait_after(std::uint64_t since, std::chrono::milliseconds timeout) const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::deque<Entry> entries_;
  std::size_t history_;
  std::uint64_t last_seq_ = 0;
};

struct EngineStats {
  SchedulerStats scheduler;
  std::size_t kv_pages_total = 0;
  std::size_t kv_pages_used = 0;
  std::size_t kv_pages_cached = 0;
  std::size_t kv_pages_evictable = 0;
  std::uint64_t steps = 0;
  std::uint64_t generated_tokens_total = 0;
  std::uint64_t prefill_tokens_computed_total = 0;
  // Announced in load reports: the device's own (the sim device's, from its profile), else as
  // measured from its steps (SpeedEstimator); zero until known.
  DeviceSpeed speed;
  // Wall seconds of a step, smoothed over recent steps: turns steps_until_admission into the
  // admission wait a load report announces.
  double step_seconds = 0;
};

// A consistent view of the cache for a kv_events snapshot: the blocks, and the sequence number
// of the last event they include.
struct CacheSnapshot {
  std::vector<CachedBlock> blocks;
  std::uint64_t seq = 0;
};

class EngineLoop {
 public:
  EngineLoop(EngineConfig config, std::unique_ptr<Device> device);
  ~EngineLoop();  // aborts whatever still runs and joins the thread
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Any thread. The sink receives every event of the request, the last with `finished`.
  std::uint64_t submit(GenerationRequest request, EventSink sink);
  // Any thread. Ends the request (its sink gets a final kAbort event) unless it already ended.
  void abort(std::uint64_t id);

  EngineStats stats() const;
  const Device& device() const { return *device_; }
  const EngineConfig& config() const { return config_; }
  KvEventLog& kv_events() { return events_; }
  // Taken on the engine thread between steps; waits for it.
  CacheSnapshot cache_snapshot();

  // Stops taking requests' steps once none is in flight (for graceful shutdown): returns when
  // every submitted request has finished or `timeout` passed.
  bool wait_idle(std::chrono::milliseconds timeout);

 private:
  void run();
  void deliver(const std::vector<SequenceUpdate>& updates);

  EngineConfig config_;
  std::unique_ptr<Device> device_;
  PagePool pool_;
  RadixCache cache_;
  Scheduler scheduler_;
  KvEventLog events_;
  // Engine thread only: the speed measured from steps, announced when the device declares none.
  bool measure_speed_ = false;
  SpeedEstimator speed_estimator_;
  double step_seconds_ = 0;  // smooth_step_seconds of the steps so far

  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::vector<std::pair<SequenceRequest, EventSink>> inbox_;
  std::vector<std::uint64_t> aborts_;
  std::vector<std::function<void()>> tasks_;            // run on the engine thread between steps
  std::unordered_map<std::uint64_t, EventSink> sinks_;  // engine thread only
  std::size_t in_flight_ = 0;
  EngineStats stats_;
  std::uint64_t next_id_ = 1;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace prefixgate::engine
