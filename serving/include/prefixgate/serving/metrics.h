// A small Prometheus registry: labelled counters and histograms, and values read at scrape time,
// rendered in the text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/).
//
//   Metrics m;
//   CounterFamily& requests = m.counter("prefixgate_requests_total", "Requests.", {"route"});
//   requests.add({"/v1/chat/completions"});
//   Counter& errors = m.counter("prefixgate_engine_request_errors_total", "Errors.");
//   errors.add();
//   m.callback("prefixgate_upstream_healthy", "...", MetricType::kGauge, {"replica"},
//              [] { return std::vector<Sample>{{{"http://a"}, 1.0}}; });
//   std::string text = m.render();
//
// Families are registered at start-up, before the first render (registration is not
// synchronized with rendering); observing and rendering are thread-safe. Families render in
// registration order; a family without labels renders its single series even at zero.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace prefixgate::serving {

using LabelValues = std::vector<std::string>;

enum class MetricType { kCounter, kGauge };

// One counter series. Lock-free: add() is on request paths.
class Counter {
 public:
  void add(double v = 1.0) {
    double old = value_.load(std::memory_order_relaxed);
    while (!value_.compare_exchange_weak(old, old + v, std::memory_order_relaxed)) {
    }
  }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// One histogram series with fixed upper bounds (sorted, +Inf implied).
class Histogram {
 public:
  explicit Histogram(const std::vector<double>* bounds);
  void observe(double v);
  struct Snapshot {
    std::vector<std::uint64_t> cumulative;  // per bound, then +Inf
    double sum = 0;
    std::uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  const std::vector<double>* bounds_;
  mutable std::mutex mu_;
  std::vector<std::uint64_t> counts_;  // per bucket (not cumulative), last is +Inf
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

// Label values as a request path has them (literals, views of its own strings), one per label
// name: looked up without building a LabelValues.
using LabelView = std::initializer_list<std::string_view>;

class CounterFamily {
 public:
  CounterFamily(std::string name, std::string help, std::vector<std::string> labels);
  // The series for `values` (one per label name), created at zero on first use. The reference
  // stays valid for the family's lifetime, so a hot path can look it up once.
  Counter& series(const LabelValues& values);
  // The same through the calling thread's cache of the series it used recently: no allocation
  // and no lock shared with the other threads once it has used these values before (the
  // request path's counters, whose label values are a handful).
  Counter& series(LabelView values);
  void add(LabelView values, double v = 1.0) { series(values).add(v); }
  void render(std::string& out) const;

 private:
  std::string name_, help_;
  std::vector<std::string> labels_;
  std::uint64_t id_;  // names this family in the threads' caches; never reused
  mutable std::mutex mu_;
  std::map<LabelValues, Counter> series_;
};

class HistogramFamily {
 public:
  HistogramFamily(std::string name, std::string help, std::vector<std::string> labels,
                  std::vector<double> bounds);
  Histogram& series(const LabelValues& values);
  Histogram& series(LabelView values);  // as CounterFamily's
  void observe(LabelView values, double v) { series(values).observe(v); }
  void render(std::string& out) const;

 private:
  std::string name_, help_;
  std::vector<std::string> labels_;
  std::vector<double> bounds_;
  std::uint64_t id_;
  mutable std::mutex mu_;
  std::map<LabelValues, Histogram> series_;
};

// The calling thread's cache of series, open to values of a caller's own (LabelledTable): the
// value `owner` (an id from new_series_owner_id()) keeps for `values`, from the thread's slots
// when they hold it, else from make(context, values), which must return an address that stays
// valid as long as `owner` lives.
std::uint64_t new_series_owner_id();
void* thread_cached(std::uint64_t owner, LabelView values, void* (*make)(void*, LabelValues),
                    void* context);

// Values of the caller's kept by label values and found through the calling thread's cache of
// series: for what a hot path resolves by several labels at once (the series a proxied request
// adds to, by its replica, tenant and route), one lookup where one per family would hash and
// compare the same labels again each time. A value is made by `make` at its first use and lives,
// at a stable address, as long as the table.
template <class T>
class LabelledTable {
 public:
  explicit LabelledTable(std::function<std::unique_ptr<T>(const LabelValues&)> make)
      : make_(std::move(make)), id_(new_series_owner_id()) {}
  LabelledTable(const LabelledTable&) = delete;
  LabelledTable& operator=(const LabelledTable&) = delete;

  const T& at(LabelView values) {
    return *static_cast<const T*>(thread_cached(id_, values, &LabelledTable::make, this));
  }

 private:
  static void* make(void* self, LabelValues values) {
    auto& table = *static_cast<LabelledTable*>(self);
    std::lock_guard lock(table.mu_);
    auto it = table.values_.find(values);
    if (it == table.values_.end()) {
      std::unique_ptr<T> value = table.make_(values);
      it = table.values_.emplace(std::move(values), std::move(value)).first;
    }
    return it->second.get();
  }

  std::function<std::unique_ptr<T>(const LabelValues&)> make_;
  std::uint64_t id_;
  std::mutex mu_;
  std::map<LabelValues, std::unique_ptr<T>> values_;
};

struct Sample {
  LabelValues labels;
  double value = 0;
};

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  CounterFamily& counter(std::string name, std::string help, std::vector<std::string> labels);
  HistogramFamily& histogram(std::string name, std::string help, std::vector<std::string> labels,
                             std::vector<double> bounds);
  // Unlabelled: the family's one series.
  Counter& counter(std::string name, std::string help);
  Histogram& histogram(std::string name, std::string help, std::vector<double> bounds);

  // Values kept elsewhere (engine statistics, replica state), read at each render.
  void callback(std::string name, std::string help, MetricType type,
                std::vector<std::string> labels, std::function<std::vector<Sample>()> read);
  void callback(std::string name, std::string help, MetricType type, std::function<double()> read);

  std::string render() const;

 private:
  struct Family;
  std::vector<std::unique_ptr<Family>> families_;
};

// Shortest round-trip decimal for finite values ("3", "0.25"); "+Inf", "-Inf", "NaN".
void append_metric_value(double v, std::string& out);

// Request latencies in seconds: 100 us .. 60 s, roughly x2.5 per step.
std::vector<double> latency_buckets_seconds();
// 0 .. 128k tokens in powers of two.
std::vector<double> token_buckets();

}  // namespace prefixgate::serving
