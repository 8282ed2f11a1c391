#include "server/live_stats.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "prefixgate/base/check.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::gateway::server {
namespace {

constexpr double kTtftFirstBoundSeconds = 0.001;
constexpr double kTtftGrowth = 1.2;

// Upper bound of bucket i, seconds.
double ttft_bound(std::size_t i) {
  return kTtftFirstBoundSeconds * std::pow(kTtftGrowth, static_cast<double>(i));
}

void add_hist(LiveStats::TtftHistogram& a, const LiveStats::TtftHistogram& b) {
  for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
}

// A small JSON writer for the hot-ish /stats path: numbers and strings appended in place.
class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  Writer& raw(std::string_view s) {
    out_ += s;
    return *this;
  }
  Writer& key(std::string_view k) {
    comma();
    json::append_quoted(k, out_);
    out_ += ':';
    fresh_ = true;
    return *this;
  }
  Writer& num(double v) {
    comma();
    if (std::isfinite(v)) {
      json::append_number(v, out_);
    } else {
      out_ += "null";
    }
    return *this;
  }
  Writer& u(std::uint64_t v) { return num(static_cast<double>(v)); }
  Writer& str(std::string_view s) {
    comma();
    json::append_quoted(s, out_);
    return *this;
  }
  Writer& boolean(bool b) {
    comma();
    out_ += b ? "true" : "false";
    return *this;
  }
  Writer& null() {
    comma();
    out_ += "null";
    return *this;
  }
  // A ratio, or null when the denominator is zero.
  Writer& ratio(std::uint64_t a, std::uint64_t b) {
    return b == 0 ? null() : num(static_cast<double>(a) / static_cast<double>(b));
  }
  // A quantile in ms rounded to 0.1 ms, or null when there is none.
  Writer& ms(double v) { return v < 0 ? null() : num(std::round(v * 10) / 10); }
  Writer& open(char c) {
    comma();
    out_ += c;
    fresh_ = true;
    return *this;
  }
  Writer& close(char c) {
    out_ += c;
    fresh_ = false;
    return *this;
  }
  // Pre-serialized JSON as one value.
  Writer& value(std::string_view s) {
    comma();
    out_ += s;
    return *this;
  }

 private:
  void comma() {
    if (!fresh_) out_ += ',';
    fresh_ = false;
  }
  std::string& out_;
  bool fresh_ = true;
};

// ASCII classes, as <cctype>'s in the C locale, without a call per byte.
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_alnum(char c) {
  const int lower = c | 0x20;
  return is_digit(c) || (lower >= 'a' && lower <= 'z');
}

}  // namespace

std::int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string redact_excerpt(std::string_view text, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 3);
  append_redacted_excerpt(text, max_bytes, out);
  return out;
}

void append_redacted_excerpt(std::string_view text, std::size_t max_bytes, std::string& out) {
  const std::string_view cut = text.substr(0, max_bytes);
  // Every byte in is one byte out: written in place, without a capacity check per byte.
  const std::size_t start = out.size();
  out.resize(start + cut.size());
  char* o = out.data() + start;
  for (std::size_t i = 0; i < cut.size();) {
    if (!is_alnum(cut[i])) {
      const auto u = static_cast<unsigned char>(cut[i]);
      *o++ = u < 0x20 || u >= 0x7f ? '?' : cut[i];
      ++i;
      continue;
    }
    std::size_t j = i;
    bool digit = false;
    while (j < cut.size() && is_alnum(cut[j])) {
      digit = digit || is_digit(cut[j]);
      ++j;
    }
    const bool mask_letters = digit || j - i > 12;
    for (std::size_t k = i; k < j; ++k) {
      if (is_digit(cut[k])) {
        *o++ = '9';
      } else {
        *o++ = mask_letters ? 'x' : cut[k];
      }
    }
    i = j;
  }
  if (text.size() > max_bytes) out += "...";
}

void LiveStats::Counts::add(const Counts& o) {
  requests += o.requests;
  errors += o.errors;
  prompt_tokens += o.prompt_tokens;
  cached_tokens += o.cached_tokens;
  predicted_cached_tokens += o.predicted_cached_tokens;
}

void LiveStats::Interval::add(const Interval& o) {
  all.add(o.all);
  if (replicas.size() < o.replicas.size()) replicas.resize(o.replicas.size());
  for (std::size_t i = 0; i < o.replicas.size(); ++i) replicas[i].add(o.replicas[i]);
  if (tenants.size() < o.tenants.size()) tenants.resize(o.tenants.size());
  for (std::size_t i = 0; i < o.tenants.size(); ++i) tenants[i].add(o.tenants[i]);
  for (std::size_t i = 0; i < decisions.size(); ++i) decisions[i] += o.decisions[i];
  add_hist(ttft_hit, o.ttft_hit);
  add_hist(ttft_miss, o.ttft_miss);
  findings += o.findings;
  changes += o.changes;
}

std::size_t LiveStats::ttft_bucket(double seconds) {
  if (!(seconds > kTtftFirstBoundSeconds)) return 0;  // also NaN
  const double i = std::ceil(std::log(seconds / kTtftFirstBoundSeconds) / std::log(kTtftGrowth));
  if (i >= static_cast<double>(kTtftBuckets - 1)) return kTtftBuckets - 1;
  auto b = static_cast<std::size_t>(i);
  // Guard the floating-point edge: bucket b holds (bound(b-1), bound(b)].
  if (b > 0 && seconds <= ttft_bound(b - 1)) --b;
  return b;
}

double LiveStats::ttft_quantile_ms(const TtftHistogram& h, double q) {
  std::uint64_t total = 0;
  for (std::uint32_t c : h) total += c;
  if (total == 0) return -1;
  const double rank = std::clamp(q, 0.0, 1.0) * static_cast<double>(total);
  double seen = 0;
  for (std::size_t i = 0; i < h.size(); ++i) {
    if (h[i] == 0) continue;
    const double next = seen + h[i];
    if (next >= rank) {
      const double lo = i == 0 ? 0.0 : ttft_bound(i - 1);
      const double hi = ttft_bound(i);
      const double frac = (rank - seen) / h[i];
      return 1000.0 * (lo + (hi - lo) * frac);
    }
    seen = next;
  }
  return 1000.0 * ttft_bound(h.size() - 1);
}

LiveStats::LiveStats(LiveStatsOptions options, std::vector<std::string> replica_names,
                     std::string policy_name, std::int64_t started_ms)
    : options_(options),
      replica_names_(std::move(replica_names)),
      policy_name_(std::move(policy_name)),
      started_ms_(started_ms),
      ring_(std::max<std::size_t>(1, options.capacity)) {
  current_.replicas.resize(replica_names_.size());
  totals_.replicas.resize(replica_names_.size());
}

std::size_t LiveStats::tenant_slot_locked(std::string_view tenant) {
  if (auto it = tenant_slots_.find(tenant); it != tenant_slots_.end()) return it->second;
  if (tenant_names_.size() >= options_.max_tenants + (other_slot_ == SIZE_MAX ? 0 : 1)) {
    if (other_slot_ == SIZE_MAX) {
      other_slot_ = tenant_names_.size();
      tenant_names_.push_back("(other)");
    }
    return other_slot_;
  }
  // Tenant names come from headers: keep them printable and short in the JSON.
  std::string name;
  for (char ch : tenant.substr(0, 64)) {
    const auto u = static_cast<unsigned char>(ch);
    name += u < 0x20 || u >= 0x7f ? '?' : ch;
  }
  const std::size_t slot = tenant_names_.size();
  tenant_names_.push_back(std::move(name));
  tenant_slots_.emplace(std::string(tenant), slot);
  return slot;
}

void LiveStats::record_decision(RouteReason reason) {
  const auto i = static_cast<std::size_t>(reason);
  std::lock_guard lock(mu_);
  if (i < current_.decisions.size()) ++current_.decisions[i];
}

void LiveStats::record_request(const CompletedRequest& r) {
  Counts c;
  c.requests = 1;
  c.errors = r.status >= 500 || r.status == 499 ? 1 : 0;
  if (r.usage_seen) {
    c.prompt_tokens = r.prompt_tokens;
    c.cached_tokens = std::min(r.cached_tokens, r.prompt_tokens);
    c.predicted_cached_tokens = std::min(r.predicted_cached_tokens, r.prompt_tokens);
  }
  std::lock_guard lock(mu_);
  current_.all.add(c);
  if (r.replica < current_.replicas.size()) current_.replicas[r.replica].add(c);
  const std::size_t slot = tenant_slot_locked(r.tenant);
  if (current_.tenants.size() <= slot) current_.tenants.resize(slot + 1);
  current_.tenants[slot].add(c);
  if (r.ttft_seconds >= 0 && r.usage_seen && r.prompt_tokens > 0) {
    const bool hit = is_cache_hit(r.prompt_tokens, c.cached_tokens);
    ++(hit ? current_.ttft_hit : current_.ttft_miss)[ttft_bucket(r.ttft_seconds)];
  }
}

template <class Row>
Row& LiveStats::top_k_row_locked(std::vector<Row>& rows, std::string_view key_a,
                                 std::string_view key_b, std::int64_t now_ms) {
  const auto key_of = [](const Row& row) -> std::pair<const std::string&, const std::string&> {
    if constexpr (std::is_same_v<Row, FindingRow>) {
      return {row.rule, row.field};
    } else {
      return {row.rule, row.path};
    }
  };
  for (Row& row : rows) {
    const auto [a, b] = key_of(row);
    if (a == key_a && b == key_b) return row;
  }
  if (rows.size() >= std::max<std::size_t>(1, options_.max_findings)) {
    // Full: the row seen least (and, among those, longest ago) makes room. A finding that
    // recurs accumulates a count and stays; one-offs churn through the last places.
    auto victim = std::min_element(rows.begin(), rows.end(), [](const Row& x, const Row& y) {
      return x.count != y.count ? x.count < y.count : x.last_seen_ms < y.last_seen_ms;
    });
    rows.erase(victim);
  }
  rows.emplace_back();
  rows.back().first_seen_ms = now_ms;
  return rows.back();
}

void LiveStats::record_finding(const LiveFinding& f, std::int64_t now_ms) {
  prep_recorder(now_ms).finding(f);
}

void LiveStats::record_change(const LiveChange& c, std::int64_t now_ms) {
  prep_recorder(now_ms).change(c);
}

// The rows' keys are copied only into a new row, and the excerpt is redacted into the row's
// own string: a finding or change that recurs (most do, on every request of a prompt) costs
// its lookup and no allocation.
void LiveStats::PrepRecorder::finding(const LiveFinding& f) {
  ++stats_.current_.findings;
  if (row_ == nullptr || row_->rule != f.rule || row_->field != f.field) {
    write_excerpt();
    row_ = &stats_.top_k_row_locked(stats_.findings_, f.rule, f.field, now_ms_);
    if (row_->count == 0) {
      row_->rule.assign(f.rule);
      row_->field.assign(f.field);
    }
  }
  ++row_->count;
  row_->last_seen_ms = now_ms_;
  row_->token_offset = f.token_offset;
  row_->byte_offset = f.byte_offset;
  excerpt_ = f.excerpt;
}

void LiveStats::PrepRecorder::write_excerpt() {
  if (row_ == nullptr) return;
  row_->excerpt.clear();
  append_redacted_excerpt(excerpt_, kExcerptBytes, row_->excerpt);
  row_ = nullptr;
}

void LiveStats::PrepRecorder::change(const LiveChange& c) {
  ++stats_.current_.changes;
  ChangeRow& row = stats_.top_k_row_locked(stats_.changes_, c.rule, c.path, now_ms_);
  if (row.count == 0) {
    row.rule.assign(c.rule);
    row.path.assign(c.path);
  }
  ++row.count;
  row.mode.assign(c.mode);
  row.last_seen_ms = now_ms_;
}

const LiveStats::Sample& LiveStats::sample_at(std::size_t age) const {
  PG_DCHECK(age < size_);
  return ring_[(head_ + ring_.size() - 1 - age) % ring_.size()];
}

LiveStats::Interval LiveStats::window_locked(std::size_t samples) const {
  Interval w;
  w.replicas.resize(replica_names_.size());
  for (std::size_t age = 0; age < std::min(samples, size_); ++age) w.add(sample_at(age).data);
  return w;
}

void LiveStats::tick(std::int64_t now_ms, const std::vector<ReplicaStatus>& replicas) {
  std::lock_guard lock(mu_);
  Sample& s = ring_[head_];
  s.t_ms = now_ms;
  s.data = std::move(current_);
  current_ = Interval{};
  current_.replicas.resize(replica_names_.size());
  head_ = (head_ + 1) % ring_.size();
  size_ = std::min(size_ + 1, ring_.size());
  last_tick_ms_ = now_ms;
  totals_.add(s.data);
  replicas_now_ = replicas;
  s.json = sample_json_locked(s);
}

std::size_t LiveStats::sample_count() const {
  std::lock_guard lock(mu_);
  return size_;
}

std::string LiveStats::sample_json_locked(const Sample& s) const {
  // TTFT percentiles over the trailing ttft_window_samples (this one included): a single
  // second holds too few requests for a p99.
  TtftHistogram hit{}, miss{};
  for (std::size_t age = 0; age < std::min(options_.ttft_window_samples, size_); ++age) {
    add_hist(hit, sample_at(age).data.ttft_hit);
    add_hist(miss, sample_at(age).data.ttft_miss);
  }
  const Interval& d = s.data;
  std::string out;
  Writer w(out);
  w.open('{');
  w.key("t").num(static_cast<double>(s.t_ms));
  w.key("requests").u(d.all.requests);
  w.key("errors").u(d.all.errors);
  w.key("prompt_tokens").u(d.all.prompt_tokens);
  w.key("cached_tokens").u(d.all.cached_tokens);
  w.key("predicted_cached_tokens").u(d.all.predicted_cached_tokens);
  w.key("decisions").open('{');
  for (std::size_t i = 0; i < d.decisions.size(); ++i) {
    if (d.decisions[i] > 0) {
      w.key(route_reason_name(static_cast<RouteReason>(i))).u(d.decisions[i]);
    }
  }
  w.close('}');
  w.key("ttft_ms").open('{');
  w.key("hit_p50").ms(ttft_quantile_ms(hit, 0.5));
  w.key("hit_p99").ms(ttft_quantile_ms(hit, 0.99));
  w.key("miss_p50").ms(ttft_quantile_ms(miss, 0.5));
  w.key("miss_p99").ms(ttft_quantile_ms(miss, 0.99));
  w.close('}');
  w.key("replicas").open('[');
  for (std::size_t i = 0; i < replica_names_.size(); ++i) {
    const Counts c = i < d.replicas.size() ? d.replicas[i] : Counts{};
    w.open('{');
    w.key("requests").u(c.requests);
    w.key("prompt_tokens").u(c.prompt_tokens);
    w.key("cached_tokens").u(c.cached_tokens);
    w.key("predicted_cached_tokens").u(c.predicted_cached_tokens);
    if (i < replicas_now_.size()) {
      const ReplicaView& v = replicas_now_[i].view;
      w.key("healthy").boolean(v.healthy);
      w.key("running").u(v.running);
      w.key("waiting").u(v.waiting);
      w.key("kv_usage").ratio(v.kv_pages_used, v.kv_pages_total);
    }
    w.close('}');
  }
  w.close(']');
  // Only the tenants active in this interval, by their index in the top-level "tenants".
  w.key("tenants").open('[');
  for (std::size_t i = 0; i < d.tenants.size(); ++i) {
    const Counts& c = d.tenants[i];
    if (c.requests == 0) continue;
    w.open('{');
    w.key("tenant").u(i);
    w.key("requests").u(c.requests);
    w.key("prompt_tokens").u(c.prompt_tokens);
    w.key("cached_tokens").u(c.cached_tokens);
    w.key("predicted_cached_tokens").u(c.predicted_cached_tokens);
    w.close('}');
  }
  w.close(']');
  w.key("findings").u(d.findings);
  w.key("canonicalization_changes").u(d.changes);
  w.close('}');
  return out;
}

namespace {

void counts_json(Writer& w, std::uint64_t requests, std::uint64_t errors, std::uint64_t prompt,
                 std::uint64_t cached, std::uint64_t predicted) {
  w.key("requests").u(requests);
  w.key("errors").u(errors);
  w.key("prompt_tokens").u(prompt);
  w.key("cached_tokens").u(cached);
  w.key("predicted_cached_tokens").u(predicted);
  w.key("hit_rate").ratio(cached, prompt);
  w.key("predicted_hit_rate").ratio(predicted, prompt);
}

// Findings or changes as the dashboard lists them: most seen first, then most recent.
template <class Rows>
auto most_seen_first(const Rows& rows) {
  std::vector<const typename Rows::value_type*> out;
  for (const auto& row : rows) out.push_back(&row);
  std::stable_sort(out.begin(), out.end(), [](const auto* a, const auto* b) {
    return a->count != b->count ? a->count > b->count : a->last_seen_ms > b->last_seen_ms;
  });
  return out;
}

}  // namespace

std::string LiveStats::to_json(std::int64_t since_ms) const {
  std::lock_guard lock(mu_);
  const Interval window = window_locked(options_.window_samples);
  const std::size_t window_seconds = std::min(options_.window_samples, size_);
  std::string out;
  out.reserve(4096 + size_ * 600);
  Writer w(out);
  const auto section = [&](const char* name, const Interval& in, double seconds) {
    w.key(name).open('{');
    w.key("seconds").num(seconds);
    counts_json(w, in.all.requests, in.all.errors, in.all.prompt_tokens, in.all.cached_tokens,
                in.all.predicted_cached_tokens);
    w.key("decisions").open('{');
    for (std::size_t i = 0; i < in.decisions.size(); ++i) {
      if (in.decisions[i] > 0) {
        w.key(route_reason_name(static_cast<RouteReason>(i))).u(in.decisions[i]);
      }
    }
    w.close('}');
    w.key("ttft_ms").open('{');
    for (const auto& [label, hist] :
         {std::pair<const char*, const TtftHistogram*>{"hit", &in.ttft_hit},
          {"miss", &in.ttft_miss}}) {
      std::uint64_t n = 0;
      for (std::uint32_t c : *hist) n += c;
      w.key(label).open('{');
      w.key("count").u(n);
      w.key("p50").ms(ttft_quantile_ms(*hist, 0.5));
      w.key("p99").ms(ttft_quantile_ms(*hist, 0.99));
      w.close('}');
    }
    w.close('}');
    w.key("findings").u(in.findings);
    w.key("canonicalization_changes").u(in.changes);
    w.close('}');
  };

  w.open('{');
  w.key("version").num(1);
  w.key("now_ms").num(static_cast<double>(last_tick_ms_));
  w.key("started_ms").num(static_cast<double>(started_ms_));
  w.key("interval_ms").num(static_cast<double>(options_.interval_ms));
  w.key("capacity").u(ring_.size());
  w.key("policy").str(policy_name_);
  w.key("ttft_hit_fraction").num(options_.ttft_hit_fraction);
  section(
      "totals", totals_,
      last_tick_ms_ > started_ms_ ? static_cast<double>(last_tick_ms_ - started_ms_) / 1000 : 0.0);
  section("window", window,
          static_cast<double>(window_seconds) * static_cast<double>(options_.interval_ms) / 1000);

  // A replica's or tenant's counts since start and over the last minute (zero until it has any).
  const auto totals_and_window = [&w](const std::vector<Counts>& totals,
                                      const std::vector<Counts>& last_minute, std::size_t i) {
    for (const auto& [key, counts] : {std::pair{"totals", &totals}, {"window", &last_minute}}) {
      const Counts c = i < counts->size() ? (*counts)[i] : Counts{};
      w.key(key).open('{');
      counts_json(w, c.requests, c.errors, c.prompt_tokens, c.cached_tokens,
                  c.predicted_cached_tokens);
      w.close('}');
    }
  };
  w.key("replicas").open('[');
  for (std::size_t i = 0; i < replica_names_.size(); ++i) {
    w.open('{');
    w.key("id").u(i);
    w.key("name").str(replica_names_[i]);
    if (i < replicas_now_.size()) {
      const ReplicaStatus& r = replicas_now_[i];
      w.key("kind").str(replica_kind_name(r.kind));
      w.key("events").str(events_link_name(r.events));
      w.key("healthy").boolean(r.view.healthy);
      w.key("running").u(r.view.running);
      w.key("waiting").u(r.view.waiting);
      w.key("kv_pages_used").u(r.view.kv_pages_used);
      w.key("kv_pages_total").u(r.view.kv_pages_total);
      w.key("kv_usage").ratio(r.view.kv_pages_used, r.view.kv_pages_total);
      w.key("preemptions_total").u(r.preemptions_total);
      w.key("tokens_queued_for_prefill").u(r.view.tokens_queued_for_prefill);
      w.key("inflight_requests").u(r.view.inflight_requests);
      w.key("index_blocks").u(r.index_blocks);
      if (r.seconds_since_event >= 0) {
        w.key("seconds_since_event").num(std::round(r.seconds_since_event * 1000) / 1000);
      } else {
        w.key("seconds_since_event").null();
      }
    }
    totals_and_window(totals_.replicas, window.replicas, i);
    w.close('}');
  }
  w.close(']');

  w.key("tenants").open('[');
  for (std::size_t i = 0; i < tenant_names_.size(); ++i) {
    w.open('{');
    w.key("id").u(i);
    w.key("name").str(tenant_names_[i]);
    totals_and_window(totals_.tenants, window.tenants, i);
    w.close('}');
  }
  w.close(']');

  w.key("findings").open('[');
  for (const FindingRow* f : most_seen_first(findings_)) {
    w.open('{');
    w.key("rule").str(f->rule);
    w.key("field").str(f->field);
    w.key("count").u(f->count);
    w.key("first_seen_ms").num(static_cast<double>(f->first_seen_ms));
    w.key("last_seen_ms").num(static_cast<double>(f->last_seen_ms));
    w.key("excerpt").str(f->excerpt);
    w.key("token_offset").u(f->token_offset);
    w.key("byte_offset").u(f->byte_offset);
    w.close('}');
  }
  w.close(']');

  w.key("canonicalization").open('[');
  for (const ChangeRow* c : most_seen_first(changes_)) {
    w.open('{');
    w.key("rule").str(c->rule);
    w.key("mode").str(c->mode);
    w.key("path").str(c->path);
    w.key("count").u(c->count);
    w.key("first_seen_ms").num(static_cast<double>(c->first_seen_ms));
    w.key("last_seen_ms").num(static_cast<double>(c->last_seen_ms));
    w.close('}');
  }
  w.close(']');

  w.key("samples").open('[');
  for (std::size_t age = size_; age-- > 0;) {
    const Sample& s = sample_at(age);
    if (s.t_ms > since_ms) w.value(s.json);
  }
  w.close(']');
  w.close('}');
  return out;
}

}  // namespace prefixgate::gateway::server
