// ZmqPublisher on loopback with a real subscriber: frames as vLLM sends them, sequence numbers
// from 0, replay from a sequence number to the end marker, and endpoints bound on free ports.
#include "prefixgate/kv_events/publisher.h"

#include <gtest/gtest.h>
#include <zmq.h>

#include <chrono>
#include <thread>

#include "prefixgate/kv_events/wire.h"

namespace prefixgate::kv_events {
namespace {

std::vector<std::string> recv_message(void* socket, int timeout_ms) {
  zmq_pollitem_t item{socket, 0, ZMQ_POLLIN, 0};
  if (zmq_poll(&item, 1, timeout_ms) <= 0) return {};
  std::vector<std::string> frames;
  for (;;) {
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, socket, 0) < 0) {
      zmq_msg_close(&msg);
      return {};
    }
    frames.emplace_back(static_cast<const char*>(zmq_msg_data(&msg)), zmq_msg_size(&msg));
    const bool more = zmq_msg_more(&msg) != 0;
    zmq_msg_close(&msg);
    if (!more) return frames;
  }
}

struct Context {
  void* ctx = zmq_ctx_new();
  ~Context() { zmq_ctx_term(ctx); }
};
struct Socket {
  Socket(void* ctx, int type) : s(zmq_socket(ctx, type)) {
    const int linger = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
  }
  ~Socket() { zmq_close(s); }
  void* s;
};

std::string batch_payload(EngineHash h) {
  BlockRemoved removed;
  removed.block_hashes = {h};
  EventBatch b;
  b.events.emplace_back(std::move(removed));
  return encode_event_batch(b);
}

TEST(ZmqPublisherTest, PublishesNumberedFramesAndReplaysFromASequenceNumber) {
  auto pub = ZmqPublisher::start({.endpoint = "tcp://127.0.0.1:0",
                                  .replay_endpoint = "tcp://127.0.0.1:*",
                                  .buffer_batches = 3,
                                  .topic = "kv"});
  ASSERT_TRUE(pub.ok()) << pub.error().message;
  ASSERT_TRUE((*pub)->endpoint().starts_with("tcp://127.0.0.1:"));
  ASSERT_NE((*pub)->endpoint(), "tcp://127.0.0.1:0");

  Context ctx;
  Socket sub(ctx.ctx, ZMQ_SUB);
  zmq_setsockopt(sub.s, ZMQ_SUBSCRIBE, "", 0);
  ASSERT_EQ(zmq_connect(sub.s, (*pub)->endpoint().c_str()), 0);
  // A SUB socket joins asynchronously: publish until one message arrives (the slow-joiner
  // problem; what a real subscriber fixes with replay).
  std::vector<std::string> first;
  for (int i = 0; i < 200 && first.empty(); ++i) {
    (*pub)->publish(batch_payload(static_cast<EngineHash>(i)));
    first = recv_message(sub.s, 20);
  }
  ASSERT_EQ(first.size(), 3U);
  EXPECT_EQ(first[0], "kv");
  const std::int64_t seq0 = *decode_sequence(first[1]);
  ASSERT_TRUE(decode_event_batch(first[2]).ok());

  // From here on every batch arrives, numbered one after the other.
  for (int i = 0; i < 5; ++i) (*pub)->publish(batch_payload(1000 + static_cast<EngineHash>(i)));
  std::int64_t last = seq0;
  for (;;) {
    auto m = recv_message(sub.s, 2000);
    ASSERT_EQ(m.size(), 3U);
    const std::int64_t seq = *decode_sequence(m[1]);
    EXPECT_EQ(seq, last + 1);
    last = seq;
    const auto batch = decode_event_batch(m[2]);
    ASSERT_TRUE(batch.ok());
    if (std::get<BlockRemoved>(batch->events[0]).block_hashes[0] == 1004) break;
  }

  // Replay from last - 1: the buffer holds the last 3 batches, so [last-1, last], then the end.
  Socket dealer(ctx.ctx, ZMQ_DEALER);
  ASSERT_EQ(zmq_connect(dealer.s, (*pub)->replay_endpoint().c_str()), 0);
  const std::string start = encode_sequence(last - 1);
  ASSERT_GE(zmq_send(dealer.s, "", 0, ZMQ_SNDMORE), 0);
  ASSERT_GE(zmq_send(dealer.s, start.data(), start.size(), 0), 0);
  std::vector<std::int64_t> replayed;
  for (;;) {
    auto m = recv_message(dealer.s, 5000);
    ASSERT_EQ(m.size(), 3U);  // "", seq, payload
    EXPECT_TRUE(m[0].empty());
    const std::int64_t seq = *decode_sequence(m[1]);
    if (seq == kEndOfReplay) {
      EXPECT_TRUE(m[2].empty());
      break;
    }
    EXPECT_TRUE(decode_event_batch(m[2]).ok());
    replayed.push_back(seq);
  }
  EXPECT_EQ(replayed, (std::vector<std::int64_t>{last - 1, last}));
  EXPECT_EQ((*pub)->published(), static_cast<std::uint64_t>(last + 1));
}

TEST(ZmqPublisherTest, AnEndpointThatCannotBeBoundIsAnErrorNamingIt) {
  auto a = ZmqPublisher::start({.endpoint = "tcp://127.0.0.1:0"});
  ASSERT_TRUE(a.ok());
  auto b = ZmqPublisher::start({.endpoint = (*a)->endpoint()});  // already bound
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().param, "endpoint");
  auto c = ZmqPublisher::start({.endpoint = "tcp://127.0.0.1:0", .replay_endpoint = "bogus"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().param, "replay_endpoint");
}

}  // namespace
}  // namespace prefixgate::kv_events
