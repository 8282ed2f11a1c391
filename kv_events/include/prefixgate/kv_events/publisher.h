// A KV-event publisher with vLLM's protocol (wire.h): a ZeroMQ PUB socket that sends every batch
// as [topic, sequence, payload], numbered from 0, and an optional ROUTER socket that replays the
// last `buffer_batches` batches to a client that asks from a sequence number, then sends the end
// marker. One thread owns both sockets; publish() hands it payloads from any thread.
//
//   auto pub = kv_events::ZmqPublisher::start({.endpoint = "tcp://*:5557",
//                                              .replay_endpoint = "tcp://*:5558"});
//   if (!pub) return fail(pub.error().message);          // a bad or busy endpoint
//   (*pub)->publish(kv_events::encode_event_batch(batch));
//   std::cout << (*pub)->endpoint();                       // as bound: tcp://0.0.0.0:5557
//
// Both endpoints are bound (vLLM connects instead when the host is not a wildcard; a router in
// front of prefixgate-engine connects to it, so binding is what it needs). A tcp:// port of 0 or
// `*` picks a free port; endpoint() says which.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "prefixgate/base/status.h"

namespace prefixgate::kv_events {

struct PublisherOptions {
  std::string endpoint = "tcp://*:5557";
  std::string replay_endpoint = {};    // "": no replay socket
  std::size_t buffer_batches = 10000;  // batches kept for replay
  std::string topic = {};              // the first frame of every message
  int send_hwm = 100000;               // messages queued per subscriber before PUB drops
};

class ZmqPublisher {
 public:
  // Binds the sockets and starts the thread. kInvalidValue (param "endpoint" or
  // "replay_endpoint") when an endpoint cannot be bound.
  static Result<std::unique_ptr<ZmqPublisher>> start(PublisherOptions options);
  // Sends what is queued (for up to a second), then closes the sockets and joins the thread.
  ~ZmqPublisher();
  ZmqPublisher(const ZmqPublisher&) = delete;
  ZmqPublisher& operator=(const ZmqPublisher&) = delete;

  // Any thread: queues one encoded batch; it gets the next sequence number when sent.
  void publish(std::string payload);

  const std::string& endpoint() const;         // as bound, e.g. tcp://127.0.0.1:41234
  const std::string& replay_endpoint() const;  // "" without a replay socket
  std::uint64_t published() const;             // batches sent so far

 private:
  struct Impl;
  explicit ZmqPublisher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace prefixgate::kv_events
