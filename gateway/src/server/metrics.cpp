// Prometheus text exposition (format 0.0.4) for the gateway's registry.
#include "server/metrics.h"

#include <cmath>
#include <cstdio>

namespace prefixgate::gateway::server {
namespace {

void append_escaped(const std::string& s, std::string& out) {
  for (char c : s) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

void append_labels(const std::vector<std::string>& names, const LabelValues& values,
                   std::string& out, const char* extra_name = nullptr,
                   const std::string& extra_value = {}) {
  if (names.empty() && !extra_name) return;
  out += '{';
  bool first = true;
  for (std::size_t i = 0; i < names.size() && i < values.size(); ++i) {
    if (!first) out += ',';
    first = false;
    out += names[i];
    out += "=\"";
    append_escaped(values[i], out);
    out += '"';
  }
  if (extra_name) {
    if (!first) out += ',';
    out += extra_name;
    out += "=\"";
    out += extra_value;
    out += '"';
  }
  out += '}';
}

void append_number(double v, std::string& out) {
  char buf[64];
  if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
    return;
  }
  std::snprintf(buf, sizeof buf, "%.17g", v);
  out += buf;
}

void append_header(const std::string& name, const std::string& help, const char* type,
                   std::string& out) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

void CounterFamily::add(const LabelValues& values, double v) {
  std::lock_guard lock(mu_);
  values_[values] += v;
}

void CounterFamily::render(std::string& out) const {
  append_header(name_, help_, "counter", out);
  std::lock_guard lock(mu_);
  for (const auto& [labels, v] : values_) {
    out += name_;
    append_labels(labels_, labels, out);
    out += ' ';
    append_number(v, out);
    out += '\n';
  }
}

void HistogramFamily::observe(const LabelValues& values, double v) {
  std::lock_guard lock(mu_);
  Series& s = series_[values];
  if (s.buckets.empty()) s.buckets.assign(bounds_.size(), 0.0);
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    if (v <= bounds_[i]) {
      s.buckets[i] += 1;
      break;
    }
  }
  s.sum += v;
  s.count += 1;
}

void HistogramFamily::render(std::string& out) const {
  append_header(name_, help_, "histogram", out);
  std::lock_guard lock(mu_);
  for (const auto& [labels, s] : series_) {
    double cumulative = 0;
    for (std::size_t i = 0; i < bounds_.size(); ++i) {
      cumulative += s.buckets[i];
      std::string le;
      append_number(bounds_[i], le);
      out += name_ + "_bucket";
      append_labels(labels_, labels, out, "le", le);
      out += ' ';
      append_number(cumulative, out);
      out += '\n';
    }
    out += name_ + "_bucket";
    append_labels(labels_, labels, out, "le", "+Inf");
    out += ' ';
    append_number(s.count, out);
    out += '\n' + name_ + "_sum";
    append_labels(labels_, labels, out);
    out += ' ';
    append_number(s.sum, out);
    out += '\n' + name_ + "_count";
    append_labels(labels_, labels, out);
    out += ' ';
    append_number(s.count, out);
    out += '\n';
  }
}

CounterFamily& Metrics::counter(std::string name, std::string help,
                                std::vector<std::string> labels) {
  counters_.push_back(
      std::make_unique<CounterFamily>(std::move(name), std::move(help), std::move(labels)));
  return *counters_.back();
}

HistogramFamily& Metrics::histogram(std::string name, std::string help,
                                    std::vector<std::string> labels, std::vector<double> bounds) {
  histograms_.push_back(std::make_unique<HistogramFamily>(std::move(name), std::move(help),
                                                          std::move(labels), std::move(bounds)));
  return *histograms_.back();
}

void Metrics::gauge_callback(std::string name, std::string help, std::vector<std::string> labels,
                             std::function<std::vector<GaugeSample>()> read) {
  gauges_.push_back({std::move(name), std::move(help), std::move(labels), std::move(read)});
}

std::string Metrics::render() const {
  std::string out;
  for (const auto& c : counters_) c->render(out);
  for (const auto& h : histograms_) h->render(out);
  for (const Gauge& g : gauges_) {
    append_header(g.name, g.help, "gauge", out);
    for (const GaugeSample& s : g.read()) {
      out += g.name;
      append_labels(g.labels, s.labels, out);
      out += ' ';
      append_number(s.value, out);
      out += '\n';
    }
  }
  return out;
}

std::vector<double> latency_buckets_seconds() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
          0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};
}

std::vector<double> token_buckets() {
  std::vector<double> b{0};
  for (double v = 16; v <= 131072; v *= 2) b.push_back(v);
  return b;
}

}  // namespace prefixgate::gateway::server
