// prefixgate-bench soak: the run (soak.h for what it measures and the verdict).
//
// Three things run at once: the load generator on its own thread (Poisson arrivals of a
// shared-prefix and multi-turn mix, every request streamed), and on this thread the sampler
// (every --sample-every) and the restarts (every --restart-every, replicas in turn). Request
// records come back when the load ends; errors are then attributed to the restarts.
#include "soak.h"

#include <unistd.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "commands.h"
#include "prefixgate/canonicalize/json.h"
#include "report_text.h"
#include "soak_report.h"

namespace prefixgate::bench {

namespace {

int usage_error(const std::string& message) {
  std::cerr << "prefixgate-bench soak: " << message << "\n";
  return 2;
}

double seconds_since(BenchClock::time_point zero) {
  return std::chrono::duration<double>(BenchClock::now() - zero).count();
}

// Enough sessions for the whole run at the given rate (Poisson: +30 % and a few more), a
// `multi_turn_share` of them multi-turn conversations, the rest shared-prefix completions,
// shuffled together.
Workload soak_workload(const SoakFlags& f) {
  const auto sessions = static_cast<std::size_t>(std::ceil(f.rate * f.duration_s * 1.3)) + 16;
  const auto conversations =
      static_cast<std::size_t>(std::llround(static_cast<double>(sessions) * f.multi_turn_share));
  const std::size_t singles = sessions - conversations;
  SharedPrefixOptions sp{.groups = f.groups,
                         .prompts_per_group = (singles + f.groups - 1) / f.groups,
                         .system_len = f.system_len,
                         .question_len = f.question_len,
                         .output_len = f.output_len,
                         .model = f.model};
  MultiTurnOptions mt{.conversations = conversations,
                      .turns = f.turns,
                      .system_len = f.system_len / 2,
                      .user_len = f.question_len,
                      .output_len = f.output_len,
                      .think_time_s = f.think_time_s,
                      .model = f.model};
  Workload w;
  w.name = "soak";
  if (singles > 0) w.sessions = make_shared_prefix(sp, f.seed).sessions;
  if (conversations > 0) {
    for (Session& s : make_multi_turn(mt, f.seed + 1).sessions) w.sessions.push_back(std::move(s));
  }
  Rng rng(f.seed + 2);
  for (std::size_t i = w.sessions.size(); i > 1; --i) {
    std::swap(w.sessions[i - 1], w.sessions[rng.below(i)]);
  }
  return w;
}

struct Sampler {
  const SoakFlags& flags;
  const Fleet& fleet;
  const HttpTarget& gateway;
  BenchClock::time_point zero;
  std::vector<double> started_s;  // per engine: its current lifetime's start
  // The newest /stats sample already read (its now_ms): each scrape asks only for newer ones.
  // A whole /stats (850 KB once its ring is full) costs the gateway 1.3-2.7 MB of RSS for a few
  // seconds, which the next sample would measure as a peak.
  mutable long long stats_since_ms = 0;

  SoakSample take() const {
    SoakSample s;
    s.t_s = seconds_since(zero);
    const pid_t g = fleet.gateway_pid(0);
    s.processes.push_back({.name = "gateway",
                           .pid = g,
                           .started_s = 0,
                           .rss_kb = read_rss_kb(g),
                           .fds = count_fds(g),
                           .connections = count_established(g)});
    for (std::size_t i = 0; i < fleet.replicas(); ++i) {
      const pid_t e = fleet.engine_pid(i);
      s.processes.push_back({.name = "engine-" + std::to_string(i),
                             .pid = e,
                             .started_s = started_s[i],
                             .rss_kb = read_rss_kb(e),
                             .fds = count_fds(e),
                             .connections = count_established(e)});
    }
    const SimpleReply metrics = http_get(gateway, "/metrics");
    if (metrics.status == 200) {
      s.gateway.index_blocks = metric_value(metrics.body, "prefixgate_index_blocks").value_or(-1);
      s.gateway.index_hashes =
          metric_value(metrics.body, "prefixgate_index_size_hashes").value_or(-1);
      s.gateway.tokenizer_cache_bytes =
          metric_value(metrics.body, "prefixgate_tokenizer_cache_bytes").value_or(-1);
      s.gateway.metrics_series = static_cast<double>(metric_series(metrics.body));
      s.gateway.metrics_bytes = static_cast<double>(metrics.body.size());
    }
    const SimpleReply stats =
        http_get(gateway, "/stats?since=" + std::to_string(std::max(0LL, stats_since_ms)));
    if (stats.status == 200) {
      if (auto doc = json::parse(stats.body); doc) {
        if (const json::Value* now = doc->find("now_ms"); now != nullptr && now->is_number()) {
          // The answer holds the samples since the last scrape, whose number moves with the
          // sampler's jitter (9 to 12 in 10 s): its size is judged per 10 s of samples.
          const auto now_ms = static_cast<long long>(now->as_number().value);
          if (stats_since_ms > 0 && now_ms > stats_since_ms) {
            s.gateway.stats_bytes = static_cast<double>(stats.body.size()) * 10000.0 /
                                    static_cast<double>(now_ms - stats_since_ms);
          }
          stats_since_ms = now_ms;
        }
        const json::Value* capacity = doc->find("capacity");
        const json::Value* interval = doc->find("interval_ms");
        if (capacity != nullptr && capacity->is_number() && interval != nullptr &&
            interval->is_number()) {
          s.gateway.stats_ring_s = capacity->as_number().value * interval->as_number().value / 1000;
        }
      }
    }
    return s;
  }
};

void print_sample(const SoakSample& s) {
  std::cout << "t=" << std::lround(s.t_s) << "s";
  for (const ProcessSample& p : s.processes) {
    std::cout << "  " << p.name << " " << (p.rss_kb >= 0 ? p.rss_kb / 1024.0 : -1) << "MiB/"
              << p.fds << "fd";
  }
  std::cout << "  index " << s.gateway.index_blocks << " blocks, /metrics "
            << s.gateway.metrics_series << " series, /stats " << s.gateway.stats_bytes << " B"
            << std::endl;
}

// Polls the gateway's /health until it counts every replica healthy; seconds since `since`, or -1.
double wait_all_healthy(const HttpTarget& gateway, std::size_t replicas,
                        BenchClock::time_point zero, double since_s, double timeout_s) {
  const std::string needle = "\"healthy_upstreams\":" + std::to_string(replicas);
  const auto deadline =
      BenchClock::now() + std::chrono::milliseconds(static_cast<long>(timeout_s * 1000));
  while (BenchClock::now() < deadline) {
    const SimpleReply r = http_get(gateway, "/health", std::chrono::seconds(2));
    if (r.status == 200 && r.body.find(needle) != std::string::npos) {
      return seconds_since(zero) - since_s;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling, not synchronizing
  }
  return -1;
}

// --gateway-warmup: a duration, or auto (the /stats ring's span, as the gateway reported it).
double gateway_warmup_s(const SoakFlags& flags, const std::vector<SoakSample>& samples) {
  if (flags.gateway_warmup != "auto") return parse_duration_s(flags.gateway_warmup).value_or(0);
  double ring = 0;
  for (const SoakSample& s : samples) ring = std::max(ring, s.gateway.stats_ring_s);
  return ring;
}

// The verdict's options from the flags, for a run of `duration_s` and its samples (a run just
// made, or one read back with --from).
SoakVerdictOptions verdict_options_of(const SoakFlags& flags, double duration_s,
                                      const std::vector<SoakSample>& samples,
                                      double lifetime_warmup_s) {
  return SoakVerdictOptions{.warmup_s = duration_s * flags.warmup_fraction,
                            .gateway_warmup_s = gateway_warmup_s(flags, samples),
                            .lifetime_warmup_s = lifetime_warmup_s,
                            .rss_tolerance = flags.rss_tolerance,
                            .fd_tolerance = flags.fd_tolerance,
                            .fd_slack = flags.fd_slack,
                            .bound_tolerance = flags.bound_tolerance,
                            .min_samples = flags.min_samples};
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int write_outputs(const SoakReport& report, const SoakFlags& flags) {
  std::cout << format_soak_summary(report);
  for (const auto& [path, text] :
       {std::pair{flags.json_out, soak_json(report)}, std::pair{flags.csv_out, soak_csv(report)},
        std::pair{flags.svg_out, soak_svg(report)}}) {
    std::filesystem::path p(path);
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
    std::ofstream out(path);
    out << text;
    if (!out) {
      std::cerr << "prefixgate-bench soak: cannot write " << path << "\n";
      return 1;
    }
    std::cout << "wrote " << path << "\n";
  }
  return report.verdict.pass ? 0 : 3;
}

// --from FILE: the samples of an earlier run judged again under this run's criteria.
int judge_recording(SoakFlags flags) {
  const std::string text = read_text(flags.from);
  auto rec = parse_soak_json(text);
  if (!rec) return usage_error("--from " + flags.from + ": " + rec.error().message);
  flags.duration_s = rec->duration_s;
  auto lifetime_warmup = parse_duration_s(flags.lifetime_warmup);
  if (!lifetime_warmup) return usage_error("--lifetime-warmup: a duration");
  const SoakVerdictOptions verdict_options =
      verdict_options_of(flags, rec->duration_s, rec->samples, *lifetime_warmup);
  auto doc = json::parse(text);
  SoakReport report{.title = "prefixgate soak",
                    .flags = flags,
                    .verdict_options = verdict_options,
                    .samples = rec->samples,
                    .restarts = rec->restarts,
                    .requests = rec->requests,
                    .verdict = judge_soak(rec->samples, rec->errors, verdict_options)};
  if (const json::Value* title = doc->find("title"); title != nullptr && title->is_string()) {
    report.title = title->as_string();
  }
  if (rec->errors > 0) report.errors_by_kind["(see the recording)"] = rec->errors;
  if (rec->injected_errors > 0)
    report.injected_by_kind["(see the recording)"] = rec->injected_errors;
  if (const json::Value* setup = doc->find("setup")) report.setup_json = json::to_json(*setup);
  return write_outputs(report, flags);
}

// The CSV and the chart go beside the JSON (its name less ".json") unless named.
void default_report_paths(SoakFlags& flags) {
  const std::string& json = flags.json_out;
  const std::string stem = json.ends_with(".json") ? json.substr(0, json.size() - 5) : json;
  if (flags.csv_out.empty()) flags.csv_out = stem + ".csv";
  if (flags.svg_out.empty()) flags.svg_out = stem + ".svg";
}

}  // namespace

int run_soak(SoakFlags flags) {
  if (!flags.from.empty()) {
    if (flags.json_out.empty() || flags.json_out == flags.from) {
      return usage_error("--from needs --json naming another file");
    }
    default_report_paths(flags);
    return judge_recording(std::move(flags));
  }

  if (auto d = parse_duration_s(flags.duration); d && *d > 0) {
    flags.duration_s = *d;
  } else {
    return usage_error("--duration: a positive duration such as 30m, 20s or 1h, got '" +
                       flags.duration + "'");
  }
  auto restart_every = parse_duration_s(flags.restart_every);
  auto sample_every = parse_duration_s(flags.sample_every);
  auto lifetime_warmup = parse_duration_s(flags.lifetime_warmup);
  if (!restart_every) return usage_error("--restart-every: a duration (0: no restarts)");
  if (!sample_every || *sample_every <= 0)
    return usage_error("--sample-every: a positive duration");
  if (!lifetime_warmup) return usage_error("--lifetime-warmup: a duration");
  if (!(flags.warmup_fraction >= 0 && flags.warmup_fraction < 1)) {
    return usage_error("--warmup: a fraction of the run in [0, 1)");
  }
  if (flags.fleet.replicas == 0) return usage_error("--replicas must be at least 1");
  if (!(flags.rate > 0) || std::isinf(flags.rate)) return usage_error("--rate: sessions/s > 0");
  if (flags.groups == 0) return usage_error("--groups must be at least 1");
  if (!(flags.multi_turn_share >= 0 && flags.multi_turn_share <= 1)) {
    return usage_error("--multi-turn-share: a fraction in [0, 1]");
  }
  const std::string dir = executable_dir();
  if (flags.fleet.engine_bin.empty())
    flags.fleet.engine_bin = dir + "/../../engine/prefixgate-engine";
  if (flags.fleet.gateway_bin.empty()) flags.fleet.gateway_bin = dir + "/../../gateway/prefixgate";
  for (const std::string* bin : {&flags.fleet.engine_bin, &flags.fleet.gateway_bin}) {
    if (access(bin->c_str(), X_OK) != 0) {
      return usage_error("cannot run '" + *bin +
                         "' (build it, or pass --engine-bin/--gateway-bin)");
    }
  }
  if (flags.fleet.log_dir.empty()) flags.fleet.log_dir = "build/results/soak-logs";
  if (flags.json_out.empty()) flags.json_out = "build/results/soak.json";
  default_report_paths(flags);
  flags.fleet.gateways = 1;
  flags.fleet.engine_args.insert(flags.fleet.engine_args.begin(),
                                 {"--kv-events-history", std::to_string(flags.kv_events_history)});
  flags.fleet.upstream_kind = "prefixgate";

  const Workload workload = soak_workload(flags);
  Fleet fleet(flags.fleet);
  if (auto s = fleet.start_engines(); !s) {
    std::cerr << "prefixgate-bench soak: " << s.error().message << "\n";
    return 1;
  }
  auto gateways = fleet.start_gateways(flags.policy, "soak");
  if (!gateways) {
    std::cerr << "prefixgate-bench soak: " << gateways.error().message << "\n";
    return 1;
  }
  const HttpTarget gateway = gateways->front();
  std::cout << "soak: " << flags.fleet.replicas << " x sim " << flags.fleet.sim_profile
            << " (speedup " << flags.fleet.sim_speedup << ", " << flags.fleet.kv_cache_tokens
            << " KV tokens) behind prefixgate " << flags.policy << ", " << flags.duration_s
            << " s, " << flags.rate << " sessions/s (" << workload.requests()
            << " requests available), a restart every " << *restart_every << " s, a sample every "
            << *sample_every << " s" << std::endl;

  const BenchClock::time_point zero = BenchClock::now();
  std::vector<RequestRecord> records;
  double load_offset_s = 0;
  LoadOptions load{.mode = LoadMode::kPoisson,
                   .rate = flags.rate,
                   .duration_s = flags.duration_s,
                   .timeout_s = flags.timeout_s,
                   .seed = flags.seed,
                   .progress = false,
                   .label = "soak"};
  std::thread load_thread([&] {
    load_offset_s = seconds_since(zero);
    records = run_load(workload, gateway, load);
  });

  Sampler sampler{.flags = flags,
                  .fleet = fleet,
                  .gateway = gateway,
                  .zero = zero,
                  .started_s = std::vector<double>(fleet.replicas(), 0.0)};
  std::vector<SoakSample> samples;
  std::vector<SoakRestart> restarts;
  double next_sample = 0;
  double next_restart = *restart_every > 0 ? *restart_every : INFINITY;
  std::size_t next_replica = 0;
  int status = 0;
  for (double t = 0; (t = seconds_since(zero)) < flags.duration_s;) {
    if (t >= next_restart) {
      SoakRestart r{.t_s = t, .replica = next_replica, .old_pid = fleet.engine_pid(next_replica)};
      if (auto s = fleet.restart_engine(next_replica); !s) {
        std::cerr << "prefixgate-bench soak: " << s.error().message << "\n";
        status = 1;
        break;
      }
      r.listening_after_s = seconds_since(zero) - r.t_s;
      r.new_pid = fleet.engine_pid(next_replica);
      sampler.started_s[next_replica] = r.t_s;
      r.healthy_after_s = wait_all_healthy(gateway, fleet.replicas(), zero, r.t_s, 30);
      std::cout << "t=" << std::lround(r.t_s) << "s  restarted engine-" << r.replica << " (pid "
                << r.old_pid << " -> " << r.new_pid << "), listening after " << r.listening_after_s
                << " s, healthy at the gateway after " << r.healthy_after_s << " s" << std::endl;
      restarts.push_back(r);
      next_replica = (next_replica + 1) % fleet.replicas();
      next_restart += *restart_every;
      continue;
    }
    if (t >= next_sample) {
      samples.push_back(sampler.take());
      print_sample(samples.back());
      next_sample += *sample_every;
      continue;
    }
    const double wait = std::min({next_sample, next_restart, flags.duration_s}) - t;
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(wait, 0.1)));
  }
  load_thread.join();  // no new requests after the duration; those in flight finish
  samples.push_back(sampler.take());
  print_sample(samples.back());
  if (status != 0) return status;

  // Attribute each failed request: injected by a restart, or not.
  std::map<std::string, std::size_t> errors_by_kind;
  std::map<std::string, std::size_t> injected_by_kind;
  std::map<std::string, std::string> examples;
  std::vector<bool> injected(records.size(), false);
  std::size_t other_errors = 0;
  std::vector<const RequestRecord*> failed;  // not injected
  std::map<std::string, std::size_t> per_replica;
  for (std::size_t i = 0; i < records.size(); ++i) {
    RequestRecord& rec = records[i];
    rec.sent_s += load_offset_s;
    rec.done_s += load_offset_s;
    if (rec.first_token_s >= 0) rec.first_token_s += load_offset_s;
    ++per_replica[rec.replica];
    for (SoakRestart& r : restarts) {
      if (was_in_flight_at(rec, r, fleet.engine_port(r.replica))) {
        ++r.in_flight;
        if (!rec.error.empty()) ++r.in_flight_failed;
      }
    }
    if (rec.error.empty()) continue;
    for (const SoakRestart& r : restarts) {
      if (is_injected_error(rec, r, fleet.engine_port(r.replica))) injected[i] = true;
    }
    if (!injected[i]) failed.push_back(&rec);
    if (injected[i]) {
      ++injected_by_kind[rec.error];
    } else {
      ++other_errors;
      ++errors_by_kind[rec.error];
      examples.try_emplace(rec.error, rec.error_detail.empty() ? rec.replica : rec.error_detail);
    }
  }
  for (SoakSample& s : samples) {
    for (std::size_t i = 0; i < records.size(); ++i) {
      if (records[i].done_s > s.t_s) continue;
      ++s.requests_done;
      if (!records[i].error.empty()) ++(injected[i] ? s.injected_errors : s.errors);
    }
  }

  const SoakVerdictOptions verdict_options =
      verdict_options_of(flags, flags.duration_s, samples, *lifetime_warmup);
  const SoakVerdict verdict = judge_soak(samples, other_errors, verdict_options);
  SoakReport report{.title = "prefixgate soak: " + std::to_string(flags.fleet.replicas) +
                             " sim engines, " + report_text::fmt("%.0f", flags.duration_s) +
                             " s, a restart every " + report_text::fmt("%.0f", *restart_every) +
                             " s",
                    .flags = flags,
                    .verdict_options = verdict_options,
                    .samples = samples,
                    .restarts = restarts,
                    .requests = records.size(),
                    .requests_per_replica = per_replica,
                    .errors_by_kind = errors_by_kind,
                    .injected_by_kind = injected_by_kind,
                    .error_examples = examples,
                    .verdict = verdict};
  for (const RequestRecord* rec : failed) {
    report.failed.push_back({.sent_s = rec->sent_s,
                             .done_s = rec->done_s,
                             .replica = rec->replica,
                             .error = rec->error,
                             .detail = rec->error_detail.substr(0, 200)});
  }
  return write_outputs(report, flags);
}

}  // namespace prefixgate::bench
