#include "prefixgate/engine/engine_loop.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "prefixgate/engine/sim_device.h"
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

// A device that keeps its speed to itself, as the cpu and cuda devices do: the loop must measure
// it. The sim device underneath takes its modelled step times in wall time, so the measured
// rates can be checked against the model's.
class UnannouncedSpeed final : public Device {
 public:
  explicit UnannouncedSpeed(std::unique_ptr<SimDevice> sim) : sim_(std::move(sim)) {}
  std::string_view name() const override { return sim_->name(); }
  const ModelSpec& spec() const override { return sim_->spec(); }
  std::size_t kv_page_bytes(std::size_t page_tokens) const override {
    return sim_->kv_page_bytes(page_tokens);
  }
  void init_kv_cache(std::size_t num_pages, std::size_t page_tokens) override {
    sim_->init_kv_cache(num_pages, page_tokens);
  }
  StepOutput execute(std::span<const SequenceStep> batch) override { return sim_->execute(batch); }

 private:
  std::unique_ptr<SimDevice> sim_;
};

TEST(EngineLoopTest, MeasuresTheSpeedOfADeviceThatDoesNotAnnounceIt) {
  auto profile = parse_sim_profile("h100:llama3-8b");
  ASSERT_TRUE(profile.ok());
  const double speedup = 4;
  const DeviceSpeed model = sim_speed(*profile);
  EngineConfig c = config(4096);
  c.scheduler.max_num_batched_tokens = 1024;
  EngineLoop loop(c, std::make_unique<UnannouncedSpeed>(make_sim_device(*profile, speedup)));
  EXPECT_EQ(loop.stats().speed.prefill_seconds_per_token, 0) << "nothing measured yet";
  // Prompts of different lengths arriving while others decode: prefill chunks of many sizes
  // beside decode batches of many sizes, which is what separates the two rates.
  std::vector<std::unique_ptr<Collector>> done;
  for (int i = 0; i < 24; ++i) {
    done.push_back(std::make_unique<Collector>());
    GenerationRequest r = request(1500 + 300 * static_cast<std::size_t>(i % 7), 12);
    r.salt = std::to_string(i);  // every prompt computed in full
    loop.submit(std::move(r), done.back()->sink());
    std::this_thread::sleep_for(5ms);
  }
  for (auto& d : done) ASSERT_TRUE(d->wait(60s));
  const DeviceSpeed measured = loop.stats().speed;
  ASSERT_GT(measured.prefill_seconds_per_token, 0) << "no speed announced after the run";
  ASSERT_GT(measured.decode_seconds_per_sequence, 0);
  // The model's rate is its marginal cost at 2-4k tokens, the fit a line over chunks of up to
  // 1,024 with the weights' read shared: the same scale, not the same number.
  const double ratio =
      measured.prefill_seconds_per_token / (model.prefill_seconds_per_token / speedup);
  EXPECT_GT(ratio, 0.5);
  EXPECT_LT(ratio, 2.0);
}

}  // namespace
}  // namespace prefixgate::engine
