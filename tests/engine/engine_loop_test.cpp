#include "prefixgate/engine/engine_loop.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "support/fake_kv_device.h"

namespace prefixgate::engine {
namespace {

using namespace std::chrono_literals;

// Collects a request's events as the engine thread delivers them.
struct Collector {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<canon::TokenId> tokens;
  FinishReason finished = FinishReason::kNone;
  std::size_t cached_tokens = 0;
  int first_token_events = 0;

  EventSink sink() {
    return [this](const GenerationEvent& e) {
      std::lock_guard lock(mu);
      tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
      first_token_events += e.first_token ? 1 : 0;
      if (e.finished != FinishReason::kNone) {
        finished = e.finished;
        cached_tokens = e.cached_tokens;
        cv.notify_all();
      }
    };
  }
  bool wait(std::chrono::milliseconds timeout = 10s) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, timeout, [&] { return finished != FinishReason::kNone; });
  }
};

EngineConfig config(std::size_t pages = 256) {
  EngineConfig c;
  c.num_pages = pages;
  c.page_tokens = 16;
  c.model_id = "fake";
  c.scheduler.eos_token = 999;
  return c;
}

GenerationRequest request(std::size_t prompt_len, std::size_t max_tokens, std::string salt = "") {
  GenerationRequest r;
  r.salt = std::move(salt);
  for (std::size_t i = 0; i < prompt_len; ++i)
    r.prompt.push_back(static_cast<canon::TokenId>(i % 500));
  r.sampling.max_tokens = max_tokens;
  return r;
}

TEST(EngineLoopTest, ServesConcurrentRequestsAndReportsCacheHits) {
  EngineLoop loop(config(), std::make_unique<testing::FakeKvDevice>());
  Collector a, b;
  loop.submit(request(100, 6), a.sink());
  loop.submit(request(40, 3, "other"), b.sink());
  ASSERT_TRUE(a.wait());
  ASSERT_TRUE(b.wait());
  EXPECT_EQ(a.tokens.size(), 6u);
  EXPECT_EQ(a.finished, FinishReason::kLength);
  EXPECT_EQ(a.first_token_events, 1);
  EXPECT_EQ(b.tokens.size(), 3u);

  Collector again;
  loop.submit(request(100, 6), again.sink());
  ASSERT_TRUE(again.wait());
  EXPECT_EQ(again.cached_tokens, 96u);
  EXPECT_EQ(again.tokens, a.tokens);
  ASSERT_TRUE(loop.wait_idle(5s));
  const EngineStats s = loop.stats();
  EXPECT_EQ(s.kv_pages_used, s.kv_pages_cached);  // nothing held once all finished
  EXPECT_EQ(s.scheduler.cached_prompt_tokens_total, 96u);
  EXPECT_EQ(s.generated_tokens_total, 15u);
}

TEST(EngineLoopTest, AbortEndsARequestAndFreesItsPages) {
  EngineLoop loop(config(), std::make_unique<testing::FakeKvDevice>());
  Collector c;
  const auto id = loop.submit(request(50, 1000000), c.sink());
  loop.abort(id);
  ASSERT_TRUE(c.wait());
  EXPECT_EQ(c.finished, FinishReason::kAbort);
  ASSERT_TRUE(loop.wait_idle(5s));
  const EngineStats s = loop.stats();
  EXPECT_EQ(s.kv_pages_used, s.kv_pages_cached);
  loop.abort(id);  // twice, and unknown ids, are harmless
  loop.abort(12345);
}

TEST(EngineLoopTest, KvEventsMatchTheSnapshot) {
  EngineLoop loop(config(), std::make_unique<testing::FakeKvDevice>());
  Collector c;
  loop.submit(request(64, 2), c.sink());
  ASSERT_TRUE(c.wait());
  ASSERT_TRUE(loop.wait_idle(5s));
  const CacheSnapshot snap = loop.cache_snapshot();
  EXPECT_EQ(snap.blocks.size(), 4u);  // 65 computed tokens -> 4 full blocks
  EXPECT_EQ(snap.seq, loop.kv_events().last_seq());
  auto events = loop.kv_events().since(0);
  ASSERT_TRUE(events.has_value());
  std::size_t stored = 0;
  for (const auto& e : *events) stored += e.event.kind == CacheEvent::Kind::kStored ? 1 : 0;
  EXPECT_EQ(stored, 4u);
  EXPECT_TRUE(loop.kv_events().since(snap.seq)->empty());
}

// --kv-events-history: the loop keeps that many cache events, no more.
TEST(EngineLoopTest, KeepsKvEventsHistoryEventsForResumes) {
  EngineConfig c = config();
  c.kv_events_history = 2;
  EngineLoop loop(c, std::make_unique<testing::FakeKvDevice>());
  Collector done;
  loop.submit(request(64, 2), done.sink());  // 4 blocks stored
  ASSERT_TRUE(done.wait());
  ASSERT_TRUE(loop.wait_idle(5s));
  const std::uint64_t last = loop.kv_events().last_seq();
  ASSERT_GE(last, 4u);
  EXPECT_FALSE(loop.kv_events().since(0).has_value());  // older than the history: a gap
  auto tail = loop.kv_events().since(last - 2);
  ASSERT_TRUE(tail.has_value());
  EXPECT_EQ(tail->size(), 2u);
}

TEST(KvEventLogTest, ReaderThatFellBehindGetsAGap) {
  KvEventLog log(3);
  std::vector<CacheEvent> five(5);
  log.append(five);
  EXPECT_EQ(log.last_seq(), 5u);
  EXPECT_FALSE(log.since(1).has_value());  // events 2 and 3... 2 was dropped
  auto tail = log.since(2);
  ASSERT_TRUE(tail.has_value());
  ASSERT_EQ(tail->size(), 3u);
  EXPECT_EQ(tail->front().seq, 3u);
  EXPECT_TRUE(log.since(5)->empty());
}

TEST(EngineLoopTest, DestructionEndsRequestsStillRunning) {
  Collector c;
  {
    EngineLoop loop(config(), std::make_unique<testing::FakeKvDevice>());
    loop.submit(request(30, 100000000), c.sink());
  }
  EXPECT_EQ(c.finished, FinishReason::kAbort);
}

}  // namespace
}  // namespace prefixgate::engine
