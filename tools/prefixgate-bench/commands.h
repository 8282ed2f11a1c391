// prefixgate-bench's subcommands, each given its parsed flags. They return the exit status
// (0 done, 1 a run could not be carried out, 2 bad usage) and print errors on stderr.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fleet.h"
#include "load_generator.h"
#include "workloads/trace.h"
#include "workloads/workloads.h"

namespace prefixgate::bench {

struct WorkloadFlags {
  std::string workload = "shared-prefix";  // shared-prefix multi-turn agent volatile trace
  std::uint64_t seed = 1;
  std::string model = "builtin:tiny";  // the `model` field of every request
  SharedPrefixOptions shared_prefix;
  MultiTurnOptions multi_turn;
  AgentOptions agent;
  VolatileOptions volatile_app;
  std::string trace_file;
  TraceOptions trace;
  // Given on the command line, these override the chosen workload's own default (0: not given).
  std::size_t system_len = 0;
  std::size_t question_len = 0;
  std::size_t output_len = 0;
  std::size_t tools = 0;
  std::string api = "chat";  // agent: chat, messages (Anthropic) or responses (OpenAI Responses)
};

struct CeilingFlags {
  std::string tokenizer = "byte";  // byte, a tokenizer.json or a model folder
  std::string chat_template;       // a built-in name; "" = the folder's own, else llama-3
  std::size_t block_size = 16;
  std::string model_id;  // "": the workload's model
  // Which ceiling the "of ceiling" column reads against, to match what the gateway rewrites:
  // default (tool-json, tool-order: the gateway's defaults), as-sent (no rule), canonical (every
  // rule on by default, timestamps rounded to the hour).
  std::string rules = "default";
};

struct LoadFlags {
  std::string rate;  // Poisson sessions/s, inf, or trace; "": trace for a trace, else inf
  std::size_t concurrency = 0;  // > 0: closed loop
  double duration_s = 0;
  std::size_t num_requests = 0;
  std::size_t warmup = 0;
  double timeout_s = 600;
  bool no_progress = false;
};

struct CompareFlags {
  WorkloadFlags workload;
  CeilingFlags ceiling;
  LoadFlags load;
  FleetOptions fleet;
  std::vector<std::string> policies{"round_robin", "least_load", "cache_aware"};
  // Canonicalization rule sets, each a gateway configuration and the ceiling under the same
  // rules: as-sent, default, canonical (see CeilingFlags::rules). Empty: one run per policy with
  // --gateway-config and --ceiling-rules. Every policy runs once per rule set.
  std::vector<std::string> rule_sets;
  // How the gateways follow the engines (FleetOptions::upstream_kind): every (policy, rule set)
  // row runs once per kind, each on fresh replicas.
  std::vector<std::string> upstream_kinds{"prefixgate"};
  // With --gateways > 1: "off" (each gateway sees its own sends), "on" (they share them over
  // UDP, --peer-listen / --peer), or both, each row once per value.
  std::vector<std::string> peers{"off"};
  std::vector<std::string> targets;  // NAME=URL: existing endpoints instead of a fleet
  std::string json_out;
  std::string svg_out;
};

int run_compare(CompareFlags flags);

// The workload `--workload` and its flags describe (compare.cpp; simulate uses it too).
Result<Workload> build_workload(const WorkloadFlags& flags);

struct SimulateFlags {
  WorkloadFlags workload;
  CeilingFlags ceiling;
  LoadFlags load;  // --rate (absolute; overrides --load), --num-requests, --warmup
  std::vector<std::size_t> replicas{8};
  std::vector<std::size_t> gateways{1};
  std::vector<double> loads{0.8};  // fractions of the fleet's modelled capacity
  std::vector<std::string> policies{"round_robin", "least_load", "cache_aware"};
  std::string sim_profile = "h100:llama3-8b";
  std::size_t kv_cache_tokens = 0;  // 0: the profile's capacity
  std::size_t max_model_len = 0;    // 0: the profile's context
  std::size_t max_num_batched_tokens = 2048;
  std::size_t max_num_seqs = 64;
  double event_delay_ms = 50;
  // Whether the gateways share their sends, each a grid value: "off", or the milliseconds a
  // gateway's datagram takes to reach its peers.
  std::vector<std::string> peer_delays_ms{"off"};
  double load_report_ms = 100;
  double prediction_ttl_ms = 2000;  // the gateway's IndexConfig::prediction_ttl
  std::size_t trace_copies = 1;
  double gpu_hour_usd = 0;
  std::string json_out;
  std::string svg_out;
};

int run_simulate(const SimulateFlags& flags);

struct OverheadFlags {
  std::string duration = "10s";
  std::string warmup = "3s";
  std::size_t connections = 16;
  std::size_t wrk_threads = 1;
  std::size_t proxy_threads = 1;
  std::size_t engine_threads = 1;
  bool pin = true;
  bool profile = false;
  std::vector<std::string> gateway_args;
  std::vector<std::string> engine_args;  // extra prefixgate-engine flags (--max-model-len 65536)
  // More gateways measured in the same run, "NAME=FLAGS" (flags split at spaces), each reported
  // as prefixgate-NAME: "bpe=--config llama3.yaml", "nocache=--tokenizer-cache off".
  std::vector<std::string> variants;
  std::string out_dir = "build/results";
  // > 0: every target is asked for a streamed answer of this many tokens (overhead_stream.lua),
  // from an engine in modelled time (one event a token), nginx forwarding as it comes
  // (proxy_buffering off): the relay's cost rather than the request's.
  std::size_t stream_tokens = 0;
  std::string lua;
  std::string engine_bin;
  std::string gateway_bin;
  // After the runs above: this many rounds of loaded runs of round_duration, each round visiting
  // every target in turn (interleaved_rounds.h), for requests/s and CPU against nginx's within a
  // round; 0: none.
  std::size_t rounds = 5;
  std::string round_duration = "2s";
  // Then this many rounds of one-connection runs of latency_round_duration, likewise; 0: none.
  std::size_t latency_rounds = 6;
  std::string latency_round_duration = "1s";
};

int run_overhead(const OverheadFlags& flags);

// prefixgate-bench soak (soak.h): a gateway in front of N sim engines for a long run, one engine
// restarted every --restart-every, memory, descriptors and the gateway's sizes sampled.
struct SoakFlags {
  FleetOptions fleet{.replicas = 4, .sim_speedup = "2", .kv_cache_tokens = 32768};
  std::string policy = "cache_aware";
  std::string duration = "30m";
  double duration_s = 0;  // parsed from duration
  std::string restart_every = "3m";
  std::string sample_every = "10s";
  std::string lifetime_warmup = "60s";
  std::string gateway_warmup = "auto";
  // The engines' --kv-events-history: small, so that this bounded buffer (~160 bytes an event)
  // fills in the first minutes instead of growing through the run at a few events a second.
  std::size_t kv_events_history = 4096;  // auto: its /stats ring's span (900 x 1 s)
  double warmup_fraction = 0.2;
  double rss_tolerance = 0.05;
  double fd_tolerance = 0.05;
  double fd_slack = 4;
  double bound_tolerance = 0.05;
  std::size_t min_samples = 3;
  // Load: Poisson arrivals of sessions; a share of them multi-turn chats, the rest shared-prefix
  // completions over `groups` system prompts. Every request streamed.
  double rate = 1.5;
  double multi_turn_share = 0.25;
  std::size_t groups = 16;
  std::size_t system_len = 2048;
  std::size_t question_len = 128;
  std::size_t output_len = 256;
  std::size_t turns = 4;
  double think_time_s = 1.0;
  std::string model = "builtin:tiny";
  std::uint64_t seed = 1;
  double timeout_s = 120;
  std::string from;      // judge this earlier run's JSON again instead of running
  std::string json_out;  // default build/results/soak.json; the CSV and SVG beside it
  std::string csv_out;
  std::string svg_out;
};

// Exit status: 0 the verdict passed, 3 it failed, 1 the run could not be carried out, 2 usage.
int run_soak(SoakFlags flags);

}  // namespace prefixgate::bench
