#include "server/engine_load.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>

namespace prefixgate::gateway::server {
namespace {

struct Series {
  std::string_view name;
  std::string_view labels;  // between the braces, as written
  double value = 0;
};

// One sample line of the text format ("name{labels} value [timestamp]"), or nullopt.
std::optional<Series> parse_line(std::string_view line) {
  if (line.empty() || line.front() == '#') return std::nullopt;
  Series s;
  std::size_t i = 0;
  while (i < line.size() && line[i] != '{' && line[i] != ' ' && line[i] != '\t') ++i;
  s.name = line.substr(0, i);
  if (i < line.size() && line[i] == '{') {
    const std::size_t open = ++i;
    bool quoted = false;
    for (; i < line.size(); ++i) {
      if (quoted && line[i] == '\\') {
        ++i;
      } else if (line[i] == '"') {
        quoted = !quoted;
      } else if (!quoted && line[i] == '}') {
        break;
      }
    }
    if (i >= line.size()) return std::nullopt;
    s.labels = line.substr(open, i - open);
    ++i;
  }
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  std::size_t end = i;
  while (end < line.size() && line[end] != ' ' && line[end] != '\t') ++end;
  const std::string_view number = line.substr(i, end - i);
  const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), s.value);
  if (ec != std::errc() || ptr != number.data() + number.size() || !std::isfinite(s.value)) {
    return std::nullopt;
  }
  return s;
}

// The value of label `name` in a label list, if present.
std::optional<double> label_number(std::string_view labels, std::string_view name) {
  const std::string key = std::string(name) + "=\"";
  for (std::size_t at = labels.find(key); at != std::string_view::npos;
       at = labels.find(key, at + 1)) {
    if (at != 0 && labels[at - 1] != ',' && labels[at - 1] != ' ') continue;
    const std::size_t begin = at + key.size();
    const std::size_t close = labels.find('"', begin);
    if (close == std::string_view::npos) return std::nullopt;
    double v = 0;
    const auto [ptr, ec] = std::from_chars(labels.data() + begin, labels.data() + close, v);
    if (ec == std::errc() && ptr == labels.data() + close) return v;
    return std::nullopt;
  }
  return std::nullopt;
}

struct Sum {
  double total = 0;
  std::size_t count = 0;
  void add(double v) {
    total += v;
    ++count;
  }
  std::optional<double> sum() const { return count ? std::optional(total) : std::nullopt; }
  std::optional<double> mean() const {
    return count ? std::optional(total / static_cast<double>(count)) : std::nullopt;
  }
};

std::size_t count_of(double v) {
  return v > 0 ? static_cast<std::size_t>(std::llround(v)) : 0;
}

}  // namespace

Result<LoadReport> parse_engine_load(std::string_view text, ReplicaKind kind) {
  const bool vllm = kind == ReplicaKind::kVllm;
  const std::string_view running_name =
      vllm ? "vllm:num_requests_running" : "sglang:num_running_reqs";
  const std::string_view waiting_name =
      vllm ? "vllm:num_requests_waiting" : "sglang:num_queue_reqs";
  Sum running, waiting, usage, usage_old, capacity, preemptions;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::optional<Series> s = parse_line(line);
    if (!s) continue;
    if (s->name == running_name) {
      running.add(s->value);
    } else if (s->name == waiting_name) {
      waiting.add(s->value);
    } else if (vllm) {
      if (s->name == "vllm:kv_cache_usage_perc") {
        usage.add(s->value);
      } else if (s->name == "vllm:gpu_cache_usage_perc") {
        usage_old.add(s->value);
      } else if (s->name == "vllm:num_preemptions_total" || s->name == "vllm:num_preemptions") {
        preemptions.add(s->value);
      } else if (s->name == "vllm:cache_config_info") {
        if (auto blocks = label_number(s->labels, "num_gpu_blocks")) capacity.add(*blocks);
      }
    } else if (s->name == "sglang:token_usage") {
      usage.add(s->value);
    } else if (s->name == "sglang:max_total_num_tokens") {
      capacity.add(s->value);
    }
  }
  if (!running.sum() || !waiting.sum()) {
    return make_error(ErrorCode::kInvalidValue, "no " + std::string(running_name) + " and " +
                                                    std::string(waiting_name) +
                                                    " in the replica's /metrics");
  }
  LoadReport r;
  r.running = count_of(*running.sum());
  r.waiting = count_of(*waiting.sum());
  r.preemptions_total = count_of(preemptions.sum().value_or(0));
  const std::optional<double> used = usage.count ? usage.mean() : usage_old.mean();
  if (used) {
    const double fraction = std::clamp(*used, 0.0, 1.0);
    r.kv_pages_total =
        capacity.sum() && *capacity.sum() >= 1 ? count_of(*capacity.sum()) : kUsageScale;
    r.kv_pages_used = count_of(fraction * static_cast<double>(r.kv_pages_total));
  }
  return r;
}

}  // namespace prefixgate::gateway::server
