// A tiny Prometheus registry: counters, gauges and histograms rendered in the text exposition
// format (https://prometheus.io/docs/instrumenting/exposition_formats/). Thread-safe: HTTP
// threads observe, /metrics renders.
//
//   Metrics m;
//   Histogram& ttft = m.histogram("prefixgate_engine_time_to_first_token_seconds", "...", bounds);
//   ttft.observe(0.042);
//   std::string text = m.render();
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace prefixgate::engine::server {

class Counter {
 public:
  void add(double v = 1) {
    std::lock_guard lock(mu_);
    value_ += v;
  }
  double value() const {
    std::lock_guard lock(mu_);
    return value_;
  }

 private:
  mutable std::mutex mu_;
  double value_ = 0;
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double v);
  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<std::uint64_t> cumulative;  // per bound, then +Inf
    double sum = 0;
    std::uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  // per bucket (not cumulative), last is +Inf
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

class Metrics {
 public:
  Counter& counter(std::string name, std::string help);
  Histogram& histogram(std::string name, std::string help, std::vector<double> upper_bounds);
  // A value read when rendering (gauge or counter kept elsewhere, e.g. engine stats).
  void callback(std::string name, std::string help, std::string type, std::function<double()> read);

  std::string render() const;

 private:
  struct Family {
    std::string name, help, type;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Histogram> histogram;
    std::function<double()> read;
  };
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Family>> families_;
};

// Bucket bounds for request latencies in seconds, 1 ms to 60 s.
std::vector<double> latency_buckets_seconds();

}  // namespace prefixgate::engine::server
