// prefixgate-bench simulate: the grid of (replicas, gateways, load, policy) runs of the
// discrete-event simulator (simulate.h), side by side against the workload's ceiling.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <vector>

#include "commands.h"
#include "prefixgate/model_folder/prompt_model.h"
#include "simulate.h"
#include "simulate_report.h"

namespace prefixgate::bench {
namespace {

int usage_error(const std::string& message) {
  std::cerr << "prefixgate-bench simulate: " << message << "\n";
  return 2;
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  return static_cast<bool>(out);
}

Result<SimWorkload> build_sim_workload(const SimulateFlags& f, const std::string& model_id) {
  if (f.workload.workload == "trace") {
    if (f.workload.trace_file.empty()) {
      return make_error(ErrorCode::kInvalidValue, "--workload trace needs --trace FILE");
    }
    std::ifstream in(f.workload.trace_file, std::ios::binary);
    if (!in) {
      return make_error(ErrorCode::kInvalidValue, "cannot read '" + f.workload.trace_file + "'");
    }
    std::ostringstream text;
    text << in.rdbuf();
    auto records = parse_trace(text.str());
    if (!records) {
      return make_error(ErrorCode::kInvalidValue,
                        f.workload.trace_file + ": " + records.error().message);
    }
    return SimWorkload::from_trace(std::move(*records), f.workload.trace, f.trace_copies, model_id,
                                   f.ceiling.block_size, f.workload.seed);
  }
  auto workload = build_workload(f.workload);
  if (!workload) return workload.error();
  auto loaded = load_prompt_model(
      {.tokenizer = f.ceiling.tokenizer, .chat_template = f.ceiling.chat_template});
  if (!loaded) {
    return make_error(loaded.error().code, "--tokenizer/--template: " + loaded.error().message);
  }
  CeilingModel m;
  m.tokenizer = loaded->tokenizer.get();
  m.chat_format = loaded->chat_format;
  m.block_size = f.ceiling.block_size;
  m.model_id = model_id;
  // What a gateway on its default rules forwards: tool JSON and tool order rewritten.
  m.policy = canon::CanonicalizationPolicy::none();
  m.policy.tool_json = true;
  m.policy.tool_order = true;
  return SimWorkload::from_workload(std::move(*workload), m, loaded->tokenizer);
}

}  // namespace

int run_simulate(const SimulateFlags& f) {
  if (f.replicas.empty() || f.gateways.empty() || f.policies.empty()) {
    return usage_error("--replicas, --gateways and --policies need at least one value each");
  }
  for (std::size_t n : f.replicas) {
    if (n == 0) return usage_error("--replicas: every count must be at least 1");
  }
  for (std::size_t n : f.gateways) {
    if (n == 0) return usage_error("--gateways: every count must be at least 1");
  }
  for (double l : f.loads) {
    if (!(l > 0) || std::isinf(l)) return usage_error("--load: every value must be positive");
  }
  for (const std::string& p : f.policies) {
    if (auto made = gateway::make_policy(p); !made) {
      return usage_error("--policies: " + made.error().message);
    }
  }
  if (f.load.concurrency > 0 || f.load.duration_s > 0) {
    return usage_error(
        "--concurrency and --duration are compare's; simulate takes --load or --rate");
  }
  if (f.ceiling.block_size == 0) return usage_error("--block-size must be positive");
  std::vector<double> peer_delays_s;
  for (const std::string& v : f.peer_delays_ms) {
    if (v == "off") {
      peer_delays_s.push_back(-1);
      continue;
    }
    char* end = nullptr;
    const double ms = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !(ms >= 0) || std::isinf(ms)) {
      return usage_error("--peer-delay-ms: off, or a number of milliseconds >= 0, not '" + v + "'");
    }
    peer_delays_s.push_back(ms / 1000.0);
  }
  if (peer_delays_s.empty()) return usage_error("--peer-delay-ms needs at least one value");

  // "GPU:MODEL" or a list "h100:llama3-8b,l4:llama3-8b": a mixed fleet, replica r of the
  // (r mod n)-th profile. The first one names the run and sizes the context.
  std::vector<engine::SimProfile> profiles;
  for (std::size_t start = 0; start <= f.sim_profile.size();) {
    const std::size_t comma = std::min(f.sim_profile.find(',', start), f.sim_profile.size());
    auto p = engine::parse_sim_profile(f.sim_profile.substr(start, comma - start));
    if (!p) return usage_error("--sim-profile: " + p.error().message);
    profiles.push_back(std::move(*p));
    start = comma + 1;
  }
  auto profile = std::optional<engine::SimProfile>(profiles.front());
  // A longer context than the profile's: the same shape serving longer prompts (Llama 3.1 8B is
  // Llama 3 8B's shape with a 128k context).
  for (engine::SimProfile& p : profiles) {
    if (f.max_model_len > p.model.max_position) p.model.max_position = f.max_model_len;
  }
  if (f.max_model_len > profile->model.max_position) profile->model.max_position = f.max_model_len;
  const std::size_t max_model_len =
      f.max_model_len > 0 ? f.max_model_len : profile->model.max_position;
  const std::size_t block = f.ceiling.block_size;
  const std::size_t capacity_pages = engine::kv_capacity_pages(*profile, block);
  std::size_t pages = capacity_pages;
  if (f.kv_cache_tokens > 0) pages = std::min(pages, (f.kv_cache_tokens + block - 1) / block);
  if (pages == 0) return usage_error("--kv-cache-tokens: no room for one page");

  const std::string model_id = f.ceiling.model_id.empty() ? f.workload.model : f.ceiling.model_id;
  auto workload = build_sim_workload(f, model_id);
  if (!workload) return usage_error(workload.error().message);

  SimConfig base;
  base.replica.profile = *profile;
  base.replica.num_pages = pages;
  base.replica.page_tokens = block;
  base.replica.model_id = model_id;
  base.replica.scheduler.max_num_batched_tokens = f.max_num_batched_tokens;
  base.replica.scheduler.max_num_seqs = f.max_num_seqs;
  base.replica.scheduler.max_model_len = max_model_len;
  base.replica.scheduler.eos_token = profile->model.eos_token;
  if (profiles.size() > 1) {
    for (const engine::SimProfile& p : profiles) {
      SimReplicaConfig kind = base.replica;
      kind.profile = p;
      kind.num_pages = engine::kv_capacity_pages(p, block);
      if (f.kv_cache_tokens > 0) {
        kind.num_pages = std::min(kind.num_pages, (f.kv_cache_tokens + block - 1) / block);
      }
      if (kind.num_pages == 0) return usage_error("--kv-cache-tokens: no room for one page");
      base.replica_kinds.push_back(std::move(kind));
    }
  }
  base.event_delay_s = f.event_delay_ms / 1000.0;
  base.load_report_interval_s = f.load_report_ms / 1000.0;
  base.index_config.prediction_ttl =
      std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(f.prediction_ttl_ms)));
  base.max_requests = f.load.num_requests;
  base.warmup = f.load.warmup;
  base.seed = f.workload.seed;
  base.progress = !f.load.no_progress;

  std::cerr << "workload " << workload->name() << ": " << workload->requests() << " requests in "
            << workload->sessions()
            << " sessions; computing the ceiling and the modelled capacity...\n";
  const CapacityModel capacity{*profile, base.replica.scheduler, pages * block};
  auto wp = profile_workload(*workload, capacity, f.load.num_requests);
  if (!wp) return usage_error("workload: " + wp.error().message);
  if (profiles.size() > 1) {
    // A mixed fleet's capacity per replica: the mean of its kinds' (replicas cycle over them).
    double sum = 0;
    for (const SimReplicaConfig& kind : base.replica_kinds) {
      const CapacityModel m{kind.profile, kind.scheduler, kind.num_pages * block};
      auto kp = profile_workload(*workload, m, f.load.num_requests);
      if (!kp) return usage_error("workload: " + kp.error().message);
      sum += kp->capacity_rps_per_replica;
    }
    wp->capacity_rps_per_replica = sum / static_cast<double>(base.replica_kinds.size());
  }
  std::cerr << "ceiling hit rate " << wp->ceiling_hit_rate * 100 << "%, " << wp->mean_prompt_tokens
            << " prompt / " << wp->mean_output_tokens << " output tokens per request, capacity "
            << wp->capacity_rps_per_replica << " requests/s per replica\n";

  // The offered rate: --rate (absolute, or the trace's own timestamps), else --load x capacity.
  std::vector<std::pair<double, double>> rates;  // (load, requests/s)
  if (!f.load.rate.empty()) {
    double rate = 0;
    if (f.load.rate == "trace") {
      if (!workload->timed()) return usage_error("--rate trace: only a trace has timestamps");
    } else {
      char* end = nullptr;
      rate = std::strtod(f.load.rate.c_str(), &end);
      if (end == f.load.rate.c_str() || *end != '\0' || !(rate > 0) || std::isinf(rate)) {
        return usage_error("--rate: a positive number of requests/s, or trace");
      }
    }
    rates.emplace_back(0, rate);
  } else {
    if (!(wp->capacity_rps_per_replica > 0)) {
      return usage_error(
          "the workload's modelled capacity is 0 (every prompt past --max-model-len?)");
    }
    for (double l : f.loads) rates.emplace_back(l, l);
  }

  SimReport report;
  std::string profile_names;
  for (const engine::SimProfile& p : profiles) {
    profile_names += (profile_names.empty() ? "" : " + ") + p.name;
  }
  report.title = workload->name() + ", sim " + profile_names + ", " +
                 std::to_string(pages * block) + " KV tokens per replica";
  report.ceiling_hit_rate = wp->ceiling_hit_rate;
  report.capacity_rps_per_replica = wp->capacity_rps_per_replica;
  report.gpu_hour_usd = f.gpu_hour_usd;
  report.setup =
      json::Object{{"workload", workload->name()},
                   {"requests", static_cast<double>(wp->requests)},
                   {"mean_prompt_tokens", wp->mean_prompt_tokens},
                   {"mean_output_tokens", wp->mean_output_tokens},
                   {"trace_copies", static_cast<double>(f.trace_copies)},
                   {"length_scale", f.workload.trace.length_scale},
                   {"sim_profile", profile_names},
                   {"kv_tokens_per_replica", static_cast<double>(pages * block)},
                   {"max_model_len", static_cast<double>(max_model_len)},
                   {"max_num_batched_tokens", static_cast<double>(f.max_num_batched_tokens)},
                   {"max_num_seqs", static_cast<double>(f.max_num_seqs)},
                   {"event_delay_s", base.event_delay_s},
                   {"load_report_interval_s", base.load_report_interval_s},
                   {"prediction_ttl_s", f.prediction_ttl_ms / 1000.0},
                   {"gpu_seconds_per_request", wp->gpu_seconds_per_request},
                   {"seed", static_cast<double>(f.workload.seed)}};

  for (std::size_t replicas : f.replicas) {
    for (std::size_t gateways : f.gateways) {
      for (double peer_delay_s : peer_delays_s) {
        // One gateway has no peers: its row once, not once per delay.
        if (gateways == 1 && peer_delay_s != peer_delays_s.front()) continue;
        for (const auto& [load, value] : rates) {
          for (const std::string& policy : f.policies) {
            SimConfig c = base;
            c.replicas = replicas;
            c.gateways = gateways;
            c.peer_delay_s = gateways > 1 ? peer_delay_s : -1;
            c.policy = policy;
            c.request_rate =
                load > 0 ? load * wp->capacity_rps_per_replica * static_cast<double>(replicas)
                         : value;
            auto r = run_simulation(*workload, c);
            if (base.progress) std::cerr << "\n";
            if (!r) {
              std::cerr << "prefixgate-bench simulate: " << r.error().message << "\n";
              return 1;
            }
            r->load = load;
            r->ceiling_hit_rate = wp->ceiling_hit_rate;
            std::cerr << policy << " x" << replicas << " (" << gateways << " gw"
                      << (c.peer_delay_s >= 0 ? ", peered" : "") << ", load " << load
                      << "): hit rate " << r->hit_rate * 100 << "%, TTFT p99 " << r->ttft_s.p99
                      << " s, " << r->events << " events in " << r->wall_s << " s ("
                      << (r->wall_s > 0 ? static_cast<double>(r->events) / r->wall_s : 0)
                      << "/s)\n";
            report.results.push_back(std::move(*r));
          }
        }
      }
    }
  }

  std::cout << "\n" << format_sim_table(report) << std::flush;
  int status = 0;
  if (!f.json_out.empty() && !write_file(f.json_out, sim_to_json(report))) {
    std::cerr << "prefixgate-bench simulate: cannot write " << f.json_out << "\n";
    status = 1;
  }
  std::string svg = f.svg_out;
  if (svg.empty() && !f.json_out.empty()) {
    svg = f.json_out;
    if (svg.size() > 5 && svg.ends_with(".json")) svg.resize(svg.size() - 5);
    svg += ".svg";
  }
  if (!svg.empty() && !write_file(svg, sim_to_svg(report))) {
    std::cerr << "prefixgate-bench simulate: cannot write " << svg << "\n";
    status = 1;
  }
  return status;
}

}  // namespace prefixgate::bench
