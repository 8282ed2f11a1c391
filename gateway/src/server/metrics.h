// A small Prometheus registry: labelled counters and histograms, and gauges read at scrape time.
//
//   Metrics m;
//   auto& requests = m.counter("prefixgate_requests_total", "Requests.", {"route", "status"});
//   requests.add({"/v1/chat/completions", "200"});
//   m.gauge_callback("prefixgate_upstream_healthy", "...", [] { return samples; });
//   std::string text = m.render();
//
// Thread-safe: one mutex per family; the gateway's hot path touches a handful per request.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace prefixgate::gateway::server {

using LabelValues = std::vector<std::string>;

class CounterFamily {
 public:
  CounterFamily(std::string name, std::string help, std::vector<std::string> labels)
      : name_(std::move(name)), help_(std::move(help)), labels_(std::move(labels)) {}
  void add(const LabelValues& values, double v = 1.0);
  void render(std::string& out) const;

 private:
  std::string name_, help_;
  std::vector<std::string> labels_;
  mutable std::mutex mu_;
  std::map<LabelValues, double> values_;
};

class HistogramFamily {
 public:
  HistogramFamily(std::string name, std::string help, std::vector<std::string> labels,
                  std::vector<double> bounds)
      : name_(std::move(name)),
        help_(std::move(help)),
        labels_(std::move(labels)),
        bounds_(std::move(bounds)) {}
  void observe(const LabelValues& values, double v);
  void render(std::string& out) const;

 private:
  struct Series {
    std::vector<double> buckets;  // cumulative at render time, per-bucket here
    double sum = 0;
    double count = 0;
  };
  std::string name_, help_;
  std::vector<std::string> labels_;
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::map<LabelValues, Series> series_;
};

struct GaugeSample {
  LabelValues labels;
  double value = 0;
};

class Metrics {
 public:
  CounterFamily& counter(std::string name, std::string help, std::vector<std::string> labels);
  HistogramFamily& histogram(std::string name, std::string help, std::vector<std::string> labels,
                             std::vector<double> bounds);
  void gauge_callback(std::string name, std::string help, std::vector<std::string> labels,
                      std::function<std::vector<GaugeSample>()> read);
  std::string render() const;

 private:
  struct Gauge {
    std::string name, help;
    std::vector<std::string> labels;
    std::function<std::vector<GaugeSample>()> read;
  };
  std::vector<std::unique_ptr<CounterFamily>> counters_;
  std::vector<std::unique_ptr<HistogramFamily>> histograms_;
  std::vector<Gauge> gauges_;
};

// 100 us .. 60 s, roughly x2.5 per step.
std::vector<double> latency_buckets_seconds();
// 0 .. 128k tokens in powers of two.
std::vector<double> token_buckets();

}  // namespace prefixgate::gateway::server
