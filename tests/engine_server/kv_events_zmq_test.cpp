// prefixgate-engine's cache events in vLLM's protocol: batches on a ZeroMQ PUB socket whose
// blocks carry their token ids (so a subscriber can recompute the chained keys: for
// prefixgate-engine they equal its own block hashes), a replay socket, and vLLM's metric names.
#include "server/kv_events_zmq.h"

#include <gtest/gtest.h>
#include <zmq.h>

#include "prefixgate/canonicalize/block_hash.h"
#include "prefixgate/kv_events/wire.h"
#include "test_client.h"
#include "test_server.h"

namespace prefixgate::engine::server::testing {
namespace {

using kv_events::BlockRemoved;
using kv_events::BlockStored;

struct ZmqContext {
  void* ctx = zmq_ctx_new();
  ~ZmqContext() { zmq_ctx_term(ctx); }
};

// Every batch the replay socket holds from `from`, decoded, in order.
std::vector<kv_events::EventBatch> replay_all(void* ctx, const std::string& endpoint,
                                              std::int64_t from = 0) {
  void* dealer = zmq_socket(ctx, ZMQ_DEALER);
  const int linger = 0;
  zmq_setsockopt(dealer, ZMQ_LINGER, &linger, sizeof linger);
  std::vector<kv_events::EventBatch> out;
  if (zmq_connect(dealer, endpoint.c_str()) == 0) {
    const std::string start = kv_events::encode_sequence(from);
    zmq_send(dealer, "", 0, ZMQ_SNDMORE);
    zmq_send(dealer, start.data(), start.size(), 0);
    for (;;) {
      zmq_pollitem_t item{dealer, 0, ZMQ_POLLIN, 0};
      if (zmq_poll(&item, 1, 5000) <= 0) break;
      std::vector<std::string> frames;
      for (int more = 1; more != 0;) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        zmq_msg_recv(&msg, dealer, 0);
        frames.emplace_back(static_cast<const char*>(zmq_msg_data(&msg)), zmq_msg_size(&msg));
        more = zmq_msg_more(&msg);
        zmq_msg_close(&msg);
      }
      if (frames.size() != 3) break;
      if (kv_events::decode_sequence(frames[1]) == kv_events::kEndOfReplay) break;
      auto batch = kv_events::decode_event_batch(frames[2]);
      EXPECT_TRUE(batch.ok());
      if (batch) out.push_back(std::move(*batch));
    }
  }
  zmq_close(dealer);
  return out;
}

std::vector<BlockStored> stored_in(const std::vector<kv_events::EventBatch>& batches) {
  std::vector<BlockStored> out;
  for (const auto& b : batches) {
    for (const auto& e : b.events) {
      if (const auto* s = std::get_if<BlockStored>(&e)) out.push_back(*s);
    }
  }
  return out;
}

TestServerConfig publishing(std::size_t num_pages = 256) {
  TestServerConfig config;
  config.options.kv_events_endpoint = "tcp://127.0.0.1:0";
  config.options.kv_events_replay_endpoint = "tcp://127.0.0.1:0";
  config.num_pages = num_pages;
  return config;
}

TEST(KvEventsZmqTest, StoredBlocksCarryTokensWhoseKeysAreTheEnginesHashes) {
  TestServer s(publishing());
  const std::string endpoint = s.server().kv_events_endpoint();
  const std::string replay = s.server().kv_events_replay_endpoint();
  ASSERT_TRUE(endpoint.starts_with("tcp://127.0.0.1:")) << endpoint;
  ASSERT_FALSE(replay.empty());
  const std::string prompt(16 * 3 + 5, 'q');
  ASSERT_EQ(post(s.port(), "/v1/completions",
                 R"({"prompt":")" + prompt + R"(","max_tokens":1,"cache_salt":"tenant-z"})")
                .status,
            200);
  ZmqContext z;
  std::vector<BlockStored> stored;
  ASSERT_TRUE(eventually([&] {
    stored = stored_in(replay_all(z.ctx, replay));
    return !stored.empty();
  }));
  // One chain of three blocks from the salt's root, as vLLM reports a request's new blocks.
  const BlockStored& chain = stored.front();
  ASSERT_EQ(chain.block_hashes.size(), 3U);
  EXPECT_FALSE(chain.parent.has_value());
  EXPECT_EQ(chain.block_size, 16U);
  EXPECT_EQ(chain.medium, kv_events::Medium::kGpu);
  EXPECT_EQ(chain.cache_salt, "tenant-z");
  ASSERT_EQ(chain.token_ids.size(), 48U);
  const std::vector<std::uint64_t> keys =
      canon::block_hashes(chain.token_ids, 16, canon::block_hash_root("test-model", "tenant-z"));
  EXPECT_EQ(keys, chain.block_hashes);
}

TEST(KvEventsZmqTest, EvictionsAreBlockRemovedAndLiveSubscribersSeeNumberedBatches) {
  TestServer s(publishing(/*num_pages=*/8));
  ZmqContext z;
  void* sub = zmq_socket(z.ctx, ZMQ_SUB);
  const int linger = 0;
  zmq_setsockopt(sub, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "", 0);
  ASSERT_EQ(zmq_connect(sub, s.server().kv_events_endpoint().c_str()), 0);
  // Distinct prompts of 3 pages each into an 8-page cache: later ones evict earlier ones.
  std::vector<std::int64_t> seqs;
  std::size_t removed = 0;
  for (char c = 'a'; c <= 'z' && removed == 0; ++c) {
    ASSERT_EQ(post(s.port(), "/v1/completions",
                   R"({"prompt":")" + std::string(50, c) + R"(","max_tokens":1})")
                  .status,
              200);
    for (;;) {
      zmq_pollitem_t item{sub, 0, ZMQ_POLLIN, 0};
      if (zmq_poll(&item, 1, 200) <= 0) break;
      std::vector<std::string> frames;
      for (int more = 1; more != 0;) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        zmq_msg_recv(&msg, sub, 0);
        frames.emplace_back(static_cast<const char*>(zmq_msg_data(&msg)), zmq_msg_size(&msg));
        more = zmq_msg_more(&msg);
        zmq_msg_close(&msg);
      }
      ASSERT_EQ(frames.size(), 3U);
      EXPECT_EQ(frames[0], "");  // vLLM's default topic
      seqs.push_back(*kv_events::decode_sequence(frames[1]));
      auto batch = kv_events::decode_event_batch(frames[2]);
      ASSERT_TRUE(batch.ok()) << batch.error().message;
      for (const auto& e : batch->events) {
        if (const auto* r = std::get_if<BlockRemoved>(&e)) removed += r->block_hashes.size();
      }
    }
  }
  zmq_close(sub);
  EXPECT_GT(removed, 0U);
  ASSERT_FALSE(seqs.empty());
  for (std::size_t i = 1; i < seqs.size(); ++i) EXPECT_EQ(seqs[i], seqs[i - 1] + 1);
}

TEST(KvEventsZmqTest, ServesVllmMetricNamesBesideItsOwn) {
  TestServer s;
  const auto r = get(s.port(), "/metrics");
  ASSERT_EQ(r.status, 200);
  for (const char* line : {"vllm:num_requests_running{model_name=\"test-model\"} 0",
                           "vllm:num_requests_waiting{model_name=\"test-model\"} 0",
                           "vllm:kv_cache_usage_perc{model_name=\"test-model\"} 0",
                           "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"256\","
                           "model_name=\"test-model\"} 1",
                           "prefixgate_engine_num_requests_running 0"}) {
    EXPECT_NE(r.body.find(line), std::string::npos) << line;
  }
}

TEST(KvEventsZmqTest, AnEndpointThatCannotBeBoundFailsTheStart) {
  TestServer first(publishing());
  TestServerConfig clash = publishing();
  clash.options.kv_events_endpoint = first.server().kv_events_endpoint();
  TestServer second(clash);
  EXPECT_EQ(second.port(), 0);
}

TEST(VllmBatchTest, ChainsBecomeOneStoredEventRemovalsOneRemovedEvent) {
  auto stored = [](std::uint64_t h, std::uint64_t parent, bool root, const std::string& salt) {
    CacheEvent e;
    e.kind = CacheEvent::Kind::kStored;
    e.block_hash = h;
    e.parent_hash = parent;
    e.parent_is_root = root;
    e.salt = salt;
    e.tokens.assign(16, static_cast<TokenId>(h));
    return KvEventLog::Entry{h, e};
  };
  CacheEvent removed;
  removed.kind = CacheEvent::Kind::kRemoved;
  const std::vector<KvEventLog::Entry> entries{
      stored(1, 100, true, ""),
      stored(2, 1, false, ""),
      stored(3, 2, false, ""),
      stored(4, 200, true, "s"),  // another salt's root: a new chain
      stored(5, 1, false, ""),    // a branch off block 1: a new chain with a parent
      {6,
       [&] {
         CacheEvent r = removed;
         r.block_hash = 3;
         return r;
       }()},
      {7, [&] {
         CacheEvent r = removed;
         r.block_hash = 2;
         return r;
       }()}};
  const kv_events::EventBatch b = to_vllm_batch(entries, 16, 5.0);
  ASSERT_EQ(b.events.size(), 4U);
  const auto& a = std::get<BlockStored>(b.events[0]);
  EXPECT_EQ(a.block_hashes, (std::vector<kv_events::EngineHash>{1, 2, 3}));
  EXPECT_FALSE(a.parent.has_value());
  EXPECT_EQ(a.token_ids.size(), 48U);
  const auto& salted = std::get<BlockStored>(b.events[1]);
  EXPECT_EQ(salted.cache_salt, "s");
  const auto& branch = std::get<BlockStored>(b.events[2]);
  EXPECT_EQ(branch.parent, std::optional<kv_events::EngineHash>(1));
  EXPECT_EQ(branch.cache_salt, "");
  EXPECT_EQ(std::get<BlockRemoved>(b.events[3]).block_hashes,
            (std::vector<kv_events::EngineHash>{3, 2}));
}

}  // namespace
}  // namespace prefixgate::engine::server::testing
