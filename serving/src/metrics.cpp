// Prometheus text exposition (format 0.0.4).
#include "prefixgate/serving/metrics.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstring>

#include "prefixgate/base/check.h"

namespace prefixgate::serving {
namespace {

std::uint64_t new_family_id() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// A thread's series used recently, of every family, direct-mapped by a hash of the family's id
// and the label values. A family's id is never reused, so a slot can never name a series of a
// family that is gone (its address could be reused); series are never removed from a family,
// so a slot's pointer stays valid while its family lives.
struct SeriesSlot {
  std::uint64_t family = 0;  // 0: empty
  std::uint64_t hash = 0;
  LabelValues values;
  void* series = nullptr;
};
constexpr std::size_t kSeriesSlots = 256;

// A label value's hash from its length and its first and last eight bytes (fewer when it is
// shorter), inline: values are a few bytes to a few dozen, and the ones a family's series tell
// apart (an upstream's port, a status, a rule's name) differ near an end. Hashing every word of
// them cost about as much as the rest of the lookup. Only the slot a series is cached in
// depends on it: a slot's values are compared before use, so two values with the same ends
// share slots but never a series.
std::uint64_t hash_value(std::string_view v) {
  const char* p = v.data();
  const std::size_t n = v.size();
  const auto load = [](const char* at, std::size_t bytes) {
    std::uint64_t word = 0;
    std::memcpy(&word, at, bytes);
    return word;
  };
  std::uint64_t head = 0, tail = 0;
  if (n >= 8) {
    head = load(p, 8);
    tail = load(p + n - 8, 8);
  } else if (n >= 4) {
    head = load(p, 4);
    tail = load(p + n - 4, 4);
  } else if (n > 0) {
    head = static_cast<unsigned char>(p[0]) |
           static_cast<std::uint64_t>(static_cast<unsigned char>(p[n / 2])) << 8 |
           static_cast<std::uint64_t>(static_cast<unsigned char>(p[n - 1])) << 16;
  }
  std::uint64_t h = (head ^ n * 0x9E3779B97F4A7C15ULL) * 0xFF51AFD7ED558CCDULL;
  h = (h ^ (h >> 29) ^ tail) * 0xC4CEB9FE1A85EC53ULL;
  return h ^ (h >> 32);
}

std::uint64_t hash_of(std::uint64_t family, LabelView values) {
  std::uint64_t h = family * 0x9E3779B97F4A7C15ULL;
  for (std::string_view v : values) {
    h = (h ^ hash_value(v)) * 0x100000001B3ULL;
  }
  return h;
}

bool same_values(const LabelValues& a, LabelView b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

// The series a family keeps for `values`: from one of the thread's two slots for its hash when
// one holds them, else from `lookup` (which takes the family's lock and creates the series at
// zero), then kept in the first of the two that is empty, or the second. Two places per series:
// with one, two of a request's dozen series sharing a slot (one gateway process in four, by the
// birthday bound over 256 slots, the labels holding its upstreams' ports) took turns evicting
// each other, and each paid the lock and three allocations on every request.
template <class Lookup>
void* cached_series(std::uint64_t family, LabelView values, Lookup&& lookup) {
  thread_local std::array<SeriesSlot, kSeriesSlots> slots;
  const std::uint64_t hash = hash_of(family, values);
  SeriesSlot& first = slots[(hash >> 32) % kSeriesSlots];
  if (first.family == family && first.hash == hash && same_values(first.values, values)) {
    return first.series;
  }
  SeriesSlot& second = slots[(hash & 0xffffffffULL) % kSeriesSlots];
  if (second.family == family && second.hash == hash && same_values(second.values, values)) {
    return second.series;
  }
  SeriesSlot& slot = first.family == 0 ? first : second;
  LabelValues key(values.begin(), values.end());
  slot.series = lookup(key);
  slot.family = family;
  slot.hash = hash;
  slot.values = std::move(key);
  return slot.series;
}

}  // namespace

std::uint64_t new_series_owner_id() {
  return new_family_id();
}

void* thread_cached(std::uint64_t owner, LabelView values, void* (*make)(void*, LabelValues),
                    void* context) {
  return cached_series(owner, values,
                       [&](LabelValues key) { return make(context, std::move(key)); });
}

namespace {

// Label values escape backslash, double quote and newline (the exposition format's rules).
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

void append_header(const std::string& name, const std::string& help, const char* type,
                   std::string& out) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void append_line(const std::string& name, const std::vector<std::string>& label_names,
                 const LabelValues& values, double v, std::string& out) {
  out += name;
  append_labels(label_names, values, out);
  out += ' ';
  append_metric_value(v, out);
  out += '\n';
}

}  // namespace

void append_metric_value(double v, std::string& out) {
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
    return;
  }
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  PG_DCHECK(ec == std::errc(), "32 bytes hold any shortest double");
  out.append(buf, end);
}

// ---------------------------------------------------------------------------------------------

Histogram::Histogram(const std::vector<double>* bounds)
    : bounds_(bounds), counts_(bounds->size() + 1, 0) {}

void Histogram::observe(double v) {
  // Bucket i counts le=bounds[i]: the first bound >= v.
  const auto bucket = static_cast<std::size_t>(
      std::lower_bound(bounds_->begin(), bounds_->end(), v) - bounds_->begin());
  std::lock_guard lock(mu_);
  ++counts_[bucket];
  sum_ += v;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  std::lock_guard lock(mu_);
  Snapshot s{{}, sum_, count_};
  s.cumulative.reserve(counts_.size());
  std::uint64_t running = 0;
  for (std::uint64_t c : counts_) s.cumulative.push_back(running += c);
  return s;
}

CounterFamily::CounterFamily(std::string name, std::string help, std::vector<std::string> labels)
    : name_(std::move(name)),
      help_(std::move(help)),
      labels_(std::move(labels)),
      id_(new_family_id()) {
  if (labels_.empty()) series_.try_emplace(LabelValues{});
}

Counter& CounterFamily::series(const LabelValues& values) {
  std::lock_guard lock(mu_);
  return series_[values];
}

Counter& CounterFamily::series(LabelView values) {
  return *static_cast<Counter*>(cached_series(id_, values, [&](LabelValues key) -> void* {
    std::lock_guard lock(mu_);
    return &series_[std::move(key)];
  }));
}

void CounterFamily::render(std::string& out) const {
  append_header(name_, help_, "counter", out);
  std::lock_guard lock(mu_);
  for (const auto& [labels, counter] : series_)
    append_line(name_, labels_, labels, counter.value(), out);
}

HistogramFamily::HistogramFamily(std::string name, std::string help,
                                 std::vector<std::string> labels, std::vector<double> bounds)
    : name_(std::move(name)),
      help_(std::move(help)),
      labels_(std::move(labels)),
      bounds_(std::move(bounds)),
      id_(new_family_id()) {
  PG_CHECK(std::is_sorted(bounds_.begin(), bounds_.end()), "histogram bounds are sorted");
  if (labels_.empty()) series_.try_emplace(LabelValues{}, &bounds_);
}

Histogram& HistogramFamily::series(const LabelValues& values) {
  std::lock_guard lock(mu_);
  return series_.try_emplace(values, &bounds_).first->second;
}

Histogram& HistogramFamily::series(LabelView values) {
  return *static_cast<Histogram*>(cached_series(id_, values, [&](LabelValues key) -> void* {
    std::lock_guard lock(mu_);
    return &series_.try_emplace(std::move(key), &bounds_).first->second;
  }));
}

void HistogramFamily::render(std::string& out) const {
  append_header(name_, help_, "histogram", out);
  std::lock_guard lock(mu_);
  const std::string bucket = name_ + "_bucket";
  for (const auto& [labels, histogram] : series_) {
    const Histogram::Snapshot s = histogram.snapshot();
    for (std::size_t i = 0; i <= bounds_.size(); ++i) {
      std::string le = "+Inf";
      if (i < bounds_.size()) {
        le.clear();
        append_metric_value(bounds_[i], le);
      }
      out += bucket;
      append_labels(labels_, labels, out, "le", le);
      out += ' ';
      append_metric_value(static_cast<double>(s.cumulative[i]), out);
      out += '\n';
    }
    append_line(name_ + "_sum", labels_, labels, s.sum, out);
    append_line(name_ + "_count", labels_, labels, static_cast<double>(s.count), out);
  }
}

// ---------------------------------------------------------------------------------------------

struct Metrics::Family {
  std::unique_ptr<CounterFamily> counter;
  std::unique_ptr<HistogramFamily> histogram;
  // A callback family.
  std::string name, help;
  MetricType type = MetricType::kGauge;
  std::vector<std::string> labels;
  std::function<std::vector<Sample>()> read;
};

Metrics::Metrics() = default;
Metrics::~Metrics() = default;

CounterFamily& Metrics::counter(std::string name, std::string help,
                                std::vector<std::string> labels) {
  auto f = std::make_unique<Family>();
  f->counter = std::make_unique<CounterFamily>(std::move(name), std::move(help), std::move(labels));
  CounterFamily& out = *f->counter;
  families_.push_back(std::move(f));
  return out;
}

HistogramFamily& Metrics::histogram(std::string name, std::string help,
                                    std::vector<std::string> labels, std::vector<double> bounds) {
  auto f = std::make_unique<Family>();
  f->histogram = std::make_unique<HistogramFamily>(std::move(name), std::move(help),
                                                   std::move(labels), std::move(bounds));
  HistogramFamily& out = *f->histogram;
  families_.push_back(std::move(f));
  return out;
}

Counter& Metrics::counter(std::string name, std::string help) {
  return counter(std::move(name), std::move(help), std::vector<std::string>{}).series({});
}

Histogram& Metrics::histogram(std::string name, std::string help, std::vector<double> bounds) {
  return histogram(std::move(name), std::move(help), std::vector<std::string>{}, std::move(bounds))
      .series({});
}

void Metrics::callback(std::string name, std::string help, MetricType type,
                       std::vector<std::string> labels, std::function<std::vector<Sample>()> read) {
  auto f = std::make_unique<Family>();
  f->name = std::move(name);
  f->help = std::move(help);
  f->type = type;
  f->labels = std::move(labels);
  f->read = std::move(read);
  families_.push_back(std::move(f));
}

void Metrics::callback(std::string name, std::string help, MetricType type,
                       std::function<double()> read) {
  callback(std::move(name), std::move(help), type, {}, [read = std::move(read)] {
    return std::vector<Sample>{{{}, read()}};
  });
}

std::string Metrics::render() const {
  std::string out;
  out.reserve(16 * 1024);
  for (const auto& f : families_) {
    if (f->counter) {
      f->counter->render(out);
    } else if (f->histogram) {
      f->histogram->render(out);
    } else {
      append_header(f->name, f->help, f->type == MetricType::kCounter ? "counter" : "gauge", out);
      for (const Sample& s : f->read()) append_line(f->name, f->labels, s.labels, s.value, out);
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

}  // namespace prefixgate::serving
