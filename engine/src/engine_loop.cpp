#include "prefixgate/engine/engine_loop.h"

#include <cassert>

namespace prefixgate::engine {

void KvEventLog::append(std::vector<CacheEvent> events) {
  if (events.empty()) return;
  {
    std::lock_guard lock(mu_);
    for (CacheEvent& e : events) {
      entries_.push_back(Entry{++last_seq_, std::move(e)});
      if (entries_.size() > history_) entries_.pop_front();
    }
  }
  cv_.notify_all();
}

std::optional<std::vector<KvEventLog::Entry>> KvEventLog::since(std::uint64_t since) const {
  std::lock_guard lock(mu_);
  std::vector<Entry> out;
  if (since >= last_seq_) return out;
  // The oldest event kept must directly follow `since`, or the reader missed some.
  if (entries_.empty() || entries_.front().seq > since + 1) return std::nullopt;
  for (auto it = entries_.begin() + static_cast<std::ptrdiff_t>(since + 1 - entries_.front().seq);
       it != entries_.end(); ++it) {
    out.push_back(*it);
  }
  return out;
}

std::uint64_t KvEventLog::last_seq() const {
  std::lock_guard lock(mu_);
  return last_seq_;
}

void KvEventLog::wait_after(std::uint64_t since, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return last_seq_ > since; });
}

EngineLoop::EngineLoop(EngineConfig config, std::unique_ptr<Device> device)
    : config_(std::move(config)),
      device_(std::move(device)),
      pool_(config_.num_pages),
      cache_(pool_, config_.page_tokens, config_.model_id),
      scheduler_(config_.scheduler, cache_, pool_),
      events_(config_.kv_events_history) {
  device_->init_kv_cache(config_.num_pages, config_.page_tokens);
  stats_.kv_pages_total = config_.num_pages;
  stats_.speed = device_->speed();
  measure_speed_ = stats_.speed.prefill_seconds_per_token <= 0;
  thread_ = std::thread([this] { run(); });
}

EngineLoop::~EngineLoop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::uint64_t EngineLoop::submit(GenerationRequest request, EventSink sink) {
  std::uint64_t id;
  {
    std::lock_guard lock(mu_);
    id = next_id_++;
    SequenceRequest seq{id, std::move(request.salt), std::move(request.prompt),
                        std::move(request.sampling)};
    inbox_.emplace_back(std::move(seq), std::move(sink));
    ++in_flight_;
  }
  cv_.notify_all();
  return id;
}

void EngineLoop::abort(std::uint64_t id) {
  {
    std::lock_guard lock(mu_);
    aborts_.push_back(id);
  }
  cv_.notify_all();
}

EngineStats EngineLoop::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

CacheSnapshot EngineLoop::cache_snapshot() {
  std::promise<CacheSnapshot> promise;
  auto future = promise.get_future();
  {
    std::lock_guard lock(mu_);
    tasks_.push_back([&] {
      // Events are published right after each step, so the log is current here.
      promise.set_value(CacheSnapshot{cache_.snapshot(), events_.last_seq()});
    });
  }
  cv_.notify_all();
  return future.get();
}

bool EngineLoop::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return idle_cv_.wait_for(lock, timeout, [&] { return in_flight_ == 0; });
}

void EngineLoop::deliver(const std::vector<SequenceUpdate>& updates) {
  std::size_t finished = 0;
  for (const SequenceUpdate& u : updates) {
    auto it = sinks_.find(u.id);
    if (it == sinks_.end()) continue;
    GenerationEvent e;
    e.id = u.id;
    if (u.has_token) e.tokens.push_back(u.token);
    e.finished = u.finished;
    e.prompt_tokens = u.prompt_tokens;
    e.cached_tokens = u.cached_tokens;
    e.first_token = u.first_token;
    it->second(e);
    if (u.finished != FinishReason::kNone) {
      sinks_.erase(it);
      ++finished;
    }
  }
  if (finished > 0) {
    std::lock_guard lock(mu_);
    in_flight_ -= finished;
    if (in_flight_ == 0) idle_cv_.notify_all();
  }
}

void EngineLoop::run() {
  for (;;) {
    std::vector<std::pair<SequenceRequest, EventSink>> inbox;
    std::vector<std::uint64_t> aborts;
    std::vector<std::function<void()>> tasks;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] {
        return stop_ || !inbox_.empty() || !aborts_.empty() || !tasks_.empty() ||
               !scheduler_.idle();
      });
      if (stop_) break;
      inbox.swap(inbox_);
      aborts.swap(aborts_);
      tasks.swap(tasks_);
    }
    for (auto& task : tasks) task();
    for (auto& [request, sink] : inbox) {
      sinks_.emplace(request.id, std::move(sink));
      scheduler_.add(std::move(request));
    }
    for (std::uint64_t id : aborts) scheduler_.finish(id, FinishReason::kAbort);

    StepPlan plan = scheduler_.schedule();
    std::vector<SequenceUpdate> updates;
    if (plan.empty()) {
      updates = scheduler_.take_finished();
    } else {
      const auto started = std::chrono::steady_clock::now();
      const StepOutput out = device_->execute(plan.batch);
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
      if (measure_speed_) {
        speed_estimator_.add_step(plan.num_prefill_tokens,
                                  plan.num_batched_tokens - plan.num_prefill_tokens, took.count());
      }
      step_seconds_ = smooth_step_seconds(step_seconds_, took.count());
      updates = scheduler_.complete(plan, out);
    }
    events_.append(cache_.drain_events());
    {
      std::lock_guard lock(mu_);
      stats_.scheduler = scheduler_.stats();
      stats_.step_seconds = step_seconds_;
      if (measure_speed_) stats_.speed = speed_estimator_.estimate().value_or(DeviceSpeed{});
      stats_.kv_pages_used = pool_.used_count();
      stats_.kv_pages_cached = cache_.cached_pages();
      stats_.kv_pages_evictable = cache_.evictable_pages();
      if (!plan.empty()) {
        ++stats_.steps;
        stats_.prefill_tokens_computed_total += plan.num_prefill_tokens;
      }
      for (const SequenceUpdate& u : updates) stats_.generated_tokens_total += u.has_token ? 1 : 0;
    }
    deliver(updates);
    if (plan.empty() && updates.empty() && !scheduler_.idle()) {
      // Waiting requests that cannot be admitted yet and nothing running: only an abort or a
      // new request changes that, so sleep until one arrives.
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(50),
                   [&] { return stop_ || !inbox_.empty() || !aborts_.empty() || !tasks_.empty(); });
    }
  }
  // Shutting down: whoever still waits hears that its request ended.
  for (auto& [id, sink] : sinks_) {
    GenerationEvent e;
    e.id = id;
    e.finished = FinishReason::kAbort;
    sink(e);
  }
  sinks_.clear();
  std::lock_guard lock(mu_);
  for (auto& [request, sink] : inbox_) {
    GenerationEvent e;
    e.id = request.id;
    e.finished = FinishReason::kAbort;
    sink(e);
  }
  for (auto& task : tasks_) task();
}

}  // namespace prefixgate::engine
