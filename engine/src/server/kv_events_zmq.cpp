#include "server/kv_events_zmq.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "prefixgate/kv_events/publisher.h"
#include "prefixgate/kv_events/wire.h"

namespace prefixgate::engine::server {
namespace {

constexpr auto kWait = std::chrono::milliseconds(20);
constexpr std::size_t kMaxEntriesPerBatch = 4096;

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

kv_events::EventBatch to_vllm_batch(const std::vector<KvEventLog::Entry>& entries,
                                    std::size_t block_size, double ts) {
  kv_events::EventBatch batch;
  batch.ts = ts;
  kv_events::BlockStored* chain = nullptr;     // the BlockStored being extended
  kv_events::BlockRemoved* removal = nullptr;  // the BlockRemoved being extended
  std::string chain_salt;
  for (const KvEventLog::Entry& entry : entries) {
    const CacheEvent& e = entry.event;
    if (e.kind == CacheEvent::Kind::kStored) {
      removal = nullptr;
      const bool continues = chain != nullptr && !e.parent_is_root && e.salt == chain_salt &&
                             chain->block_hashes.back() == e.parent_hash;
      if (!continues) {
        kv_events::BlockStored s;
        if (!e.parent_is_root) s.parent = e.parent_hash;
        if (e.parent_is_root) s.cache_salt = e.salt;
        s.block_size = block_size;
        batch.events.emplace_back(std::move(s));
        chain = &std::get<kv_events::BlockStored>(batch.events.back());
        chain_salt = e.salt;
      }
      chain->block_hashes.push_back(e.block_hash);
      chain->token_ids.insert(chain->token_ids.end(), e.tokens.begin(), e.tokens.end());
    } else if (e.kind == CacheEvent::Kind::kRemoved) {
      chain = nullptr;
      if (removal == nullptr) {
        batch.events.emplace_back(kv_events::BlockRemoved{});
        removal = &std::get<kv_events::BlockRemoved>(batch.events.back());
      }
      removal->block_hashes.push_back(e.block_hash);
    } else {
      chain = nullptr;
      removal = nullptr;
      batch.events.emplace_back(kv_events::AllBlocksCleared{});
    }
    // emplace_back may move earlier events: re-point at the last one.
    if (chain != nullptr) chain = &std::get<kv_events::BlockStored>(batch.events.back());
    if (removal != nullptr) removal = &std::get<kv_events::BlockRemoved>(batch.events.back());
  }
  return batch;
}

struct ZmqKvEvents::Impl {
  EngineLoop& engine;
  std::unique_ptr<kv_events::ZmqPublisher> publisher;
  std::atomic<bool> stop{false};
  std::thread thread;

  explicit Impl(EngineLoop& e) : engine(e) {}

  // Publishes what the log holds after `last`; returns the new position.
  std::uint64_t publish_after(std::uint64_t last) {
    KvEventLog& log = engine.kv_events();
    auto entries = log.since(last);
    if (!entries) {
      // Fell behind the log's history (it should not: this thread only reads it). What was
      // missed cannot be told: subscribers hear that everything is gone and relearn it.
      kv_events::EventBatch batch;
      batch.ts = unix_seconds();
      batch.events.emplace_back(kv_events::AllBlocksCleared{});
      publisher->publish(kv_events::encode_event_batch(batch));
      spdlog::warn("kv events: the publisher fell behind the event log; sent AllBlocksCleared");
      return log.last_seq();
    }
    const std::size_t block_size = engine.config().page_tokens;
    for (std::size_t i = 0; i < entries->size(); i += kMaxEntriesPerBatch) {
      const std::size_t end = std::min(entries->size(), i + kMaxEntriesPerBatch);
      const std::vector<KvEventLog::Entry> part(
          entries->begin() + static_cast<std::ptrdiff_t>(i),
          entries->begin() + static_cast<std::ptrdiff_t>(end));
      publisher->publish(
          kv_events::encode_event_batch(to_vllm_batch(part, block_size, unix_seconds())));
    }
    return entries->empty() ? last : entries->back().seq;
  }

  void run() {
    std::uint64_t last = 0;
    while (!stop.load(std::memory_order_acquire)) {
      engine.kv_events().wait_after(last, kWait);
      last = publish_after(last);
    }
    publish_after(last);
  }
};

ZmqKvEvents::ZmqKvEvents(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<ZmqKvEvents>> ZmqKvEvents::start(EngineLoop& engine,
                                                        ZmqKvEventsOptions options) {
  auto impl = std::make_unique<Impl>(engine);
  auto publisher = kv_events::ZmqPublisher::start({.endpoint = options.endpoint,
                                                   .replay_endpoint = options.replay_endpoint,
                                                   .buffer_batches = options.buffer_batches});
  if (!publisher) return publisher.error();
  impl->publisher = std::move(*publisher);
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->run(); });
  return std::unique_ptr<ZmqKvEvents>(new ZmqKvEvents(std::move(impl)));
}

ZmqKvEvents::~ZmqKvEvents() {
  impl_->stop.store(true, std::memory_order_release);
  impl_->thread.join();
}

const std::string& ZmqKvEvents::endpoint() const {
  return impl_->publisher->endpoint();
}
const std::string& ZmqKvEvents::replay_endpoint() const {
  return impl_->publisher->replay_endpoint();
}

}  // namespace prefixgate::engine::server
