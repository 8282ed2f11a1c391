// prefixgate-engine: one serving replica. Loads a model, starts a device and the engine thread,
// and serves the OpenAI API until SIGINT/SIGTERM, then drains in-flight requests and exits 0.
//
//   prefixgate-engine --model builtin:tiny --device cpu --host 127.0.0.1 --port 9001
//
// Exit status: 0 after a clean shutdown, 1 when the model, device or socket cannot be set up
// (no GPU for --device cuda, say), 2 for invalid flags.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "prefixgate/engine/cpu_device.h"
#if defined(PREFIXGATE_HAVE_KERNELS)
#include "prefixgate/engine/cuda_device.h"
#endif
#include "prefixgate/engine/model.h"
#include "prefixgate/engine/sim_device.h"
#include "server/server.h"
#include "server/text_output.h"

namespace engine = prefixgate::engine;
namespace canon = prefixgate::canon;

namespace {

struct Flags {
  std::string model = "builtin:tiny";
  std::string tokenizer;      // overrides the model's tokenizer and chat template
  std::string chat_template;  // a built-in template over the model's own
  std::string device = "cpu";
  std::string sim_profile;  // default: h100 with the model's shape
  std::string sim_speedup = "1";
  std::string host = "127.0.0.1";
  int port = 9001;
  std::size_t kv_cache_tokens = 65536;
  double kv_cache_memory_mib = 0;  // when set, sizes the pool instead of kv_cache_tokens
  std::size_t max_num_batched_tokens = 2048;
  std::size_t max_num_seqs = 64;
  std::size_t max_model_len = 0;  // 0: the model's max_position
  std::size_t block_size = 16;
  std::size_t threads = 4;
  int compute_threads = 0;
  std::string kv_cache_dtype = "auto";
  double gpu_memory_utilization = 0.9;
  int cuda_device = 0;
  bool cuda_graphs = true;
  std::string served_model_name;
  std::string log_level = "info";
  double drain_timeout_s = 30;
  std::size_t max_connections = 10000;
  std::string kv_events_endpoint;
  std::string kv_events_replay_endpoint;
  std::size_t kv_events_buffer_steps = 10000;
  std::size_t kv_events_history = 65536;
};

int fail(const std::string& message) {
  spdlog::error("{}", message);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"prefixgate-engine: an OpenAI-compatible serving replica with a radix prefix cache"};
  app.add_option("--model", f.model, "builtin:tiny, builtin:small, or a Hugging Face folder")
      ->capture_default_str();
  app.add_option("--tokenizer", f.tokenizer,
                 "serve with this tokenizer and chat template instead of the model's: byte, a "
                 "tokenizer.json, or a Hugging Face model folder (its tokenizer.json and chat "
                 "template)");
  app.add_option("--chat-template", f.chat_template,
                 "a built-in chat template (llama-3, chatml, plain) instead of the model's own")
      ->check(CLI::IsMember({"llama-3", "llama3", "chatml", "qwen", "plain"}));
  app.add_option("--device", f.device,
                 "cpu (real forward pass), cuda (the same on an NVIDIA GPU) or sim (GPU cost "
                 "model)")
      ->check(CLI::IsMember({"cpu", "cuda", "sim"}))
      ->capture_default_str();
  app.add_option("--sim-profile", f.sim_profile,
                 "sim: GPU:MODEL[@bf16|@fp8], e.g. h100:llama3-8b (default h100:<model>)");
  app.add_option("--sim-speedup", f.sim_speedup,
                 "sim: N runs the modelled GPU N times faster than real time; inf never sleeps")
      ->capture_default_str();
  app.add_option("--host", f.host, "address to listen on")->capture_default_str();
  app.add_option("--port", f.port, "port to listen on; 0 picks a free one")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  auto* kv_tokens_option =
      app.add_option("--kv-cache-tokens", f.kv_cache_tokens,
                     "KV cache capacity in tokens (cuda: default from --gpu-memory-utilization)")
          ->check(CLI::PositiveNumber)
          ->capture_default_str();
  app.add_option("--kv-cache-memory-mib", f.kv_cache_memory_mib,
                 "KV cache size as a memory budget in MiB (overrides --kv-cache-tokens)")
      ->check(CLI::PositiveNumber);
  app.add_option("--kv-cache-dtype", f.kv_cache_dtype,
                 "cuda: KV cache element type: auto (bf16), bf16, or fp8 (e4m3 with a scale per "
                 "token and head: about half the memory)")
      ->check(CLI::IsMember({"auto", "bf16", "fp8", "fp8_e4m3"}))
      ->capture_default_str();
  app.add_option("--gpu-memory-utilization", f.gpu_memory_utilization,
                 "cuda: fraction of the GPU memory free after weights and activations that the "
                 "KV cache takes, unless --kv-cache-tokens or --kv-cache-memory-mib is given")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  app.add_flag("!--no-cuda-graphs", f.cuda_graphs,
               "cuda: launch every kernel of a decode step from the host instead of replaying "
               "the step from a CUDA graph");
  app.add_option("--cuda-device", f.cuda_device, "cuda: which GPU (CUDA device index)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-num-batched-tokens", f.max_num_batched_tokens,
                 "token budget of one engine step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-num-seqs", f.max_num_seqs, "most sequences running at once")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-model-len", f.max_model_len,
                 "prompt + generated tokens per request (default: the model's context)");
  app.add_option("--block-size", f.block_size, "tokens per KV page and per prefix-hash block")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--threads", f.threads, "HTTP I/O threads")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--compute-threads", f.compute_threads,
                 "cpu: BLAS threads (0: OpenBLAS's default)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--served-model-name", f.served_model_name,
                 "the model name clients send and responses carry (default: --model)");
  app.add_option("--log-level", f.log_level, "trace, debug, info, warn, error, critical, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->capture_default_str();
  app.add_option("--max-connections", f.max_connections,
                 "client connections served at once; more are answered 503 and closed")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--kv-events-endpoint", f.kv_events_endpoint,
                 "publish cache events in vLLM's protocol on this ZeroMQ PUB endpoint, e.g. "
                 "tcp://*:5557 (port 0 or * picks one); beside /v1/kv_events");
  app.add_option("--kv-events-replay-endpoint", f.kv_events_replay_endpoint,
                 "with --kv-events-endpoint: a ZeroMQ ROUTER endpoint that replays missed "
                 "batches, e.g. tcp://*:5558");
  app.add_option("--kv-events-history", f.kv_events_history,
                 "cache events kept for /v1/kv_events readers that fall behind (~160 bytes each); "
                 "an older resume point gets a fresh snapshot")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--kv-events-buffer-steps", f.kv_events_buffer_steps,
                 "batches kept for replay (vLLM's buffer_steps)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--drain-timeout", f.drain_timeout_s,
                 "seconds in-flight requests may take to finish on SIGTERM/SIGINT")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  if (!f.kv_events_replay_endpoint.empty() && f.kv_events_endpoint.empty()) {
    std::cerr << "--kv-events-replay-endpoint needs --kv-events-endpoint" << std::endl;
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(f.log_level));

  // The sim device models the GPU's work from the shape alone: no weights to read.
  auto model = engine::load_model(f.model, {.weights = f.device != "sim"});
  if (!model) return fail("model " + f.model + ": " + model.error().message);
  if (!f.tokenizer.empty() || !f.chat_template.empty()) {
    const std::string tokenizer = f.tokenizer.empty() ? f.model : f.tokenizer;
    if (prefixgate::Status s = engine::use_tokenizer(
            *model, tokenizer.starts_with("builtin:") ? "byte" : tokenizer, f.chat_template);
        !s) {
      return fail("--tokenizer " + tokenizer + ": " + s.error().message);
    }
  }
  spdlog::info("prompts: {} with {}", model->tokenizer->name(), model->chat_format.name());

  std::unique_ptr<engine::Device> device;
  engine::SimDevice* sim_device = nullptr;  // when the device is the sim (owned by `device`)
  std::size_t num_pages = (f.kv_cache_tokens + f.block_size - 1) / f.block_size;
  std::size_t device_capacity_pages = std::numeric_limits<std::size_t>::max();
  if (f.device == "cpu") {
    device = engine::make_cpu_device(*model, f.compute_threads);
  } else if (f.device == "cuda") {
#if defined(PREFIXGATE_HAVE_KERNELS)
    auto ops = prefixgate::kernels::make_cuda_ops(f.cuda_device);
    if (!ops.ok) return fail("--device cuda: " + ops.error);
    engine::CudaDeviceOptions options;
    options.kv_dtype = f.kv_cache_dtype.starts_with("fp8") ? prefixgate::kernels::KvDtype::kFp8E4m3
                                                           : prefixgate::kernels::KvDtype::kBf16;
    options.max_batch_tokens = f.max_num_batched_tokens;
    options.max_seqs = f.max_num_seqs;
    options.cuda_graphs = f.cuda_graphs;
    const std::string gpu = ops.ops->name();
    auto cuda = engine::make_cuda_device(*model, std::move(ops.ops), options);
    if (!cuda.ok()) return fail("--device cuda: " + cuda.error().message);
    const std::size_t page_bytes = (*cuda)->kv_page_bytes(f.block_size);
    const std::size_t free_bytes = (*cuda)->free_memory_bytes();
    if (kv_tokens_option->count() == 0 && f.kv_cache_memory_mib <= 0) {
      num_pages =
          engine::kv_pages_for_utilization(free_bytes, f.gpu_memory_utilization, page_bytes);
      if (num_pages == 0) return fail("--device cuda: no GPU memory left for the KV cache");
    }
    // An explicit size that cannot fit fails here, with the numbers, not at allocation.
    const double wanted_mib = f.kv_cache_memory_mib > 0
                                  ? f.kv_cache_memory_mib
                                  : static_cast<double>(num_pages * page_bytes) / (1 << 20);
    if (wanted_mib * (1 << 20) > static_cast<double>(free_bytes)) {
      return fail("--device cuda: a KV cache of " + std::to_string(static_cast<long>(wanted_mib)) +
                  " MiB does not fit in the " + std::to_string(free_bytes >> 20) +
                  " MiB of GPU memory free after the weights");
    }
    spdlog::info("cuda device {}: {} MiB of bf16 weights, {} KV cache", gpu,
                 (*cuda)->weight_bytes() >> 20,
                 f.kv_cache_dtype == "auto" ? "bf16" : f.kv_cache_dtype);
    device = std::move(*cuda);
#else
    return fail(
        "--device cuda: this build has no cuda device (the CUDA toolkit was not found "
        "when it was configured; see kernels/README.md)");
#endif
  } else {
    const std::string profile_name =
        f.sim_profile.empty() ? "h100:" + model->spec.id : f.sim_profile;
    auto profile = engine::parse_sim_profile(profile_name);
    if (!profile) return fail("--sim-profile: " + profile.error().message);
    auto speedup = engine::parse_sim_speedup(f.sim_speedup);
    if (!speedup) return fail("--sim-speedup: " + speedup.error().message);
    device_capacity_pages = engine::kv_capacity_pages(*profile, f.block_size);
    num_pages = std::min(num_pages, device_capacity_pages);
    auto sim = engine::make_sim_device(*profile, *speedup);
    sim->set_output_vocabulary(model->spec);
    // Emit text the served tokenizer decodes token by token, so streams start on the first one.
    const auto ordinary = static_cast<canon::TokenId>(
        std::min<std::size_t>(model->spec.bos_token, model->spec.eos_token));
    std::vector<canon::TokenId> text = engine::server::standalone_text_tokens(
        *model->tokenizer, ordinary == 0 ? model->tokenizer->vocab_size() : ordinary);
    if (!text.empty()) sim->set_output_tokens(std::move(text));
    sim_device = sim.get();
    device = std::move(sim);
  }
  // The device's shape sets costs and context; the loaded model's sets the token space (they
  // differ for the sim of a large model served with a built-in model's tokenizer).
  if (f.kv_cache_memory_mib > 0) {
    const double page_bytes = static_cast<double>(device->kv_page_bytes(f.block_size));
    const double budget = f.kv_cache_memory_mib * 1024.0 * 1024.0;
    const std::size_t by_memory = static_cast<std::size_t>(budget / page_bytes);
    if (by_memory == 0) return fail("--kv-cache-memory-mib: smaller than one KV page");
    num_pages = std::min(by_memory, device_capacity_pages);
  }
  const engine::ModelSpec& spec = device->spec();
  const engine::ModelSpec& tokens = model->spec;

  engine::EngineConfig config;
  config.page_tokens = f.block_size;
  config.num_pages = num_pages;
  config.kv_events_history = f.kv_events_history;
  config.model_id = model->spec.id;
  config.scheduler.max_num_batched_tokens = f.max_num_batched_tokens;
  config.scheduler.max_num_seqs = f.max_num_seqs;
  config.scheduler.max_model_len = f.max_model_len > 0 ? f.max_model_len : spec.max_position;
  if (sim_device != nullptr) sim_device->set_max_model_len(config.scheduler.max_model_len);
  config.scheduler.eos_token = tokens.eos_token;

  engine::server::ServedModel served;
  served.name = f.served_model_name.empty() ? f.model : f.served_model_name;
  served.tokenizer = model->tokenizer;
  served.chat_format = model->chat_format;
  served.eos_token = tokens.eos_token;
  served.max_model_len = config.scheduler.max_model_len;
  served.vocab_size = tokens.vocab_size;

  engine::server::ServerOptions options;
  options.http.host = f.host;
  options.http.port = static_cast<std::uint16_t>(f.port);
  options.http.threads = f.threads;
  options.http.max_connections = f.max_connections;
  options.http.drain_timeout =
      std::chrono::milliseconds(static_cast<long>(f.drain_timeout_s * 1000));
  options.http.handle_signals = true;
  options.kv_events_endpoint = f.kv_events_endpoint;
  options.kv_events_replay_endpoint = f.kv_events_replay_endpoint;
  options.kv_events_buffer_batches = f.kv_events_buffer_steps;

  spdlog::info("model {} on {}: {} KV pages of {} tokens, max_model_len {}", model->spec.id,
               f.device, num_pages, f.block_size, config.scheduler.max_model_len);
  engine::server::Server server(options, std::move(served), std::move(config), std::move(device));
  auto port = server.start();
  if (!port) return fail(port.error().message);
  if (const std::string events = server.kv_events_endpoint(); !events.empty()) {
    const std::string replay = server.kv_events_replay_endpoint();
    std::cout << "kv events on " << events << (replay.empty() ? "" : " replay " + replay)
              << std::endl;
  }
  std::cout << "listening on http://" << f.host << ":" << *port << std::endl;
  server.run();
  spdlog::info("drained; bye");
  return 0;
}
