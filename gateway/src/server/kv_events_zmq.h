// Following vLLM's and SGLang's KV-event streams (upstreams of kind vllm and sglang): one thread
// owns every ZeroMQ socket (libzmq sockets are neither thread-safe nor Asio's) and polls them
// all. Per replica and data-parallel rank: a SUB socket on the engine's PUB endpoint, a DEALER on
// its replay ROUTER when there is one, and a monitor that says when the SUB connection is up.
// Each rank's batches go through a KvEventStream (sequence checks, replay, restarts) into our
// keys, the ranks are merged per replica (ReplicaKeys), and the changes are applied to the
// ReplicaSet under its lock: the only state shared with the Asio threads, with the metrics.
//
//   KvEventFollowers followers(ctx);   // ctx.replicas, ctx.models and ctx.m must exist
//   followers.start();                 // the thread; sockets connect in the background
//   ...
//   followers.stop();                  // shuts the ZeroMQ context down: the thread wakes, joins
#pragma once

#include <memory>

#include "server/context.h"

namespace prefixgate::gateway::server {

struct KvEventFollowerOptions {
  // How long a replay may go without an answer before what it should have brought counts as lost.
  std::chrono::milliseconds replay_timeout{2000};
  // Upper bound on one wait for socket activity (also how often replay deadlines are checked).
  std::chrono::milliseconds poll_interval{50};
};

class KvEventFollowers {
 public:
  explicit KvEventFollowers(GatewayContext& ctx, KvEventFollowerOptions options = {});
  ~KvEventFollowers();  // stop()
  KvEventFollowers(const KvEventFollowers&) = delete;
  KvEventFollowers& operator=(const KvEventFollowers&) = delete;

  // Opens the sockets of every vllm and sglang upstream and starts the thread (no-op without
  // any). kInternal when ZeroMQ cannot set up a socket.
  Status start();
  // Any thread, idempotent: ends the thread and closes every socket.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prefixgate::gateway::server
