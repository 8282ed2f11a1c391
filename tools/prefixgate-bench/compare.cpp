// prefixgate-bench compare (and run): one workload, the same load, each routing policy (or each
// target) in turn on fresh replicas, side by side, read against the workload's ceiling.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "ceiling.h"
#include "commands.h"
#include "prefixgate/model_folder/prompt_model.h"
#include "report.h"

namespace prefixgate::bench {

namespace {

int usage_error(const std::string& message) {
  std::cerr << "prefixgate-bench: " << message << "\n";
  return 2;
}

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return make_error(ErrorCode::kInvalidValue, "cannot read '" + path + "'");
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  return static_cast<bool>(out);
}

// (policy, rule set) rows, policies outermost.
std::vector<std::pair<std::string, std::string>> rows_of(const std::vector<std::string>& policies,
                                                         const std::vector<std::string>& rules) {
  std::vector<std::pair<std::string, std::string>> rows;
  for (const std::string& p : policies) {
    for (const std::string& r : rules) rows.emplace_back(p, r);
  }
  return rows;
}

// Each row once per upstream kind, kinds innermost (side by side in the table).
std::vector<std::pair<std::pair<std::string, std::string>, std::string>> rows_with_kinds(
    const std::vector<std::pair<std::string, std::string>>& rows,
    const std::vector<std::string>& kinds) {
  std::vector<std::pair<std::pair<std::string, std::string>, std::string>> out;
  for (const auto& row : rows) {
    for (const std::string& k : kinds) out.emplace_back(row, k);
  }
  return out;
}

// The gateway configuration of a --rule-sets entry, written under `dir`. The ceilings assume
// the same rules (ceiling.h): as-sent forwards bodies untouched, default is the gateway's own
// defaults (tool-json and tool-order rewritten, timestamps observed), canonical rewrites with
// every rule but whitespace (which can change meaning) and rounds timestamps to the hour.
Result<std::string> write_rule_set_config(const std::string& dir, const std::string& rules) {
  std::string yaml = "# prefixgate-bench compare --rule-sets " + rules + "\n";
  if (rules == "as-sent") {
    yaml +=
        "canonicalization: {tool-json: off, tool-order: off, timestamp: off, "
        "response-format: off, whitespace: off}\n";
  } else if (rules == "canonical") {
    yaml +=
        "canonicalization: {tool-json: rewrite, tool-order: rewrite, timestamp: rewrite, "
        "response-format: rewrite, whitespace: off, timestamp_granularity_s: 3600}\n";
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = dir + "/gateway-rules-" + rules + ".yaml";
  if (!write_file(path, yaml)) {
    return make_error(ErrorCode::kInvalidValue, "cannot write " + path, "log-dir");
  }
  return path;
}

}  // namespace

Result<Workload> build_workload(const WorkloadFlags& f) {
  if (f.api != "chat" && f.workload != "agent") {
    return make_error(ErrorCode::kInvalidValue,
                      "--api " + f.api + ": only the agent workload speaks other APIs");
  }
  auto set = [](std::size_t given, std::size_t& field) {
    if (given > 0) field = given;
  };
  if (f.workload == "shared-prefix") {
    SharedPrefixOptions o = f.shared_prefix;
    o.model = f.model;
    set(f.system_len, o.system_len);
    set(f.question_len, o.question_len);
    set(f.output_len, o.output_len);
    return make_shared_prefix(o, f.seed);
  }
  if (f.workload == "multi-turn") {
    MultiTurnOptions o = f.multi_turn;
    o.model = f.model;
    set(f.system_len, o.system_len);
    set(f.question_len, o.user_len);
    set(f.output_len, o.output_len);
    return make_multi_turn(o, f.seed);
  }
  if (f.workload == "agent") {
    AgentOptions o = f.agent;
    o.api = f.api == "messages"    ? Api::kMessages
            : f.api == "responses" ? Api::kResponses
                                   : Api::kChatCompletions;
    o.model = f.model;
    set(f.system_len, o.system_len);
    set(f.question_len, o.task_len);
    set(f.output_len, o.output_len);
    set(f.tools, o.tools);
    return make_agent(o, f.seed);
  }
  if (f.workload == "volatile") {
    VolatileOptions o = f.volatile_app;
    o.model = f.model;
    set(f.system_len, o.system_len);
    set(f.question_len, o.question_len);
    set(f.output_len, o.output_len);
    set(f.tools, o.tools);
    return make_volatile(o, f.seed);
  }
  if (f.workload == "trace") {
    if (f.trace_file.empty()) {
      return make_error(ErrorCode::kInvalidValue, "--workload trace needs --trace FILE");
    }
    auto text = read_file(f.trace_file);
    if (!text) return text.error();
    auto records = parse_trace(*text);
    if (!records) {
      return make_error(ErrorCode::kInvalidValue, f.trace_file + ": " + records.error().message);
    }
    TraceOptions o = f.trace;
    o.model = f.model;
    return make_trace_workload(*records, o, f.seed);
  }
  return make_error(ErrorCode::kInvalidValue,
                    "--workload: unknown '" + f.workload +
                        "' (shared-prefix, multi-turn, agent, volatile, trace)");
}

namespace {

Result<LoadOptions> build_load(const LoadFlags& f, const Workload& w) {
  LoadOptions o;
  o.duration_s = f.duration_s;
  o.max_requests = f.num_requests;
  o.warmup = f.warmup;
  o.timeout_s = f.timeout_s;
  o.progress = !f.no_progress;
  if (f.concurrency > 0) {
    o.mode = LoadMode::kClosed;
    o.concurrency = f.concurrency;
    return o;
  }
  const std::string rate = f.rate.empty() ? (w.name == "trace" ? "trace" : "inf") : f.rate;
  if (w.name == "trace" && rate == "trace") {
    o.mode = LoadMode::kTrace;
    return o;
  }
  if (rate == "trace") {
    return make_error(ErrorCode::kInvalidValue,
                      "--rate trace: only the trace workload has timestamps");
  }
  o.mode = LoadMode::kPoisson;
  if (rate == "inf") {
    o.rate = INFINITY;
    return o;
  }
  char* end = nullptr;
  o.rate = std::strtod(rate.c_str(), &end);
  if (end == rate.c_str() || *end != '\0' || !(o.rate > 0)) {
    return make_error(ErrorCode::kInvalidValue,
                      "--rate: expected a positive number, inf or trace, got '" + rate + "'");
  }
  return o;
}

struct Ceilings {
  double engine = 0, as_sent = 0, canonical = 0;
};

Result<Ceilings> compute_ceilings(const Workload& w, const CeilingFlags& f,
                                  const std::string& model, const LoadOptions& load) {
  auto loaded = load_prompt_model({.tokenizer = f.tokenizer, .chat_template = f.chat_template});
  if (!loaded) {
    return make_error(loaded.error().code, "--tokenizer/--template: " + loaded.error().message);
  }
  CeilingModel m;
  m.tokenizer = loaded->tokenizer.get();
  m.chat_format = loaded->chat_format;
  m.block_size = f.block_size;
  m.model_id = f.model_id.empty() ? model : f.model_id;
  Ceilings c;
  // What reaches the engines behind a gateway on its default rules: tool-json and tool-order
  // rewritten; timestamps observed, not rewritten.
  m.policy = canon::CanonicalizationPolicy::none();
  m.policy.tool_json = true;
  m.policy.tool_order = true;
  auto engine = compute_ceiling(w, m, load.warmup, load.max_requests);
  if (!engine) return engine.error();
  c.engine = engine->hit_rate;
  m.policy = canon::CanonicalizationPolicy::none();
  auto sent = compute_ceiling(w, m, load.warmup, load.max_requests);
  if (!sent) return sent.error();
  c.as_sent = sent->hit_rate;
  m.policy = canon::CanonicalizationPolicy{};
  auto all = compute_ceiling(w, m, load.warmup, load.max_requests);
  if (!all) return all.error();
  c.canonical = all->hit_rate;
  return c;
}

json::Object setup_json(const CompareFlags& f, const Workload& w, const LoadOptions& load) {
  json::Object workload{{"name", w.name},
                        {"seed", static_cast<double>(f.workload.seed)},
                        {"sessions", static_cast<double>(w.sessions.size())},
                        {"requests", static_cast<double>(w.requests())}};
  if (w.name == "shared-prefix") {
    const SharedPrefixOptions& o = f.workload.shared_prefix;
    workload.push_back({"groups", static_cast<double>(o.groups)});
    workload.push_back({"prompts_per_group", static_cast<double>(o.prompts_per_group)});
  }
  if (w.name == "trace") {
    workload.push_back({"trace", f.workload.trace_file});
    workload.push_back({"time_scale", f.workload.trace.time_scale});
    workload.push_back({"length_scale", f.workload.trace.length_scale});
  }
  json::Object s{{"workload", std::move(workload)},
                 {"load", json::Object{{"mode", load.mode == LoadMode::kClosed  ? "closed"
                                                : load.mode == LoadMode::kTrace ? "trace"
                                                                                : "poisson"},
                                       {"rate", f.load.rate},
                                       {"concurrency", static_cast<double>(f.load.concurrency)},
                                       {"warmup", static_cast<double>(load.warmup)},
                                       {"duration_s", load.duration_s},
                                       {"num_requests", static_cast<double>(load.max_requests)}}}};
  if (f.targets.empty()) {
    s.push_back(
        {"fleet", json::Object{{"replicas", static_cast<double>(f.fleet.replicas)},
                               {"gateways", static_cast<double>(f.fleet.gateways)},
                               {"device", f.fleet.device},
                               {"sim_profile", f.fleet.sim_profile},
                               {"sim_speedup", f.fleet.sim_speedup},
                               {"model", f.fleet.model},
                               {"kv_cache_tokens", static_cast<double>(f.fleet.kv_cache_tokens)},
                               {"upstream_kinds", [&] {
                                  json::Array kinds;
                                  for (const std::string& k : f.upstream_kinds) {
                                    kinds.push_back(k);
                                  }
                                  return kinds;
                                }()}}});
  } else {
    json::Array targets;
    for (const std::string& t : f.targets) targets.push_back(t);
    s.push_back({"targets", std::move(targets)});
  }
  return s;
}

// Says when the host's CPU was saturated during a run, and whose it was: this run's own
// processes (then lower --sim-speedup and --rate together) or someone else's.
void warn_if_saturated(const RunResult& r) {
  const HostCpuUse& cpu = r.host_cpu;
  if (!cpu.saturated()) return;
  std::cerr << "prefixgate-bench: warning: " << r.policy << ": the host's " << cpu.cores
            << " cores were saturated (" << std::lround(cpu.busy_mean * 100)
            << "% busy on average, >= 90% for " << std::lround(cpu.saturated_share * 100)
            << "% of the run";
  if (cpu.own_busy >= 0)
    std::cerr << "; this run's processes " << std::lround(cpu.own_busy * 100) << "%";
  std::cerr << "): latency and throughput measure the host, not the sim's GPUs; ";
  if (cpu.own_busy >= 0 && cpu.own_busy < cpu.busy_mean / 2) {
    std::cerr << "most of it was other processes: rerun on a quiet host\n";
  } else {
    std::cerr << "lower --sim-speedup and --rate together\n";
  }
}

}  // namespace

int run_compare(CompareFlags flags) {
  auto workload = build_workload(flags.workload);
  if (!workload) return usage_error(workload.error().message);
  if (workload->requests() == 0) return usage_error("the workload has no requests");
  auto load = build_load(flags.load, *workload);
  if (!load) return usage_error(load.error().message);
  if (flags.ceiling.block_size == 0) return usage_error("--block-size must be positive");

  // Targets: NAME=URL (or a bare URL, named by its position).
  std::vector<std::pair<std::string, HttpTarget>> targets;
  for (std::size_t i = 0; i < flags.targets.size(); ++i) {
    std::string name = "target" + std::to_string(i + 1), url = flags.targets[i];
    if (const std::size_t eq = url.find('='); eq != std::string::npos) {
      name = url.substr(0, eq);
      url = url.substr(eq + 1);
    }
    auto t = parse_url(url);
    if (!t) return usage_error("--target: " + t.error().message);
    targets.emplace_back(name, *t);
  }
  if (targets.empty()) {
    if (flags.policies.empty()) return usage_error("--policies: none given");
    for (const std::string& p : flags.policies) {
      static const std::vector<std::string> kKnown{
          "round_robin",     "random",      "least_load",         "power_of_two",
          "consistent_hash", "cache_aware", "sglang_cache_aware", "dynamo_kv"};
      // A cache_aware variant (gateway/ROUTING.md): its gateway checks the options at start.
      if (p.starts_with("cache_aware:")) continue;
      if (std::find(kKnown.begin(), kKnown.end(), p) == kKnown.end()) {
        return usage_error("--policies: unknown policy '" + p +
                           "' (round_robin, random, least_load, power_of_two, consistent_hash, "
                           "cache_aware, sglang_cache_aware, dynamo_kv)");
      }
    }
    if (flags.fleet.replicas == 0) return usage_error("--replicas must be at least 1");
    if (flags.fleet.gateways == 0) return usage_error("--gateways must be at least 1");
    if (flags.fleet.device != "sim" && flags.fleet.device != "cpu") {
      return usage_error("--device: sim or cpu, got '" + flags.fleet.device + "'");
    }
    const std::string dir = executable_dir();
    if (flags.fleet.engine_bin.empty()) {
      flags.fleet.engine_bin = dir + "/../../engine/prefixgate-engine";
    }
    if (flags.fleet.gateway_bin.empty())
      flags.fleet.gateway_bin = dir + "/../../gateway/prefixgate";
    for (const std::string* bin : {&flags.fleet.engine_bin, &flags.fleet.gateway_bin}) {
      if (access(bin->c_str(), X_OK) != 0) {
        return usage_error("cannot run '" + *bin +
                           "' (build it, or pass --engine-bin/--gateway-bin)");
      }
    }
    if (flags.fleet.log_dir.empty()) flags.fleet.log_dir = "build/results/compare-logs";
    for (const std::string& r : flags.rule_sets) {
      if (r != "as-sent" && r != "default" && r != "canonical") {
        return usage_error("--rule-sets: unknown rule set '" + r +
                           "' (as-sent, default, canonical)");
      }
    }
    for (const std::string& k : flags.upstream_kinds) {
      if (k != "prefixgate" && k != "vllm" && k != "openai") {
        return usage_error("--upstream-kinds: unknown kind '" + k + "' (prefixgate, vllm, openai)");
      }
    }
    if (flags.upstream_kinds.empty()) return usage_error("--upstream-kinds: none given");
    for (const std::string& p : flags.peers) {
      if (p != "off" && p != "on") return usage_error("--peers: off or on, not '" + p + "'");
    }
    if (flags.peers.empty()) return usage_error("--peers: none given");
    if (!flags.rule_sets.empty() && !flags.fleet.gateway_config.empty()) {
      return usage_error("--rule-sets and --gateway-config: give one or the other");
    }
  }

  std::cerr << "workload " << workload->name << ": " << workload->requests() << " requests in "
            << workload->sessions.size() << " sessions; computing the ceiling...\n";
  auto ceilings = compute_ceilings(*workload, flags.ceiling, flags.workload.model, *load);
  if (!ceilings) return usage_error("ceiling: " + ceilings.error().message);

  Report report;
  report.ceiling_hit_rate = flags.ceiling.rules == "as-sent"     ? ceilings->as_sent
                            : flags.ceiling.rules == "canonical" ? ceilings->canonical
                                                                 : ceilings->engine;
  report.ceiling_rules = flags.ceiling.rules;
  report.ceiling_hit_rate_as_sent = ceilings->as_sent;
  report.ceiling_hit_rate_default = ceilings->engine;
  report.ceiling_hit_rate_canonical = ceilings->canonical;
  report.setup = setup_json(flags, *workload, *load);
  if (targets.empty()) {
    report.title =
        workload->name + ", " + std::to_string(flags.fleet.replicas) + " x " + flags.fleet.device +
        (flags.fleet.gateways > 1 ? ", " + std::to_string(flags.fleet.gateways) + " gateways"
                                  : "") +
        (flags.fleet.device == "sim"
             ? " " + flags.fleet.sim_profile + " (speedup " + flags.fleet.sim_speedup + ")"
             : " " + flags.fleet.model);
    if (flags.fleet.device == "sim") {
      const std::string& n = flags.fleet.sim_speedup;
      report.time_note =
          n == "inf"
              ? "Times are wall seconds; --sim-speedup inf: the sim does not sleep, so they are "
                "the host's, not the modelled GPUs'."
              : "Times are wall seconds. The sim runs the modelled GPUs " + n +
                    "x as fast as real time: modelled latency = wall x " + n +
                    ", modelled throughput = wall / " + n +
                    " (the gateway's and the network's share is real time).";
    }
  } else {
    report.title = workload->name + " against " + std::to_string(targets.size()) + " target(s)";
  }

  int status = 0;
  auto run_one = [&](const std::string& name, std::span<const HttpTarget> target,
                     std::size_t replicas) {
    LoadOptions o = *load;
    o.label = name;
    o.seed = flags.workload.seed;
    const auto t0 = std::chrono::steady_clock::now();
    HostCpuMonitor cpu;
    std::vector<RequestRecord> records = run_load(*workload, target, o);
    RunResult r = summarize_run(name, records, replicas);
    r.host_cpu = cpu.stop();
    std::cerr << name << ": " << r.requests << " measured requests, hit rate " << r.hit_rate * 100
              << "%, " << r.errors << " errors, "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
              << " s, host CPU " << std::lround(r.host_cpu.busy_mean * 100) << "% busy\n";
    for (const auto& [kind, body] : r.error_examples) {
      std::cerr << name << ": " << r.errors_by_kind[kind] << " x " << kind
                << ", the first: " << body << "\n";
    }
    report.results.push_back(std::move(r));
  };

  if (!targets.empty()) {
    for (const auto& [name, target] : targets) {
      run_one(name, std::span(&target, 1), 0);
      warn_if_saturated(report.results.back());
    }
  } else {
    // Each (policy, rule set) pair is a row; without --rule-sets, one row per policy.
    std::vector<std::string> rule_sets = flags.rule_sets;
    if (rule_sets.empty()) rule_sets.push_back("");
    // With more than one upstream kind (or another than prefixgate), rows are named by it too.
    const bool name_kinds =
        flags.upstream_kinds.size() > 1 || flags.upstream_kinds.front() != "prefixgate";
    // With several gateways, each row once per --peers value (peered rows named so).
    const std::vector<std::string> peer_modes =
        flags.fleet.gateways > 1 ? flags.peers : std::vector<std::string>{"off"};
    for (const std::string& peers : peer_modes)
      for (const auto& [policy_rules, kind] :
           rows_with_kinds(rows_of(flags.policies, rule_sets), flags.upstream_kinds)) {
        const auto& [policy, rules] = policy_rules;
        FleetOptions fleet_options = flags.fleet;
        fleet_options.upstream_kind = kind;
        fleet_options.peers = peers == "on";
        if (!rules.empty()) {
          auto config = write_rule_set_config(flags.fleet.log_dir, rules);
          if (!config) {
            std::cerr << "prefixgate-bench: " << config.error().message << "\n";
            return 1;
          }
          fleet_options.gateway_config = *config;
        }
        std::string name = rules.empty() ? policy : policy + " (" + rules + ")";
        if (name_kinds) name += " / " + kind;
        if (fleet_options.peers) name += " (peered)";
        // The fleet's CPU, for the report: its processes are reaped by stop(), so their time shows
        // in RUSAGE_CHILDREN from then on.
        const double cpu0 = process_tree_cpu_seconds();
        const auto t0 = std::chrono::steady_clock::now();
        Fleet fleet(fleet_options);  // fresh replicas, so every row starts from empty caches
        if (auto s = fleet.start_engines(); !s) {
          std::cerr << "prefixgate-bench: " << s.error().message << "\n";
          return 1;
        }
        auto gateways = fleet.start_gateways(policy, policy + "-" + kind);
        if (!gateways) {
          std::cerr << "prefixgate-bench: " << policy << ": " << gateways.error().message << "\n";
          return 1;
        }
        run_one(name, *gateways, flags.fleet.replicas);
        if (!rules.empty()) {
          report.results.back().ceiling_hit_rate = rules == "as-sent"     ? ceilings->as_sent
                                                   : rules == "canonical" ? ceilings->canonical
                                                                          : ceilings->engine;
        }
        fleet.stop();
        const double span =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        HostCpuUse& cpu = report.results.back().host_cpu;
        if (span > 0 && cpu.cores > 0) {
          cpu.own_busy =
              (process_tree_cpu_seconds() - cpu0) / (span * static_cast<double>(cpu.cores));
        }
        warn_if_saturated(report.results.back());
      }
  }

  std::cout << "\n" << format_table(report) << std::flush;
  if (!flags.json_out.empty()) {
    if (!write_file(flags.json_out, to_json(report))) {
      std::cerr << "prefixgate-bench: cannot write " << flags.json_out << "\n";
      status = 1;
    }
  }
  std::string svg = flags.svg_out;
  if (svg.empty() && !flags.json_out.empty()) {
    svg = flags.json_out;
    if (svg.size() > 5 && svg.ends_with(".json")) svg.resize(svg.size() - 5);
    svg += ".svg";
  }
  if (!svg.empty() && !write_file(svg, to_svg(report))) {
    std::cerr << "prefixgate-bench: cannot write " << svg << "\n";
    status = 1;
  }
  return status;
}

}  // namespace prefixgate::bench
