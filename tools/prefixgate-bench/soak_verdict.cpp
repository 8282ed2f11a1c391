// The pure part of `soak`: /proc and /metrics readers, error attribution, the verdict (soak.h).
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include "percentiles.h"
#include "prefixgate/canonicalize/json.h"
#include "soak.h"

namespace prefixgate::bench {

std::optional<long> parse_vm_rss_kb(std::string_view text) {
  const std::size_t at = text.find("VmRSS:");
  if (at == std::string_view::npos) return std::nullopt;
  std::size_t i = at + 6;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  long value = 0;
  auto [p, ec] = std::from_chars(text.data() + i, text.data() + text.size(), value);
  if (ec != std::errc() || p == text.data() + i) return std::nullopt;
  return value;
}

long read_rss_kb(pid_t pid) {
  if (pid <= 0) return -1;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  if (!in) return -1;
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_vm_rss_kb(ss.str()).value_or(-1);
}

long count_fds(pid_t pid) {
  if (pid <= 0) return -1;
  DIR* dir = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (dir == nullptr) return -1;
  long n = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n;
}

long count_established(pid_t pid) {
  if (pid <= 0) return -1;
  const std::string base = "/proc/" + std::to_string(pid);
  std::unordered_set<std::string> established;  // socket inodes, from the process's netns view
  for (const char* table : {"/net/tcp", "/net/tcp6"}) {
    std::ifstream in(base + table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string f[10];
      for (std::string& x : f) fields >> x;
      if (f[3] == "01") established.insert(f[9]);  // st 01: TCP_ESTABLISHED; f[9]: inode
    }
  }
  DIR* dir = opendir((base + "/fd").c_str());
  if (dir == nullptr) return -1;
  long n = 0;
  char target[64];
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const std::string link = base + "/fd/" + e->d_name;
    const ssize_t len = readlink(link.c_str(), target, sizeof target - 1);
    if (len <= 0) continue;
    const std::string_view t(target, static_cast<std::size_t>(len));
    if (t.starts_with("socket:[") && t.ends_with("]") &&
        established.contains(std::string(t.substr(8, t.size() - 9)))) {
      ++n;
    }
  }
  closedir(dir);
  return n;
}

std::optional<double> metric_value(std::string_view text, std::string_view name) {
  std::optional<double> sum;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    const std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.size() <= name.size() || line.substr(0, name.size()) != name) continue;
    const char next = line[name.size()];
    if (next != ' ' && next != '{') continue;
    const std::size_t space = line.rfind(' ');
    if (space == std::string_view::npos) continue;
    std::string value(line.substr(space + 1));
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (end == value.c_str()) continue;
    sum = sum.value_or(0) + v;
  }
  return sum;
}

std::size_t metric_series(std::string_view text) {
  std::size_t n = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    if (eol > pos && text[pos] != '#') ++n;
    pos = eol + 1;
  }
  return n;
}

namespace {

bool names_port(const RequestRecord& rec, std::uint16_t port) {
  const std::string suffix = ":" + std::to_string(port);
  return rec.replica.size() >= suffix.size() &&
         rec.replica.compare(rec.replica.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The kill time is taken on this side of kill(2), before the process is found and signalled, and
// a record's times on the load generator's thread: on a loaded host they drift apart by
// milliseconds. Times this close to the kill are read in whichever way does not blame the gateway.
constexpr double kKillClockSlackS = 0.05;

}  // namespace

bool is_injected_error(const RequestRecord& rec, const SoakRestart& r, std::uint16_t port) {
  if (rec.error.empty() || rec.error.rfind("http_", 0) == 0) return false;
  return names_port(rec, port) && rec.sent_s <= r.t_s + kKillClockSlackS &&
         rec.done_s >= r.t_s - kKillClockSlackS;
}

bool was_in_flight_at(const RequestRecord& rec, const SoakRestart& r, std::uint16_t port) {
  if (!names_port(rec, port) || rec.sent_s >= r.t_s || rec.done_s <= r.t_s) return false;
  if (!rec.error.empty()) return true;
  // A stream that succeeded counts only if it outlived the kill by more than the clocks' slack:
  // one that ended in the moment between the kill time being taken and the signal was not cut.
  // One that had no answer yet may have been retried by the gateway on a fresh connection (to
  // the restarted process, on the same port) and succeeded: the kill did not find it streaming.
  const bool streaming = rec.first_token_s >= 0 && rec.first_token_s < r.t_s;
  return streaming && rec.done_s > r.t_s + kKillClockSlackS;
}

namespace {

// A process lifetime's series: judged values of one field.
struct Series {
  std::string subject;
  std::vector<double> values;
};

enum class Flatness { kPeak, kTrend };

// first/last: the medians of the first and last quarter of the judged samples (at least one
// sample each). kPeak: max <= min * (1 + tolerance) + slack. kTrend: last <= first * (1 +
// tolerance) + slack, for counts that move with the requests in flight (descriptors).
SoakCheck flat_check(const std::string& what, const Series& s, Flatness rule, double tolerance,
                     double slack, std::size_t min_samples) {
  SoakCheck c{.what = what, .subject = s.subject, .samples = s.values.size()};
  if (!s.values.empty()) {
    const auto quarter = static_cast<std::ptrdiff_t>(std::max<std::size_t>(1, s.values.size() / 4));
    c.first = median({s.values.begin(), s.values.begin() + quarter});
    c.last = median({s.values.end() - quarter, s.values.end()});
    c.min = *std::min_element(s.values.begin(), s.values.end());
    c.max = *std::max_element(s.values.begin(), s.values.end());
  }
  c.limit = (rule == Flatness::kPeak ? c.min : c.first) * (1 + tolerance) + slack;
  c.judged = s.values.size() >= min_samples;
  c.pass = !c.judged || (rule == Flatness::kPeak ? c.max : c.last) <= c.limit;
  return c;
}

SoakCheck bounded_check(const std::string& what, const std::vector<double>& values,
                        double tolerance, std::size_t min_samples) {
  SoakCheck c{.what = what, .subject = "gateway", .samples = values.size()};
  c.judged = values.size() >= std::max<std::size_t>(min_samples, 2);
  if (values.empty()) {
    c.judged = false;
    return c;
  }
  const std::size_t half = values.size() / 2;
  c.first = half > 0 ? *std::max_element(values.begin(), values.begin() + half) : values.front();
  c.last = *std::max_element(values.begin() + half, values.end());
  c.min = *std::min_element(values.begin(), values.end());
  c.max = std::max(c.first, c.last);
  c.limit = c.first * (1 + tolerance);
  c.pass = !c.judged || c.last <= c.limit;
  return c;
}

}  // namespace

SoakVerdict judge_soak(const std::vector<SoakSample>& samples, std::size_t other_errors,
                       const SoakVerdictOptions& o) {
  // Lifetimes in order of first appearance: (name, pid) -> its judged RSS and descriptors.
  std::vector<std::pair<std::string, pid_t>> order;
  std::map<std::pair<std::string, pid_t>, std::pair<Series, Series>> lifetimes;
  std::map<std::string, std::vector<double>> bounded;
  const char* bounded_names[] = {"index_blocks", "index_hashes", "metrics_series", "metrics_bytes",
                                 "stats_bytes"};
  for (const SoakSample& s : samples) {
    for (const ProcessSample& p : s.processes) {
      const auto key = std::make_pair(p.name, p.pid);
      auto [it, fresh] = lifetimes.try_emplace(key);
      if (fresh) {
        order.push_back(key);
        const std::string subject = p.name + " (pid " + std::to_string(p.pid) + ")";
        it->second.first.subject = subject;
        it->second.second.subject = subject;
      }
      if (s.t_s < (p.name == "gateway" ? std::max(o.warmup_s, o.gateway_warmup_s) : o.warmup_s)) {
        continue;
      }
      if (p.started_s > 0 && s.t_s - p.started_s < o.lifetime_warmup_s) continue;
      if (p.rss_kb >= 0) it->second.first.values.push_back(static_cast<double>(p.rss_kb));
      if (p.fds >= 0) {
        // Connections in use or pooled move with the traffic; what a leak leaves is the rest.
        const long other = p.connections >= 0 ? p.fds - p.connections : p.fds;
        it->second.second.values.push_back(static_cast<double>(other));
      }
    }
    if (s.t_s < o.warmup_s) continue;
    const double values[] = {s.gateway.index_blocks, s.gateway.index_hashes,
                             s.gateway.metrics_series, s.gateway.metrics_bytes,
                             s.gateway.stats_bytes};
    for (std::size_t i = 0; i < std::size(values); ++i) {
      if (values[i] >= 0) bounded[bounded_names[i]].push_back(values[i]);
    }
  }
  SoakVerdict v;
  for (const auto& key : order) {
    const auto& [rss, fds] = lifetimes.at(key);
    v.checks.push_back(
        flat_check("rss_kb", rss, Flatness::kPeak, o.rss_tolerance, 0, o.min_samples));
    v.checks.push_back(flat_check("fds_not_connections", fds, Flatness::kTrend, o.fd_tolerance,
                                  o.fd_slack, o.min_samples));
  }
  for (const char* name : bounded_names) {
    v.checks.push_back(bounded_check(name, bounded[name], o.bound_tolerance, o.min_samples));
  }
  SoakCheck errors{.what = "errors (not injected)",
                   .subject = "load",
                   .last = static_cast<double>(other_errors),
                   .max = static_cast<double>(other_errors),
                   .limit = 0,
                   .samples = samples.size()};
  errors.pass = other_errors == 0;
  v.checks.push_back(errors);
  // A run whose every process check was skipped proves nothing: that is a failure too.
  bool any_judged_process = false;
  for (const SoakCheck& c : v.checks) {
    if (c.what == "rss_kb" && c.judged) any_judged_process = true;
    if (!c.pass) v.pass = false;
  }
  if (!any_judged_process) v.pass = false;
  return v;
}

namespace {

double num(const json::Value& v, std::string_view key, double fallback = -1) {
  const json::Value* x = v.find(key);
  return x != nullptr && x->is_number() ? x->as_number().value : fallback;
}

}  // namespace

Result<SoakRecording> parse_soak_json(std::string_view text) {
  auto doc = json::parse(text);
  if (!doc || !doc->is_object()) {
    return make_error(ErrorCode::kInvalidValue, "not a soak JSON document");
  }
  const json::Value* samples = doc->find("samples");
  const json::Value* restarts = doc->find("restarts");
  const json::Value* setup = doc->find("setup");
  if (samples == nullptr || !samples->is_array() || restarts == nullptr || !restarts->is_array() ||
      setup == nullptr) {
    return make_error(ErrorCode::kInvalidValue, "a soak JSON needs samples, restarts and setup");
  }
  SoakRecording r;
  r.requests = static_cast<std::size_t>(num(*doc, "requests", 0));
  r.errors = static_cast<std::size_t>(num(*doc, "errors", 0));
  r.injected_errors = static_cast<std::size_t>(num(*doc, "injected_errors", 0));
  r.duration_s = num(*setup, "duration_s", 0);
  for (const json::Value& s : samples->as_array()) {
    SoakSample out{.t_s = num(s, "t_s", 0)};
    if (const json::Value* procs = s.find("processes"); procs != nullptr && procs->is_array()) {
      for (const json::Value& p : procs->as_array()) {
        const json::Value* name = p.find("name");
        out.processes.push_back(
            {.name = name != nullptr && name->is_string() ? name->as_string() : std::string(),
             .pid = static_cast<pid_t>(num(p, "pid")),
             .started_s = num(p, "started_s", 0),
             .rss_kb = static_cast<long>(num(p, "rss_kb")),
             .fds = static_cast<long>(num(p, "fds")),
             .connections = static_cast<long>(num(p, "connections"))});
      }
    }
    out.gateway = {.index_blocks = num(s, "index_blocks"),
                   .index_hashes = num(s, "index_hashes"),
                   .tokenizer_cache_bytes = num(s, "tokenizer_cache_bytes"),
                   .metrics_series = num(s, "metrics_series"),
                   .metrics_bytes = num(s, "metrics_bytes"),
                   .stats_bytes = num(s, "stats_bytes"),
                   .stats_ring_s = num(s, "stats_ring_s")};
    out.requests_done = static_cast<std::size_t>(num(s, "requests_done", 0));
    out.errors = static_cast<std::size_t>(num(s, "errors", 0));
    out.injected_errors = static_cast<std::size_t>(num(s, "injected_errors", 0));
    r.samples.push_back(std::move(out));
  }
  for (const json::Value& x : restarts->as_array()) {
    r.restarts.push_back(
        {.t_s = num(x, "t_s", 0),
         .replica = static_cast<std::size_t>(num(x, "replica", 0)),
         .old_pid = static_cast<pid_t>(num(x, "old_pid")),
         .new_pid = static_cast<pid_t>(num(x, "new_pid")),
         .listening_after_s = num(x, "listening_after_s", 0),
         .healthy_after_s = num(x, "healthy_after_s"),
         .in_flight = static_cast<std::size_t>(num(x, "in_flight", 0)),
         .in_flight_failed = static_cast<std::size_t>(num(x, "in_flight_failed", 0))});
  }
  return r;
}

std::optional<double> parse_duration_s(std::string_view text) {
  if (text.empty()) return std::nullopt;
  double scale = 1;
  switch (text.back()) {
    case 's': text.remove_suffix(1); break;
    case 'm':
      scale = 60;
      text.remove_suffix(1);
      break;
    case 'h':
      scale = 3600;
      text.remove_suffix(1);
      break;
    default: break;
  }
  if (text.empty()) return std::nullopt;
  std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !(v >= 0) || std::isinf(v)) return std::nullopt;
  return v * scale;
}

}  // namespace prefixgate::bench
