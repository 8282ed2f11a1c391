// prefixgate-engine's cache events in vLLM's protocol (kv_events/wire.h): a thread follows the
// engine's KvEventLog, as /v1/kv_events readers do, and publishes what each step changed as one
// KVEventBatch (map form, integer block hashes, the blocks' token ids) on a ZeroMQ PUB socket,
// with a replay socket over the last `buffer_batches` batches. Routers built for vLLM (and the
// gateway's `kind: vllm`) can then follow prefixgate-engine.
//
//   auto events = ZmqKvEvents::start(engine, {.endpoint = "tcp://*:5557",
//                                             .replay_endpoint = "tcp://*:5558"});
//   if (!events) return fail(events.error().message);
//   ... (*events) is destroyed before the engine
#pragma once

#include <memory>
#include <string>

#include "prefixgate/base/status.h"
#include "prefixgate/engine/engine_loop.h"
#include "prefixgate/kv_events/events.h"

namespace prefixgate::engine::server {

struct ZmqKvEventsOptions {
  std::string endpoint;                // "": not published
  std::string replay_endpoint = {};    // "": no replay socket
  std::size_t buffer_batches = 10000;  // vLLM's buffer_steps
};

class ZmqKvEvents {
 public:
  // Binds the sockets and starts following the log from its first event.
  static Result<std::unique_ptr<ZmqKvEvents>> start(EngineLoop& engine, ZmqKvEventsOptions options);
  ~ZmqKvEvents();  // publishes what the log already holds, then stops
  ZmqKvEvents(const ZmqKvEvents&) = delete;
  ZmqKvEvents& operator=(const ZmqKvEvents&) = delete;

  const std::string& endpoint() const;         // as bound
  const std::string& replay_endpoint() const;  // "" without one

 private:
  struct Impl;
  explicit ZmqKvEvents(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The log's events as vLLM events: consecutive stores of one chain become one BlockStored
// (its parent the block before, or none at the root of the chain's salt, with the salt as the
// first block's extra key), consecutive removals one BlockRemoved. Exposed for tests.
kv_events::EventBatch to_vllm_batch(const std::vector<KvEventLog::Entry>& entries,
                                    std::size_t block_size, double ts);

}  // namespace prefixgate::engine::server
