// prefixgate-bench: workloads, trace replay and routing policies side by side.
//
//   prefixgate-bench compare --replicas 8 --device sim --sim-profile h100:llama3-8b
//     --policies round_robin,least_load,cache_aware --workload shared-prefix --groups 64
//     --prompts-per-group 16 --system-len 2048 --question-len 128 --output-len 256 --json out.json
//   prefixgate-bench compare --workload trace --trace FILE --time-scale 0.1 ...
//   prefixgate-bench compare --target a=http://10.0.0.1:8080 --target b=http://10.0.0.2:8080 ...
//   prefixgate-bench run --url http://127.0.0.1:8080 --workload multi-turn
//   prefixgate-bench simulate --replicas 8,64,1000 --gateways 1,3 --load 0.8,1.0
//     --policies round_robin,sglang_cache_aware,dynamo_kv,cache_aware --workload trace --trace FILE
//   prefixgate-bench overhead
//   prefixgate-bench soak --duration 30m --replicas 4 --restart-every 3m
//   prefixgate-bench cost-chart --input agent_turn.json --svg agent-turn.svg
//
// Exit status: 0 done, 1 a run could not be carried out (a process did not start, a file could
// not be written), 2 bad usage, with a message on stderr; soak: 3 its verdict failed.
#include <CLI/CLI.hpp>
#include <iostream>

#include "commands.h"
#include "cost_chart.h"

namespace bench = prefixgate::bench;

namespace {

void add_workload_flags(CLI::App& app, bench::WorkloadFlags& w, bench::CeilingFlags& c,
                        bench::LoadFlags& l) {
  app.add_option("--workload", w.workload, "shared-prefix | multi-turn | agent | volatile | trace")
      ->capture_default_str();
  app.add_option("--seed", w.seed, "seeds every generator and the Poisson arrivals")
      ->capture_default_str();
  app.add_option("--model", w.model, "the `model` field of every request")->capture_default_str();
  // Lengths shared by several workloads (each workload has its own default).
  app.add_option("--system-len", w.system_len, "system prompt tokens (default per workload)");
  app.add_option("--question-len", w.question_len,
                 "question / user message / agent task tokens (default per workload)");
  app.add_option("--output-len", w.output_len,
                 "max_tokens of every request (default per workload)");
  app.add_option("--tools", w.tools, "agent, volatile: tool schemas per request");
  // shared-prefix
  app.add_option("--groups", w.shared_prefix.groups, "shared-prefix: system prompts")
      ->capture_default_str();
  app.add_option("--prompts-per-group", w.shared_prefix.prompts_per_group,
                 "shared-prefix: questions per system prompt")
      ->capture_default_str();
  // multi-turn
  app.add_option("--conversations", w.multi_turn.conversations, "multi-turn: conversations")
      ->capture_default_str();
  app.add_option("--turns", w.multi_turn.turns, "multi-turn: turns per conversation")
      ->capture_default_str();
  app.add_option("--think-time", w.multi_turn.think_time_s,
                 "multi-turn: mean seconds between a response and the next turn")
      ->capture_default_str();
  // agent
  app.add_option("--agents", w.agent.agents, "agent: agent runs")->capture_default_str();
  app.add_option("--steps", w.agent.steps, "agent: tool calls per run")->capture_default_str();
  app.add_option("--tool-schema-len", w.agent.tool_schema_len, "agent: description tokens per tool")
      ->capture_default_str();
  app.add_option("--tool-result-len", w.agent.tool_result_len, "agent: tokens per tool result")
      ->capture_default_str();
  app.add_option("--api", w.api,
                 "agent: the API its requests use: chat, messages (Anthropic Messages, with "
                 "cache_control breakpoints) or responses (OpenAI Responses)")
      ->capture_default_str()
      ->check(CLI::IsMember({"chat", "messages", "responses"}));
  // volatile
  app.add_option("--requests", w.volatile_app.requests, "volatile: requests")
      ->capture_default_str();
  // trace
  app.add_option("--trace", w.trace_file, "trace: a Mooncake-format JSONL file");
  app.add_option("--time-scale", w.trace.time_scale,
                 "trace: multiplies timestamps (0.1 replays ten times faster)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--length-scale", w.trace.length_scale,
                 "trace: multiplies block and prompt lengths (0.0625: 512-token blocks -> 32)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--trace-block-tokens", w.trace.trace_block_tokens,
                 "trace: tokens per hash id in the trace")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-output-len", w.trace.max_output_len,
                 "trace: cap on the trace's output lengths (0: none)")
      ->capture_default_str();
  // ceiling
  app.add_option("--tokenizer", c.tokenizer,
                 "ceiling: byte (the builtin models), a tokenizer.json or a model folder, as the "
                 "engines tokenize")
      ->capture_default_str();
  app.add_option("--template", c.chat_template,
                 "ceiling: llama-3 | chatml | plain (default: the model folder's own, else "
                 "llama-3)")
      ->capture_default_str();
  app.add_option("--block-size", c.block_size, "ceiling: the engines' KV page size in tokens")
      ->capture_default_str();
  app.add_option("--model-id", c.model_id, "ceiling: the block-hash model id (default --model)");
  app.add_option("--ceiling-rules", c.rules,
                 "ceiling: what the gateway rewrites: default | as-sent | canonical (match "
                 "--gateway-config)")
      ->check(CLI::IsMember({"default", "as-sent", "canonical"}))
      ->capture_default_str();
  // load
  app.add_option("--rate", l.rate,
                 "open loop: Poisson arrivals of sessions per second, inf (all at once), or "
                 "trace (the trace's timestamps; the default for --workload trace)");
  app.add_option("--concurrency", l.concurrency, "closed loop: sessions in flight");
  app.add_option("--duration", l.duration_s, "seconds after which no request starts (0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--num-requests", l.num_requests, "requests to send at most (0: the workload)");
  app.add_option("--warmup", l.warmup, "first requests left out of the measures")
      ->capture_default_str();
  app.add_option("--timeout", l.timeout_s, "seconds per request")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--no-progress", l.no_progress, "no progress line on stderr");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"prefixgate-bench: workloads, trace replay and routing policies side by side"};
  app.require_subcommand(1);

  bench::CompareFlags compare;
  CLI::App* cmp = app.add_subcommand(
      "compare",
      "start replicas and a gateway per policy (or use --target), run one workload "
      "under each, print them side by side");
  add_workload_flags(*cmp, compare.workload, compare.ceiling, compare.load);
  cmp->add_option("--replicas", compare.fleet.replicas, "engine replicas to start")
      ->capture_default_str();
  cmp->add_option("--device", compare.fleet.device, "sim | cpu")->capture_default_str();
  cmp->add_option("--sim-profile", compare.fleet.sim_profile,
                  "sim: GPU:MODEL, or A,B,... for a mixed fleet (replica i runs profile i mod n)")
      ->capture_default_str();
  cmp->add_option("--sim-speedup", compare.fleet.sim_speedup,
                  "sim: N runs the modelled GPU N times faster (engine/SIM.md)")
      ->capture_default_str();
  cmp->add_option("--engine-model", compare.fleet.model, "the engines' --model")
      ->capture_default_str();
  cmp->add_option("--kv-cache-tokens", compare.fleet.kv_cache_tokens,
                  "the engines' --kv-cache-tokens (0: the engine's default)");
  cmp->add_option("--max-model-len", compare.fleet.max_model_len,
                  "the engines' --max-model-len (0: the engine's default)");
  cmp->add_option("--engine-arg", compare.fleet.engine_args, "an extra engine flag (repeatable)")
      ->allow_extra_args(false);
  cmp->add_option("--gateway-config", compare.fleet.gateway_config, "a prefixgate YAML config");
  cmp->add_option("--gateways", compare.fleet.gateways,
                  "gateway instances per policy over the same replicas, each request sent to one "
                  "of them at random (each has its own index and predictions)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmp->add_option("--policies", compare.policies, "routing policies, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  cmp->add_option("--rule-sets", compare.rule_sets,
                  "canonicalization rule sets to run each policy under, comma-separated: "
                  "as-sent (every rule off), default (the gateway's defaults), canonical (every "
                  "rule rewrites); each row's ceiling uses the same rules")
      ->delimiter(',');
  cmp->add_option("--peers", compare.peers,
                  "with --gateways > 1: off, on (the gateways share their sends over UDP), or "
                  "off,on (each row both ways)")
      ->delimiter(',')
      ->capture_default_str();
  cmp->add_option("--upstream-kinds", compare.upstream_kinds,
                  "how each gateway follows the engines, comma-separated, one row per kind: "
                  "prefixgate (/v1/kv_events), vllm (the engines publish vLLM's ZeroMQ KV events "
                  "and metric names), openai (predictions only)")
      ->delimiter(',')
      ->capture_default_str();
  cmp->add_option("--target", compare.targets,
                  "NAME=URL of an existing endpoint (repeatable): run against these instead of "
                  "starting replicas")
      ->allow_extra_args(false);
  cmp->add_option("--json", compare.json_out, "write the results as JSON");
  cmp->add_option("--svg", compare.svg_out, "write the chart (default: --json's path, .svg)");
  cmp->add_option("--log-dir", compare.fleet.log_dir,
                  "engine and gateway logs (default build/results/compare-logs)");
  cmp->add_option("--engine-bin", compare.fleet.engine_bin, "prefixgate-engine to run");
  cmp->add_option("--gateway-bin", compare.fleet.gateway_bin, "prefixgate to run");

  bench::CompareFlags run;
  std::string url;
  CLI::App* runc = app.add_subcommand("run", "run one workload against one endpoint");
  add_workload_flags(*runc, run.workload, run.ceiling, run.load);
  runc->add_option("--url", url, "http://HOST:PORT of a gateway or an engine")->required();
  runc->add_option("--json", run.json_out, "write the results as JSON");
  runc->add_option("--svg", run.svg_out, "write the chart");

  bench::SimulateFlags sim;
  CLI::App* simc = app.add_subcommand(
      "simulate",
      "discrete-event simulation in virtual time of sim replicas behind gateways, running the "
      "gateway's routing and index and the engine's scheduler and cache: policies side by side "
      "at fleet scale");
  add_workload_flags(*simc, sim.workload, sim.ceiling, sim.load);
  simc->add_option("--replicas", sim.replicas, "replica counts, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  simc->add_option("--gateways", sim.gateways,
                   "gateway counts, comma-separated (requests sprayed at random over them)")
      ->delimiter(',')
      ->capture_default_str();
  simc->add_option("--load", sim.loads,
                   "offered load as fractions of the fleet's modelled capacity, comma-separated "
                   "(--rate overrides)")
      ->delimiter(',')
      ->capture_default_str();
  simc->add_option("--policies", sim.policies, "routing policies, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  simc->add_option("--sim-profile", sim.sim_profile,
                   "GPU:MODEL (engine/SIM.md); a comma-separated list makes a mixed fleet, "
                   "replica r of the (r mod n)-th")
      ->capture_default_str();
  simc->add_option("--kv-cache-tokens", sim.kv_cache_tokens,
                   "KV tokens per replica (0: the profile's capacity)");
  simc->add_option("--max-model-len", sim.max_model_len,
                   "prompt + output tokens per request (0: the profile's context; more: the same "
                   "model shape with a longer context)");
  simc->add_option("--max-num-batched-tokens", sim.max_num_batched_tokens,
                   "the engines' token budget per step")
      ->capture_default_str();
  simc->add_option("--max-num-seqs", sim.max_num_seqs, "the engines' running sequences at most")
      ->capture_default_str();
  simc->add_option("--event-delay-ms", sim.event_delay_ms,
                   "a replica's cache events and load reports reach the gateways this late")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  simc->add_option("--peer-delay-ms", sim.peer_delays_ms,
                   "whether the gateways share their sends (prefixgate's peers), comma-separated "
                   "grid values: off, or the milliseconds a gateway's datagram takes to reach the "
                   "others")
      ->delimiter(',')
      ->capture_default_str();
  simc->add_option("--load-report-ms", sim.load_report_ms, "the engines' load-report interval")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  simc->add_option("--prediction-ttl-ms", sim.prediction_ttl_ms,
                   "how long a gateway's prediction lives after its request's first token without "
                   "an event (its prediction_ttl)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  simc->add_option("--trace-copies", sim.trace_copies,
                   "trace: replay it this many times as separate tenants, interleaved")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  simc->add_option("--gpu-hour-usd", sim.gpu_hour_usd,
                   "price of a GPU-hour: adds usd_per_mtok to the JSON")
      ->check(CLI::NonNegativeNumber);
  simc->add_option("--json", sim.json_out, "write the results as JSON");
  simc->add_option("--svg", sim.svg_out, "write the chart (default: --json's path, .svg)");

  bench::OverheadFlags overhead;
  CLI::App* ovh =
      app.add_subcommand("overhead",
                         "gateway overhead with wrk against a fast upstream: direct vs nginx vs "
                         "prefixgate");
  ovh->add_option("--duration", overhead.duration, "wrk -d of each measured run")
      ->capture_default_str();
  ovh->add_option("--warmup", overhead.warmup, "wrk -d of each warm-up")->capture_default_str();
  ovh->add_option("--connections", overhead.connections, "wrk -c")->capture_default_str();
  ovh->add_option("--wrk-threads", overhead.wrk_threads, "wrk -t")->capture_default_str();
  ovh->add_option("--proxy-threads", overhead.proxy_threads,
                  "prefixgate --threads and nginx worker_processes")
      ->capture_default_str();
  ovh->add_option("--engine-threads", overhead.engine_threads, "the engine's --threads")
      ->capture_default_str();
  ovh->add_flag("!--no-pin", overhead.pin, "leave CPU placement to the kernel");
  ovh->add_flag(
      "--profile", overhead.profile,
      "perf record (DWARF call graphs) of prefixgate during its run (OUT_DIR/perf-gateway.data)");
  ovh->add_option("--gateway-arg", overhead.gateway_args, "an extra prefixgate flag (repeatable)")
      ->allow_extra_args(false);
  ovh->add_option("--engine-arg", overhead.engine_args,
                  "an extra prefixgate-engine flag (repeatable)")
      ->allow_extra_args(false);
  ovh->add_option(
         "--variant", overhead.variants,
         "NAME=FLAGS: another prefixgate with these extra flags, measured in the same run "
         "as prefixgate-NAME (repeatable); FLAGS may start with bin=PATH, another prefixgate build")
      ->allow_extra_args(false);
  ovh->add_option("--out-dir", overhead.out_dir, "where results go")->capture_default_str();
  ovh->add_option("--stream", overhead.stream_tokens,
                  "TOKENS: ask for streamed answers of TOKENS tokens, one event a token from an "
                  "engine in modelled time, nginx not buffering them (overhead_stream.lua)");
  ovh->add_option("--lua", overhead.lua,
                  "the wrk script (default tools/prefixgate-bench/overhead_request.lua, or "
                  "overhead_stream.lua with --stream)");
  ovh->add_option("--rounds", overhead.rounds,
                  "then N rounds of loaded runs, every target in each round, for requests/s and "
                  "CPU against nginx's within each round, where a busy moment on the host moves "
                  "every target alike (0: none)")
      ->capture_default_str();
  ovh->add_option("--round-duration", overhead.round_duration,
                  "wrk -d of each target's loaded run in a round")
      ->capture_default_str();
  ovh->add_option("--latency-rounds", overhead.latency_rounds,
                  "then N rounds of one-connection runs, every target in each round, for latency "
                  "percentiles a busy moment on the host cannot pin on one target (0: none)")
      ->capture_default_str();
  ovh->add_option("--latency-round-duration", overhead.latency_round_duration,
                  "wrk -d of each target's run in a round")
      ->capture_default_str();
  ovh->add_option("--engine-bin", overhead.engine_bin, "prefixgate-engine to run");
  ovh->add_option("--gateway-bin", overhead.gateway_bin, "prefixgate to run");

  bench::SoakFlags soak;
  CLI::App* soakc = app.add_subcommand(
      "soak",
      "a gateway in front of N sim engines at steady load for a long run, one engine killed and "
      "restarted every few minutes; memory, descriptors and the gateway's index and stats "
      "sampled; exits 3 when they grow or requests fail (soak.h)");
  soakc->add_option("--duration", soak.duration, "how long (30m, 20s, 1h)")->capture_default_str();
  soakc
      ->add_option("--restart-every", soak.restart_every,
                   "SIGKILL one engine (in turn) and start it again this often (0: never)")
      ->capture_default_str();
  soakc->add_option("--sample-every", soak.sample_every, "sampling interval")
      ->capture_default_str();
  soakc->add_option("--warmup", soak.warmup_fraction, "fraction of the run left out of the verdict")
      ->capture_default_str();
  soakc
      ->add_option("--lifetime-warmup", soak.lifetime_warmup,
                   "a (re)started process's first seconds left out of the verdict")
      ->capture_default_str();
  soakc
      ->add_option("--gateway-warmup", soak.gateway_warmup,
                   "the gateway's RSS and descriptors are judged after this (when later than "
                   "--warmup); auto: the span of its /stats ring, which fills once")
      ->capture_default_str();
  soakc->add_option("--from", soak.from,
                    "judge an earlier run's JSON again under these criteria (writes --json)");
  soakc
      ->add_option("--rss-tolerance", soak.rss_tolerance,
                   "RSS flat: max <= min * (1 + this) per process lifetime")
      ->capture_default_str();
  soakc
      ->add_option(
          "--fd-tolerance", soak.fd_tolerance,
          "descriptors other than established connections flat: the last quarter's median <= the "
          "first quarter's * (1 + this) + --fd-slack")
      ->capture_default_str();
  soakc->add_option("--fd-slack", soak.fd_slack, "descriptors allowed on top of that level")
      ->capture_default_str();
  soakc
      ->add_option("--bound-tolerance", soak.bound_tolerance,
                   "index and stats sizes: the second half's max <= the first half's * (1 + this)")
      ->capture_default_str();
  soakc
      ->add_option("--min-samples", soak.min_samples,
                   "judged samples a lifetime needs to be judged")
      ->capture_default_str();
  soakc->add_option("--replicas", soak.fleet.replicas, "sim engines")->capture_default_str();
  soakc->add_option("--sim-profile", soak.fleet.sim_profile, "GPU:MODEL")->capture_default_str();
  soakc->add_option("--sim-speedup", soak.fleet.sim_speedup, "engine/SIM.md")
      ->capture_default_str();
  soakc
      ->add_option("--kv-cache-tokens", soak.fleet.kv_cache_tokens,
                   "each engine's KV cache (small, so that it fills early in the run)")
      ->capture_default_str();
  soakc
      ->add_option("--kv-events-history", soak.kv_events_history,
                   "the engines' --kv-events-history (a bounded buffer: small, so it fills early)")
      ->capture_default_str();
  soakc->add_option("--engine-arg", soak.fleet.engine_args, "an extra engine flag (repeatable)")
      ->allow_extra_args(false);
  soakc->add_option("--gateway-config", soak.fleet.gateway_config, "a prefixgate YAML config");
  soakc->add_option("--policy", soak.policy, "the gateway's routing policy")->capture_default_str();
  soakc->add_option("--rate", soak.rate, "Poisson arrivals of sessions per second")
      ->capture_default_str();
  soakc
      ->add_option("--multi-turn-share", soak.multi_turn_share,
                   "share of sessions that are multi-turn chats (the rest: shared-prefix "
                   "completions)")
      ->capture_default_str();
  soakc->add_option("--groups", soak.groups, "shared-prefix system prompts")->capture_default_str();
  soakc
      ->add_option("--system-len", soak.system_len,
                   "shared-prefix system prompt tokens (multi-turn: half)")
      ->capture_default_str();
  soakc->add_option("--question-len", soak.question_len, "question / user message tokens")
      ->capture_default_str();
  soakc->add_option("--output-len", soak.output_len, "max_tokens of every request")
      ->capture_default_str();
  soakc->add_option("--turns", soak.turns, "turns per multi-turn chat")->capture_default_str();
  soakc->add_option("--think-time", soak.think_time_s, "multi-turn: mean seconds between turns")
      ->capture_default_str();
  soakc->add_option("--seed", soak.seed, "seeds the workload and the arrivals")
      ->capture_default_str();
  soakc->add_option("--timeout", soak.timeout_s, "seconds per request")->capture_default_str();
  soakc->add_option("--json", soak.json_out, "the JSON (default build/results/soak.json)");
  soakc->add_option("--csv", soak.csv_out, "the samples as CSV (default: beside the JSON)");
  soakc->add_option("--svg", soak.svg_out, "the chart (default: beside the JSON)");
  soakc->add_option("--log-dir", soak.fleet.log_dir,
                    "engine and gateway logs (default build/results/soak-logs)");
  soakc->add_option("--engine-bin", soak.fleet.engine_bin, "prefixgate-engine to run");
  soakc->add_option("--gateway-bin", soak.fleet.gateway_bin, "prefixgate to run");

  bench::CostChartFlags chart;
  CLI::App* chartc = app.add_subcommand(
      "cost-chart",
      "a Google Benchmark JSON file drawn as CPU per request against a counter, one line per "
      "benchmark family (cost_chart.h)");
  chartc->add_option("--input", chart.input, "the benchmark's JSON")->required();
  chartc->add_option("--x", chart.x_counter, "the counter on the x axis")->capture_default_str();
  chartc->add_option("--svg", chart.svg_out, "the chart (default: --input's path, .svg)");
  chartc->add_option("--title", chart.title, "the chart's title")->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  try {
    if (cmp->parsed()) return bench::run_compare(std::move(compare));
    if (simc->parsed()) return bench::run_simulate(sim);
    if (soakc->parsed()) return bench::run_soak(std::move(soak));
    if (chartc->parsed()) return bench::run_cost_chart(chart);
    if (runc->parsed()) {
      run.targets = {"target=" + url};
      return bench::run_compare(std::move(run));
    }
    return bench::run_overhead(overhead);
  } catch (const std::exception& e) {
    std::cerr << "prefixgate-bench: " << e.what() << "\n";
    return 1;
  }
}
