// A test double of a vLLM (or SGLang) replica, written from their documented formats rather than
// from prefixgate's: an OpenAI-compatible HTTP server (/health, /v1/models, completions that
// answer one token with usage, and /metrics under vLLM's or SGLang's names with a load the test
// sets), and per data-parallel rank a ZeroMQ PUB socket publishing KV-event batches
// ([topic, 8-byte big-endian sequence, msgpack], either encoding, either hash form, through
// support/vllm_wire.h) with a ROUTER replay socket over its buffer. The test drives the stream:
// what is stored or removed, batches numbered but never sent (a drop), a replay buffer that
// forgets, sequence numbers that start over (a restart), and frames of any shape.
//
//   FakeVllm vllm({.form = vllm_wire::Form::kArray});
//   auto gw = start_gateway(port, {"--upstream", vllm.upstream_spec()});
//   vllm.store(tokens);            // BlockStored of every block of `tokens`, from the root
//   vllm.drop_next(2);             // the next two batches are lost on the way (replay has them)
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/vllm_wire.h"

namespace prefixgate::gateway::testing {

namespace vllm_wire = prefixgate::testing::vllm_wire;

struct FakeVllmOptions {
  std::string kind = "vllm";  // "vllm" or "sglang": the metric names and the upstream kind
  vllm_wire::Form form = vllm_wire::Form::kMap;
  vllm_wire::Hashes hashes = vllm_wire::Hashes::kInteger;
  bool sglang_layout = false;   // array form: SGLang's field layout
  std::size_t ranks = 1;        // data-parallel ranks: one PUB (and ROUTER) each, ports consecutive
  std::size_t block_size = 16;  // the engine's
  bool replay = true;
};

class FakeVllm {
 public:
  explicit FakeVllm(FakeVllmOptions options = {});
  ~FakeVllm();
  FakeVllm(const FakeVllm&) = delete;
  FakeVllm& operator=(const FakeVllm&) = delete;

  std::uint16_t http_port() const { return http_port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(http_port_); }
  std::string kv_events_endpoint() const;  // rank 0's PUB
  std::string replay_endpoint() const;     // rank 0's ROUTER ("" without replay)
  // The --upstream value for this replica ("URL;kind=...;kv_events=...;...").
  std::string upstream_spec() const;

  // The engine's hash of a block: its own function (FNV-1a over the parent and the tokens),
  // nothing like prefixgate's chained XXH3.
  static std::uint64_t engine_hash(std::uint64_t parent, const std::uint32_t* tokens,
                                   std::size_t n);
  // The engine hashes of every full block of `tokens` (block_size each).
  std::vector<std::uint64_t> block_hashes(const std::vector<std::uint32_t>& tokens) const;

  // Publishing, from the test's thread. Each call is one batch.
  // Engine blocks [first, end) of `tokens` (a chain from the root), parent = block first - 1.
  void store(const std::vector<std::uint32_t>& tokens, std::size_t first = 0, std::size_t rank = 0,
             const std::string& medium = "GPU", const std::string& salt = "");
  void remove(const std::vector<std::uint32_t>& tokens, const std::vector<std::size_t>& blocks,
              std::size_t rank = 0, const std::string& medium = "GPU");
  void clear(std::size_t rank = 0);
  // A batch of these bytes under the next sequence number (undecodable ones, say).
  void send_payload(const std::string& payload, std::size_t rank = 0);
  // A message of any frames, no sequence number taken.
  void send_frames(const std::vector<std::string>& frames, std::size_t rank = 0);
  // The next `n` batches get their sequence numbers and reach the replay buffer, but are never
  // sent on the PUB socket.
  void drop_next(std::size_t n, std::size_t rank = 0);
  // The replay buffer forgets everything published so far.
  void forget_replay_buffer(std::size_t rank = 0);
  // The engine restarts: sequence numbers from 0, an empty replay buffer.
  void restart(std::size_t rank = 0);
  std::int64_t next_sequence(std::size_t rank = 0) const;

  // What /metrics reports.
  void set_load(double running, double waiting, double kv_usage);
  std::size_t completions() const { return completions_.load(); }

 private:
  struct Rank;
  struct Http;
  void publish(const std::vector<vllm_wire::Event>& events, std::size_t rank);
  void publish_payload(std::string payload, std::size_t rank);
  void serve_replays();

  FakeVllmOptions options_;
  void* zctx_ = nullptr;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::atomic<bool> stop_{false};
  std::unique_ptr<std::thread> replay_thread_;
  std::unique_ptr<Http> http_;
  std::uint16_t http_port_ = 0;
  std::atomic<std::size_t> completions_{0};
  mutable std::mutex load_mu_;
  double running_ = 0, waiting_ = 0, kv_usage_ = 0;

  friend struct Http;
};

}  // namespace prefixgate::gateway::testing
