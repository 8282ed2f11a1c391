// prefixgate-gpu-bench: the cuda device's kernels and the engine on a GPU, each figure beside the
// ceiling measured on the same GPU in the same run:
//   copy bandwidth   a device-to-device copy (bytes read + written per second)
//   bf16 peak        an 8192^3 cuBLASLt GEMM
//   decode attention bytes of K/V read per second at contexts 1k/8k/32k and batch 1/16/64
//                    (Llama-3-8B heads: 32 query, 8 KV, head_dim 128), bf16 and fp8 KV
//   prefill attention and the layer GEMMs at prefill sizes, in TFLOP/s
//   the engine       a Llama-3-8B-shaped model with generated weights through CudaDevice:
//                    batch-1 decode tokens/s against the weight-bandwidth roofline (weight bytes
//                    / copy bandwidth), batch-64 decode throughput, TTFT of a prompt after an 8k
//                    cached prefix against the same prompt cold.
// Prints a table and writes JSON (--json). --emu runs the same code at toy sizes in the CPU
// emulator, so CI checks that the benchmark itself works.
//
//   prefixgate-gpu-bench --json build/gpu-check/bench.json
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "prefixgate/engine/cuda_device.h"
#include "prefixgate/engine/model.h"
#include "prefixgate/engine/page_pool.h"
#include "prefixgate/engine/sim_device.h"
#include "prefixgate/kernels/device_buffer.h"
#include "prefixgate/kernels/ops.h"

namespace {

namespace k = prefixgate::kernels;
namespace engine = prefixgate::engine;

struct Row {
  std::string group, name, unit;
  double value = 0, ceiling = 0;  // ceiling 0: none
};

struct Report {
  std::vector<Row> rows;
  void add(std::string group, std::string name, double value, std::string unit,
           double ceiling = 0) {
    rows.push_back({std::move(group), std::move(name), std::move(unit), value, ceiling});
    const Row& r = rows.back();
    if (r.ceiling > 0) {
      std::printf("  %-44s %10.3f %-8s %5.1f%% of %.3f\n", r.name.c_str(), r.value, r.unit.c_str(),
                  100.0 * r.value / r.ceiling, r.ceiling);
    } else {
      std::printf("  %-44s %10.3f %s\n", r.name.c_str(), r.value, r.unit.c_str());
    }
    std::fflush(stdout);
  }
  void write_json(const std::string& path, const std::string& device) const {
    std::ofstream out(path);
    out << "{\"device\": \"" << device << "\", \"results\": [";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      out << (i ? ",\n  " : "\n  ") << "{\"group\": \"" << r.group << "\", \"name\": \"" << r.name
          << "\", \"value\": " << r.value << ", \"unit\": \"" << r.unit << "\"";
      if (r.ceiling > 0)
        out << ", \"ceiling\": " << r.ceiling << ", \"fraction\": " << r.value / r.ceiling;
      out << "}";
    }
    out << "\n]}\n";
  }
};

// Benchmark memory: a DeviceBuffer that ends the run when the GPU has no room for it.
class Memory : public k::DeviceBuffer {
 public:
  Memory(k::Ops& ops, std::size_t bytes) : DeviceBuffer(&ops, bytes) {
    if (!ok()) {
      std::fprintf(stderr, "gpu-bench: cannot allocate %zu MiB\n", bytes >> 20);
      std::exit(1);
    }
  }
};

// Mean milliseconds of `work` over `reps` runs after `warmup`.
double time_ms(k::Ops& ops, int warmup, int reps, const std::function<void()>& work) {
  for (int i = 0; i < warmup; ++i) work();
  ops.synchronize();
  return ops.time_ms([&] {
    for (int i = 0; i < reps; ++i) work();
  }) / reps;
}

struct Sizes {
  std::size_t copy_bytes;
  int gemm_peak;
  std::vector<int> contexts, batches, prefill_tokens, gemm_rows;
  int prefill_prefix;  // the cached prefix of the prefill-after-prefix case
  int heads, kv_heads, head_dim;
  int reps;
  double l2_flush_bytes;  // what rotating buffers add up to at least (several L2 caches)
  std::vector<int> gemv_rows;
};

double measure_copy(k::Ops& ops, const Sizes& s, Report& report) {
  Memory a(ops, s.copy_bytes), b(ops, s.copy_bytes);
  ops.fill_zero(a.as(), s.copy_bytes);
  const double ms =
      time_ms(ops, 2, s.reps, [&] { ops.copy_on_device(b.as(), a.as(), s.copy_bytes); });
  const double tbps = 2.0 * static_cast<double>(s.copy_bytes) / (ms * 1e-3) / 1e12;
  report.add("ceiling", "copy bandwidth (read + write)", tbps, "TB/s");
  return tbps;
}

double gemm_tflops(k::Ops& ops, int rows, int in, int out, int reps) {
  Memory x(ops, static_cast<std::size_t>(rows) * in * 2),
      w(ops, static_cast<std::size_t>(out) * in * 2),
      y(ops, static_cast<std::size_t>(rows) * out * 2);
  ops.fill_random(
      {.bf16_out = x.as<std::uint16_t>(), .count = static_cast<std::size_t>(rows) * in, .seed = 1});
  ops.fill_random({.bf16_out = w.as<std::uint16_t>(),
                   .count = static_cast<std::size_t>(out) * in,
                   .seed = 2,
                   .scale = 0.02f});
  const double ms = time_ms(ops, 2, reps, [&] {
    ops.gemm({.x = x.as<std::uint16_t>(),
              .w = w.as<std::uint16_t>(),
              .y = y.as(),
              .rows = rows,
              .in = in,
              .out = out});
  });
  return 2.0 * rows * static_cast<double>(in) * out / (ms * 1e-3) / 1e12;
}

// A KV pool of `tokens` positions with random contents and a scattered page table.
struct KvPool {
  KvPool(k::Ops& ops, k::KvDtype dtype, int kv_heads, int head_dim, std::size_t pages)
      : view{.dtype = dtype,
             .page_stride = 2LL * kv_heads * 16 * head_dim,
             .scale_page_stride = 2LL * kv_heads * 16,
             .page_tokens = 16,
             .num_kv_heads = kv_heads,
             .head_dim = head_dim},
        data(ops, pages * static_cast<std::size_t>(view.page_stride) *
                      (dtype == k::KvDtype::kBf16 ? 2 : 1)),
        scales(ops, pages * static_cast<std::size_t>(view.scale_page_stride) * sizeof(float)) {
    const std::size_t elements = pages * static_cast<std::size_t>(view.page_stride);
    if (dtype == k::KvDtype::kBf16) {
      ops.fill_random({.bf16_out = data.as<std::uint16_t>(), .count = elements, .seed = 3});
    } else {
      ops.fill_random({.bf16_out = data.as<std::uint16_t>(), .count = elements / 2, .seed = 3});
      ops.fill_random({.f32_out = scales.as<float>(),
                       .count = pages * static_cast<std::size_t>(view.scale_page_stride),
                       .seed = 4,
                       .scale = 0.001f,
                       .offset = 0.004f});
    }
    view.data = data.as();
    view.scales = scales.as<float>();
  }
  k::KvCacheView view;
  Memory data;
  Memory scales;
};

void measure_decode(k::Ops& ops, const Sizes& s, double copy_tbps, Report& report) {
  for (k::KvDtype dtype : {k::KvDtype::kBf16, k::KvDtype::kFp8E4m3}) {
    const char* dname = dtype == k::KvDtype::kBf16 ? "bf16" : "fp8";
    for (int context : s.contexts) {
      for (int batch : s.batches) {
        const std::size_t pages_each = static_cast<std::size_t>((context + 15) / 16);
        const std::size_t pages = pages_each * static_cast<std::size_t>(batch);
        const double element = dtype == k::KvDtype::kBf16 ? 2.0 : 1.0 + 4.0 / s.head_dim;
        const double bytes =
            2.0 * batch * static_cast<double>(context) * s.kv_heads * s.head_dim * element;
        // Runs take turns over copies of the pages that together outgrow the L2 cache, as a
        // model's layers do: each run reads its K/V from memory, not from the last run's L2.
        const std::size_t copies = static_cast<std::size_t>(std::ceil(s.l2_flush_bytes / bytes));
        KvPool pool(ops, dtype, s.kv_heads, s.head_dim, pages * copies);
        std::vector<std::int32_t> table(pages * copies);
        std::iota(table.begin(), table.end(), 0);
        for (std::size_t c = 0; c < copies; ++c) {
          std::shuffle(table.begin() + static_cast<std::ptrdiff_t>(c * pages),
                       table.begin() + static_cast<std::ptrdiff_t>((c + 1) * pages),
                       std::mt19937(5));
        }
        std::vector<std::int32_t> rows(static_cast<std::size_t>(batch)), lens(rows.size(), context);
        std::iota(rows.begin(), rows.end(), 0);
        Memory d_table(ops, table.size() * 4), d_rows(ops, rows.size() * 4),
            d_lens(ops, lens.size() * 4);
        ops.copy_to_device(d_table.as(), table.data(), table.size() * 4);
        ops.copy_to_device(d_rows.as(), rows.data(), rows.size() * 4);
        ops.copy_to_device(d_lens.as(), lens.data(), lens.size() * 4);
        const std::size_t q_elems = static_cast<std::size_t>(batch) * s.heads * s.head_dim;
        Memory q(ops, q_elems * 2), out(ops, q_elems * 2);
        ops.fill_random({.bf16_out = q.as<std::uint16_t>(), .count = q_elems, .seed = 6});
        const int splits =
            k::decode_attention_splits(batch, s.kv_heads, context, ops.multiprocessor_count());
        Memory workspace(ops, std::max<std::size_t>(16, k::decode_attention_workspace_bytes(
                                                            batch, s.heads, s.head_dim, splits)));
        ops.synchronize();
        const k::DecodeAttentionParams p{.q = q.as<std::uint16_t>(),
                                         .q_row_stride = s.heads * s.head_dim,
                                         .out = out.as<std::uint16_t>(),
                                         .out_row_stride = s.heads * s.head_dim,
                                         .q_rows = d_rows.as<std::int32_t>(),
                                         .context_lens = d_lens.as<std::int32_t>(),
                                         .page_table = d_table.as<std::int32_t>(),
                                         .page_table_stride = static_cast<int>(pages_each),
                                         .num_seqs = batch,
                                         .num_heads = s.heads,
                                         .cache = pool.view,
                                         .softmax_scale = 0.088f,
                                         .num_splits = splits,
                                         .workspace = workspace.as()};
        std::size_t turn = 0;
        const double ms = time_ms(ops, 2, s.reps, [&] {
          k::DecodeAttentionParams run = p;
          run.page_table += (turn++ % copies) * pages;
          ops.decode_attention(run);
        });
        report.add("decode_attention",
                   std::string(dname) + " ctx " + std::to_string(context) + " batch " +
                       std::to_string(batch) + " (" + std::to_string(splits) + " splits)",
                   bytes / (ms * 1e-3) / 1e12, "TB/s", copy_tbps);
      }
    }
  }
}

void measure_prefill(k::Ops& ops, const Sizes& s, Report& report) {
  for (int tokens : s.prefill_tokens) {
    for (int prefix : {0, s.prefill_prefix}) {
      if (prefix > 0 && tokens > 1024) continue;
      const int total = prefix + tokens;
      const std::size_t pages = static_cast<std::size_t>((total + 15) / 16);
      KvPool pool(ops, k::KvDtype::kBf16, s.kv_heads, s.head_dim, pages);
      std::vector<std::int32_t> table(pages);
      std::iota(table.begin(), table.end(), 0);
      std::vector<std::int32_t> tiles;
      for (int t = 0; t < tokens; t += k::kPrefillQueryTile) {
        tiles.push_back(0);
        tiles.push_back(t);
      }
      const std::vector<std::int32_t> start = {0}, news = {tokens}, positions = {prefix};
      Memory d_table(ops, pages * 4), d_tiles(ops, tiles.size() * 4), d_start(ops, 4),
          d_new(ops, 4), d_pos(ops, 4);
      ops.copy_to_device(d_table.as(), table.data(), pages * 4);
      ops.copy_to_device(d_tiles.as(), tiles.data(), tiles.size() * 4);
      ops.copy_to_device(d_start.as(), start.data(), 4);
      ops.copy_to_device(d_new.as(), news.data(), 4);
      ops.copy_to_device(d_pos.as(), positions.data(), 4);
      const std::size_t q_elems = static_cast<std::size_t>(tokens) * s.heads * s.head_dim;
      Memory q(ops, q_elems * 2), out(ops, q_elems * 2);
      ops.fill_random({.bf16_out = q.as<std::uint16_t>(), .count = q_elems, .seed = 7});
      ops.synchronize();
      const k::PrefillAttentionParams p{.q = q.as<std::uint16_t>(),
                                        .q_row_stride = s.heads * s.head_dim,
                                        .out = out.as<std::uint16_t>(),
                                        .out_row_stride = s.heads * s.head_dim,
                                        .tiles = d_tiles.as<std::int32_t>(),
                                        .q_start_rows = d_start.as<std::int32_t>(),
                                        .num_new = d_new.as<std::int32_t>(),
                                        .start_positions = d_pos.as<std::int32_t>(),
                                        .page_table = d_table.as<std::int32_t>(),
                                        .page_table_stride = static_cast<int>(pages),
                                        .num_tiles = static_cast<int>(tiles.size() / 2),
                                        .num_heads = s.heads,
                                        .cache = pool.view,
                                        .softmax_scale = 0.088f};
      const double ms = time_ms(ops, 1, std::max(1, s.reps / 4), [&] { ops.prefill_attention(p); });
      // Q K^T and P V over every visible (query, key) pair: 4 D flops per pair per head.
      const double pairs = static_cast<double>(tokens) * prefix + 0.5 * tokens * (tokens + 1.0);
      report.add("prefill_attention",
                 std::to_string(tokens) + " tokens after " + std::to_string(prefix) + " cached",
                 4.0 * s.heads * s.head_dim * pairs / (ms * 1e-3) / 1e12, "TFLOP/s");
    }
  }
}

struct GemmShape {
  const char* name;
  int out, in;
};

// Llama-3-8B's layer GEMMs (out x in): fused qkv, o, fused gate/up, down.
std::vector<GemmShape> layer_gemms(const Sizes& s) {
  const int hidden = s.heads * s.head_dim;
  return {{"qkv", (s.heads + 2 * s.kv_heads) * s.head_dim, hidden},
          {"o", hidden, hidden},
          {"gate_up", 2 * hidden * 7 / 2, hidden},
          {"down", hidden, hidden * 7 / 2}};
}

void measure_gemms(k::Ops& ops, const Sizes& s, double peak, Report& report) {
  const std::vector<GemmShape> shapes = layer_gemms(s);
  for (int rows : s.gemm_rows) {
    for (const auto& shape : shapes) {
      report.add("gemm",
                 std::string(shape.name) + " " + std::to_string(rows) + "x" +
                     std::to_string(shape.out) + "x" + std::to_string(shape.in),
                 gemm_tflops(ops, rows, shape.in, shape.out, s.reps), "TFLOP/s", peak);
    }
  }
}

// A decode step's GEMMs at a few rows (cuBLASLt, as Ops::gemm runs them): weight bytes read
// per second against the copy bandwidth, which is what bounds a small batch's decode step. Runs
// take turns over copies of W that together outgrow the L2 cache.
void measure_gemv(k::Ops& ops, const Sizes& s, int vocab, double copy_tbps, Report& report) {
  std::vector<GemmShape> shapes = layer_gemms(s);
  shapes.push_back({"lm_head", vocab, s.heads * s.head_dim});
  for (int rows : s.gemv_rows) {
    for (const auto& shape : shapes) {
      const double w_bytes = 2.0 * shape.out * shape.in;
      const std::size_t copies = static_cast<std::size_t>(std::ceil(s.l2_flush_bytes / w_bytes));
      const std::size_t w_elems = static_cast<std::size_t>(shape.out) * shape.in;
      Memory x(ops, static_cast<std::size_t>(rows) * shape.in * 2), w(ops, copies * w_elems * 2),
          y(ops, static_cast<std::size_t>(rows) * shape.out * 4);
      ops.fill_random({.bf16_out = x.as<std::uint16_t>(),
                       .count = static_cast<std::size_t>(rows) * shape.in,
                       .seed = 1});
      ops.fill_random({.bf16_out = w.as<std::uint16_t>(),
                       .count = copies * w_elems,
                       .seed = 2,
                       .scale = 0.02f});
      std::size_t turn = 0;
      const double ms = time_ms(ops, 2, s.reps, [&] {
        ops.gemm({.x = x.as<std::uint16_t>(),
                  .w = w.as<std::uint16_t>() + (turn++ % copies) * w_elems,
                  .y = y.as(),
                  .y_fp32 = true,
                  .rows = rows,
                  .in = shape.in,
                  .out = shape.out});
      });
      report.add("gemv",
                 std::string(shape.name) + " " + std::to_string(rows) + "x" +
                     std::to_string(shape.out) + "x" + std::to_string(shape.in),
                 w_bytes / (ms * 1e-3) / 1e12, "TB/s", copy_tbps);
    }
  }
}

// The engine's own path: CudaDevice::execute, host orchestration included.
struct EngineRig {
  EngineRig(std::unique_ptr<engine::CudaDevice> dev, std::size_t pages)
      : device(std::move(dev)), pool(pages) {
    device->init_kv_cache(pages, 16);
  }
  std::unique_ptr<engine::CudaDevice> device;
  engine::PagePool pool;
};

struct Seq {
  std::vector<prefixgate::canon::TokenId> tokens;
  std::vector<engine::PageId> pages = {};
  std::size_t computed = 0;
};

void run_step(EngineRig& rig, std::vector<Seq*> seqs, std::size_t chunk) {
  static const engine::SamplingParams greedy{.temperature = 0.0};
  std::vector<engine::SequenceStep> steps;
  std::vector<std::size_t> counts;
  for (Seq* s : seqs) {
    const std::size_t n = std::min(chunk, s->tokens.size() - s->computed);
    const std::size_t end = s->computed + n;
    const std::size_t need = (end + 15) / 16;
    if (need > s->pages.size() && !rig.pool.allocate(need - s->pages.size(), s->pages)) {
      std::fprintf(stderr, "gpu-bench: KV pool too small (%zu free, %zu wanted)\n",
                   rig.pool.free_count(), need - s->pages.size());
      std::exit(1);
    }
    steps.push_back({.tokens = std::span(s->tokens).subspan(s->computed, n),
                     .start_position = s->computed,
                     .pages = s->pages,
                     .sample = end == s->tokens.size(),
                     .sampling = &greedy});
    counts.push_back(n);
  }
  const engine::StepOutput out = rig.device->execute(steps);
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    seqs[i]->computed += counts[i];
    if (steps[i].sample) seqs[i]->tokens.push_back(out.tokens[i]);
  }
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::vector<prefixgate::canon::TokenId> tokens(std::size_t n, std::uint32_t seed,
                                               std::size_t vocab) {
  std::mt19937 rng(seed);
  std::vector<prefixgate::canon::TokenId> t(n);
  for (auto& id : t) id = static_cast<prefixgate::canon::TokenId>(rng() % vocab);
  return t;
}

void measure_engine(std::unique_ptr<k::Ops> ops, const engine::ModelSpec& spec, bool quick,
                    double copy_tbps, Report& report) {
  const int batch = quick ? 4 : 64;
  const std::size_t chunk = quick ? 64 : 2048;
  const std::size_t prefix = quick ? 256 : 8192, suffix = quick ? 16 : 64;
  const std::size_t context = quick ? 32 : 512;
  const int decode_steps = quick ? 4 : 32;
  auto made = engine::make_generated_cuda_device(
      spec, 1, std::move(ops),
      {.max_batch_tokens = chunk, .max_seqs = static_cast<std::size_t>(batch)});
  if (!made.ok()) {
    std::fprintf(stderr, "gpu-bench: %s\n", made.error().message.c_str());
    std::exit(1);
  }
  const double weight_gb = static_cast<double>((*made)->weight_bytes()) / 1e9;
  // What a decode step reads: every weight but the embedding table, of which it reads one row
  // per sequence (unless the table is also the output head).
  const double step_gb =
      weight_gb - (spec.tie_word_embeddings
                       ? 0.0
                       : 2.0 * static_cast<double>(spec.vocab_size) * spec.hidden_size / 1e9);
  const std::size_t pages = (static_cast<std::size_t>(batch) * (context + decode_steps + 16) +
                             2 * (prefix + suffix + 16)) /
                                16 +
                            64;
  EngineRig rig(std::move(*made), pages);
  const std::size_t vocab = spec.vocab_size;
  std::printf("engine: %s, %.2f GB of bf16 weights (%.2f GB read per decode step), %zu KV pages\n",
              spec.id.c_str(), weight_gb, step_gb, pages);

  // Batch-1 decode: every step reads every weight once. With decode graphs (the default) and
  // with every kernel launched from the host.
  for (const bool graphs : {true, false}) {
    rig.device->set_cuda_graphs(graphs);
    Seq s{.tokens = tokens(context, 1, vocab)};
    run_step(rig, {&s}, chunk);
    run_step(rig, {&s}, 1);  // warm-up (and the graph's capture)
    const double start = now_ms();
    for (int i = 0; i < decode_steps; ++i) run_step(rig, {&s}, 1);
    const double per_token_ms = (now_ms() - start) / decode_steps;
    const double roofline = copy_tbps * 1e12 / (step_gb * 1e9);  // tokens/s
    report.add("engine", graphs ? "batch-1 decode" : "batch-1 decode, no graphs",
               1000.0 / per_token_ms, "tok/s", roofline);
    for (engine::PageId p : s.pages) rig.pool.release(p);
  }
  rig.device->set_cuda_graphs(true);
  // Batch-64 decode throughput.
  {
    std::vector<Seq> seqs(static_cast<std::size_t>(batch));
    std::vector<Seq*> all;
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      seqs[i].tokens = tokens(context, static_cast<std::uint32_t>(10 + i), vocab);
      all.push_back(&seqs[i]);
    }
    for (std::size_t i = 0; i < seqs.size(); i += chunk / context) {
      std::vector<Seq*> group(
          all.begin() + static_cast<std::ptrdiff_t>(i),
          all.begin() + static_cast<std::ptrdiff_t>(std::min(seqs.size(), i + chunk / context)));
      run_step(rig, group, chunk);
    }
    run_step(rig, all, 1);
    const double start = now_ms();
    for (int i = 0; i < decode_steps; ++i) run_step(rig, all, 1);
    const double seconds = (now_ms() - start) / 1000.0;
    report.add("engine", "batch-" + std::to_string(batch) + " decode throughput",
               batch * decode_steps / seconds, "tok/s");
    for (Seq& s : seqs) {
      for (engine::PageId p : s.pages) rig.pool.release(p);
    }
  }
  // TTFT: a prompt of prefix + suffix tokens cold (chunked as the scheduler chunks it), and the
  // same prompt when the prefix's pages are cached (only the suffix is computed).
  {
    const auto prompt = tokens(prefix + suffix, 99, vocab);
    Seq cold{.tokens = prompt};
    double start = now_ms();
    while (cold.computed < prompt.size()) run_step(rig, {&cold}, chunk);
    const double cold_ms = now_ms() - start;
    Seq hit{.tokens = prompt,
            .pages = std::vector<engine::PageId>(
                cold.pages.begin(), cold.pages.begin() + static_cast<std::ptrdiff_t>(prefix / 16)),
            .computed = prefix};
    start = now_ms();
    run_step(rig, {&hit}, chunk);
    const double hit_ms = now_ms() - start;
    report.add("engine", "TTFT cold, " + std::to_string(prefix + suffix) + " tokens", cold_ms,
               "ms");
    report.add("engine", "TTFT after " + std::to_string(prefix) + " cached tokens", hit_ms, "ms");
    report.add("engine", "TTFT speedup from the cached prefix", cold_ms / hit_ms, "x");
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"prefixgate-gpu-bench: kernels and the cuda device against this GPU's ceilings"};
  bool emu = false;
  bool skip_engine = false;
  std::string json_path;
  app.add_flag("--emu", emu,
               "run toy sizes in the CPU emulator (checks the benchmark, measures nothing)");
  app.add_flag("--skip-engine", skip_engine, "kernels only");
  std::vector<std::string> only;
  const std::vector<std::string> groups = {"decode_attention", "prefill_attention", "gemm", "gemv",
                                           "engine"};
  app.add_option("--only", only, "measure only these groups (the ceilings always)")
      ->check(CLI::IsMember(groups))
      ->delimiter(',');
  app.add_option("--json", json_path, "write the results as JSON here");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  std::unique_ptr<k::Ops> ops;
  if (emu) {
    ops = k::make_emu_ops();
  } else {
    auto gpu = k::make_cuda_ops();
    if (!gpu.ok) {
      std::fprintf(stderr, "gpu-bench: %s\n", gpu.error.c_str());
      return 1;
    }
    ops = std::move(gpu.ops);
  }
  const std::string device = ops->name();
  std::printf("prefixgate-gpu-bench on %s\n", device.c_str());
  const Sizes sizes =
      emu ? Sizes{1 << 20, 256, {64, 200}, {1, 3}, {64}, {32}, 128, 4, 2, 64, 2, 1 << 20, {1, 3}}
          : Sizes{1ull << 31,  8192,        {1024, 8192, 32768},
                  {1, 16, 64}, {512, 4096}, {512, 2048, 8192},
                  8192,        32,          8,
                  128,         20,          256e6,
                  {1, 4}};
  Report report;
  std::printf("ceilings\n");
  const double copy_tbps = measure_copy(*ops, sizes, report);
  const double peak = gemm_tflops(*ops, sizes.gemm_peak, sizes.gemm_peak, sizes.gemm_peak,
                                  std::max(2, sizes.reps / 2));
  report.add("ceiling", "bf16 GEMM " + std::to_string(sizes.gemm_peak) + "^3", peak, "TFLOP/s");
  const auto wanted = [&](const std::string& group) {
    return only.empty() || std::find(only.begin(), only.end(), group) != only.end();
  };
  if (wanted("decode_attention")) {
    std::printf("decode attention (K/V bytes read)\n");
    measure_decode(*ops, sizes, copy_tbps, report);
  }
  if (wanted("prefill_attention")) {
    std::printf("prefill attention\n");
    measure_prefill(*ops, sizes, report);
  }
  if (wanted("gemm")) {
    std::printf("GEMMs at prefill sizes\n");
    measure_gemms(*ops, sizes, peak, report);
  }
  if (wanted("gemv")) {
    std::printf("GEMMs at decode sizes (weight bytes read)\n");
    measure_gemv(*ops, sizes, emu ? 1000 : 128256, copy_tbps, report);
  }
  if (!skip_engine && wanted("engine")) {
    std::printf("engine\n");
    engine::ModelSpec spec;
    if (emu) {
      spec = *engine::builtin_spec("builtin:tiny");
    } else {
      spec = engine::parse_sim_profile("h100:llama3-8b")->model;
    }
    measure_engine(std::move(ops), spec, emu, copy_tbps, report);
  }
  if (!json_path.empty()) report.write_json(json_path, device);
  return 0;
}
