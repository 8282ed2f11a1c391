#include "server/metrics.h"

#include <algorithm>
#include <cassert>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::engine::server {
namespace {

std::string format_value(double v) {
  // Prometheus accepts Go float syntax; ECMAScript's shortest form is a subset for finite values.
  return json::format_number(v);
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {
  assert(std::is_sorted(bounds_.begin(), bounds_.end()));
}

void Histogram::observe(double v) {
  const auto bucket = static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) -
                                               bounds_.begin());
  std::lock_guard lock(mu_);
  ++counts_[bucket];
  sum_ += v;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  std::lock_guard lock(mu_);
  Snapshot s{bounds_, {}, sum_, count_};
  std::uint64_t running = 0;
  for (std::uint64_t c : counts_) s.cumulative.push_back(running += c);
  return s;
}

Counter& Metrics::counter(std::string name, std::string help) {
  auto f = std::make_unique<Family>();
  f->name = std::move(name);
  f->help = std::move(help);
  f->type = "counter";
  f->counter = std::make_unique<Counter>();
  Counter& c = *f->counter;
  std::lock_guard lock(mu_);
  families_.push_back(std::move(f));
  return c;
}

Histogram& Metrics::histogram(std::string name, std::string help,
                              std::vector<double> upper_bounds) {
  auto f = std::make_unique<Family>();
  f->name = std::move(name);
  f->help = std::move(help);
  f->type = "histogram";
  f->histogram = std::make_unique<Histogram>(std::move(upper_bounds));
  Histogram& h = *f->histogram;
  std::lock_guard lock(mu_);
  families_.push_back(std::move(f));
  return h;
}

void Metrics::callback(std::string name, std::string help, std::string type,
                       std::function<double()> read) {
  auto f = std::make_unique<Family>();
  f->name = std::move(name);
  f->help = std::move(help);
  f->type = std::move(type);
  f->read = std::move(read);
  std::lock_guard lock(mu_);
  families_.push_back(std::move(f));
}

std::string Metrics::render() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& f : families_) {
    out += "# HELP " + f->name + " " + f->help + "\n";
    out += "# TYPE " + f->name + " " + f->type + "\n";
    if (f->counter) {
      out += f->name + " " + format_value(f->counter->value()) + "\n";
    } else if (f->read) {
      out += f->name + " " + format_value(f->read()) + "\n";
    } else if (f->histogram) {
      const Histogram::Snapshot s = f->histogram->snapshot();
      for (std::size_t i = 0; i < s.upper_bounds.size(); ++i) {
        out += f->name + "_bucket{le=\"" + format_value(s.upper_bounds[i]) + "\"} " +
               std::to_string(s.cumulative[i]) + "\n";
      }
      out += f->name + "_bucket{le=\"+Inf\"} " + std::to_string(s.cumulative.back()) + "\n";
      out += f->name + "_sum " + format_value(s.sum) + "\n";
      out += f->name + "_count " + std::to_string(s.count) + "\n";
    }
  }
  return out;
}

std::vector<double> latency_buckets_seconds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

}  // namespace prefixgate::engine::server
