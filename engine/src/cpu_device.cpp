// The cpu device: a Llama forward pass in fp32 over a batch of sequence steps and a paged KV
// cache, on OpenBLAS.
//
// One execute() runs every new token of the batch through the model together: the projections
// and the MLP are GEMMs over all T tokens at once, and only attention is per sequence, reading
// K/V through the sequence's page table.
//
// Threads: OpenBLAS runs single-threaded and the device splits work over its own WorkerPool:
// GEMMs by rows (prefill) or by output features (decode), attention by (sequence, KV head,
// query tile). One owner for the cores keeps BLAS's spinning workers off the attention loops.
//
// KV cache layout (fp32), one contiguous block per page so a page is one range of memory:
//   kv_: [num_pages, num_layers, 2 (K, V), num_kv_heads, page_tokens, head_dim]
// Position p of a sequence lives in page pages[p / page_tokens], slot p % page_tokens. Slots
// are innermost but one so that one KV head's K (or V) in a page is a single [page_tokens,
// head_dim] block: attention gathers a page with one copy. K is stored after RoPE.
#include "prefixgate/engine/cpu_device.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "cpu_device_kernels.h"
#include "cpu_device_pool.h"
#include "device_checks.h"
#include "prefixgate/base/check.h"

namespace prefixgate::engine {
namespace {

// Query rows per attention task: bounds a task's score matrix at [kQueryTile, context].
constexpr std::size_t kQueryTile = 128;
// Below this many multiply-adds a GEMM, or a layer's attention, runs on the calling thread:
// waking the workers (tens of microseconds) would cost more than it saves.
constexpr std::size_t kMinParallelMacs = 1 << 18;
constexpr std::size_t kMinParallelAttentionMacs = 1 << 20;

std::size_t thread_count(int requested) {
  if (requested > 0) return static_cast<std::size_t>(requested);
  return std::max(1u, std::thread::hardware_concurrency());
}

// One attention task: query rows [row0, row0 + rows) of batch step `step`, for the query heads
// of `kv_head`.
struct AttentionTask {
  std::size_t step;
  std::size_t batch_row;  // the step's first row in the batch matrices
  std::size_t kv_head;
  std::size_t row0;
  std::size_t rows;
};

// Per-worker buffers for attention.
struct AttentionScratch {
  std::vector<float> keys;    // one KV head's K over the visible context [keys, head_dim]
  std::vector<float> values;  // and its V [keys, head_dim]
  std::vector<float> scores;  // [rows, keys]
};

class CpuDevice final : public Device {
 public:
  CpuDevice(const Model& model, int threads)
      : spec_(model.spec),
        weights_(model.weights),
        inv_freq_(model.spec.rope_inv_freq()),
        pool_(thread_count(threads)),
        scratch_(pool_.size()) {
    PG_CHECK(weights_ != nullptr, "model has weights");
    openblas_set_num_threads(1);
  }

  std::string_view name() const override { return "cpu"; }
  const ModelSpec& spec() const override { return spec_; }

  std::size_t kv_page_bytes(std::size_t page_tokens) const override {
    return page_tokens * spec_.kv_bytes_per_token(sizeof(float));
  }

  void init_kv_cache(std::size_t num_pages, std::size_t page_tokens) override {
    PG_CHECK(page_tokens > 0, "page_tokens > 0");
    num_pages_ = num_pages;
    page_tokens_ = page_tokens;
    kv_dim_ = spec_.num_kv_heads * spec_.head_dim;
    page_floats_ = spec_.num_layers * 2 * page_tokens * kv_dim_;
    kv_.assign(num_pages * page_floats_, 0.0f);
  }

  StepOutput execute(std::span<const SequenceStep> batch) override;

 private:
  // K (kind 0) or V (kind 1) of `kv_head` in `page` at `layer`, from `slot` on:
  // [page_tokens - slot, head_dim].
  float* kv_block(PageId page, std::size_t layer, std::size_t kind, std::size_t kv_head,
                  std::size_t slot) {
    const std::size_t block = (layer * 2 + kind) * spec_.num_kv_heads + kv_head;
    return kv_.data() + page * page_floats_ + (block * page_tokens_ + slot) * spec_.head_dim;
  }

  void validate(std::span<const SequenceStep> batch) const;
  void rope_tables(std::span<const SequenceStep> batch, std::size_t total_tokens);
  void write_kv(const SequenceStep& step, std::size_t layer, const float* k, const float* v);
  void attend(const SequenceStep& step, const AttentionTask& task, std::size_t layer,
              AttentionScratch& scratch);
  // y = x W^T over the pool. x: [rows, in], w: [out, in], y: [rows, out].
  void linear(const float* x, std::size_t rows, std::size_t in, const std::vector<float>& w,
              std::size_t out, float* y);
  // fn(r0, r1) over row ranges of [0, rows), split over the pool.
  template <class Fn>
  void for_rows(std::size_t rows, Fn fn);

  ModelSpec spec_;
  std::shared_ptr<const ModelWeights> weights_;
  std::vector<double> inv_freq_;  // [head_dim / 2]
  cpu::WorkerPool pool_;

  std::size_t num_pages_ = 0;
  std::size_t page_tokens_ = 0;
  std::size_t kv_dim_ = 0;       // num_kv_heads * head_dim
  std::size_t page_floats_ = 0;  // floats in one page
  std::vector<float> kv_;

  // Scratch reused across calls (T = tokens in the batch, S = steps that sample).
  std::vector<float> x_;          // residual stream [T, hidden]
  std::vector<float> h_;          // normed input [T, hidden]
  std::vector<float> q_;          // [T, num_heads * head_dim]
  std::vector<float> k_;          // [T, kv_dim]
  std::vector<float> v_;          // [T, kv_dim]
  std::vector<float> attn_;       // [T, num_heads * head_dim]
  std::vector<float> proj_;       // o_proj / down_proj output [T, hidden]
  std::vector<float> gate_;       // [T, intermediate]
  std::vector<float> up_;         // [T, intermediate]
  std::vector<float> cos_, sin_;  // [T, head_dim / 2]
  std::vector<float> last_;       // final hidden of sampled rows [S, hidden]
  std::vector<AttentionTask> tasks_;
  std::vector<AttentionScratch> scratch_;  // one per pool worker
};

void CpuDevice::validate(std::span<const SequenceStep> batch) const {
  check_batch(
      "cpu device", batch,
      {.vocab_size = spec_.vocab_size, .num_pages = num_pages_, .page_tokens = page_tokens_});
}

template <class Fn>
void CpuDevice::for_rows(std::size_t rows, Fn fn) {
  const std::size_t chunks = std::min(rows, pool_.size());
  pool_.parallel_for(
      chunks, [&](std::size_t c, std::size_t) { fn(rows * c / chunks, rows * (c + 1) / chunks); });
}

void CpuDevice::linear(const float* x, std::size_t rows, std::size_t in,
                       const std::vector<float>& w, std::size_t out, float* y) {
  const std::size_t workers = pool_.size();
  if (workers == 1 || rows * in * out < kMinParallelMacs) {
    cpu::linear(x, rows, in, w.data(), out, y);
    return;
  }
  if (rows >= 64 * workers) {
    // Prefill: each worker multiplies a band of rows by all of W (packing W once per band is
    // small next to the band's arithmetic).
    for_rows(rows, [&](std::size_t r0, std::size_t r1) {
      cpu::linear(x + r0 * in, r1 - r0, in, w.data(), out, y + r0 * out);
    });
    return;
  }
  // Decode: few rows, so split W's output features; each worker packs and streams only its
  // slice of W, which is the bulk of the work.
  const std::size_t chunks = std::min(out, workers);
  pool_.parallel_for(chunks, [&](std::size_t c, std::size_t) {
    const std::size_t o0 = out * c / chunks, o1 = out * (c + 1) / chunks;
    // y[:, o0:o1] = x W[o0:o1]^T
    cpu::gemm_nt(rows, o1 - o0, in, 1.0f, x, in, w.data() + o0 * in, in, y + o0, out);
  });
}

void CpuDevice::rope_tables(std::span<const SequenceStep> batch, std::size_t total_tokens) {
  const std::size_t half = spec_.head_dim / 2;
  cos_.resize(total_tokens * half);
  sin_.resize(total_tokens * half);
  std::size_t row = 0;
  for (const SequenceStep& step : batch) {
    for (std::size_t i = 0; i < step.tokens.size(); ++i, ++row) {
      // Angles in double: position * inv_freq reaches thousands of radians, where fp32 would
      // keep only ~3 decimal digits of the phase.
      const auto position = static_cast<double>(step.start_position + i);
      for (std::size_t j = 0; j < half; ++j) {
        const double angle = position * inv_freq_[j];
        cos_[row * half + j] = static_cast<float>(std::cos(angle));
        sin_[row * half + j] = static_cast<float>(std::sin(angle));
      }
    }
  }
}

// k, v: this step's rows, [tokens, kv_dim].
void CpuDevice::write_kv(const SequenceStep& step, std::size_t layer, const float* k,
                         const float* v) {
  const std::size_t head_dim = spec_.head_dim;
  for (std::size_t i = 0; i < step.tokens.size(); ++i) {
    const std::size_t p = step.start_position + i;
    const PageId page = step.pages[p / page_tokens_];
    const std::size_t slot = p % page_tokens_;
    for (std::size_t g = 0; g < spec_.num_kv_heads; ++g) {
      std::memcpy(kv_block(page, layer, 0, g, slot), k + i * kv_dim_ + g * head_dim,
                  head_dim * sizeof(float));
      std::memcpy(kv_block(page, layer, 1, g, slot), v + i * kv_dim_ + g * head_dim,
                  head_dim * sizeof(float));
    }
  }
}

// Causal attention of some query rows of one sequence, for the query heads that share one KV
// head, over every position they can see. Reads q_, writes those rows' heads in attn_.
void CpuDevice::attend(const SequenceStep& step, const AttentionTask& task, std::size_t layer,
                       AttentionScratch& s) {
  const std::size_t head_dim = spec_.head_dim;
  const std::size_t q_dim = spec_.num_heads * head_dim;
  const std::size_t group = spec_.num_heads / spec_.num_kv_heads;
  const std::size_t start = step.start_position;
  // The task's last query sees positions [0, keys); earlier rows see fewer.
  const std::size_t keys = start + task.row0 + task.rows;

  // Gather this KV head's K and V over [0, keys) out of the pages, one block copy per page:
  // [keys, head_dim] each.
  s.keys.resize(keys * head_dim);
  s.values.resize(keys * head_dim);
  for (std::size_t p0 = 0; p0 < keys; p0 += page_tokens_) {
    const PageId page = step.pages[p0 / page_tokens_];
    const std::size_t bytes = std::min(page_tokens_, keys - p0) * head_dim * sizeof(float);
    std::memcpy(s.keys.data() + p0 * head_dim, kv_block(page, layer, 0, task.kv_head, 0), bytes);
    std::memcpy(s.values.data() + p0 * head_dim, kv_block(page, layer, 1, task.kv_head, 0), bytes);
  }

  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  s.scores.resize(task.rows * keys);
  const std::size_t first_row = task.batch_row + task.row0;
  for (std::size_t h = task.kv_head * group; h < (task.kv_head + 1) * group; ++h) {
    // scores = scale * Q K^T: [rows, keys]
    cpu::gemm_nt(task.rows, keys, head_dim, scale, q_.data() + first_row * q_dim + h * head_dim,
                 q_dim, s.keys.data(), head_dim, s.scores.data(), keys);
    for (std::size_t r = 0; r < task.rows; ++r) {
      cpu::softmax_masked(s.scores.data() + r * keys, start + task.row0 + r + 1, keys);
    }
    // out = P V: [rows, head_dim], written straight into the head's columns of attn_.
    cpu::gemm_nn(task.rows, head_dim, keys, s.scores.data(), keys, s.values.data(), head_dim,
                 attn_.data() + first_row * q_dim + h * head_dim, q_dim);
  }
}

StepOutput CpuDevice::execute(std::span<const SequenceStep> batch) {
  validate(batch);
  const ModelWeights& w = *weights_;
  const std::size_t hidden = spec_.hidden_size;
  const std::size_t q_dim = spec_.num_heads * spec_.head_dim;
  const std::size_t inter = spec_.intermediate_size;
  const double eps = spec_.rms_norm_eps;

  // Batch rows and attention tasks: the same for every layer.
  std::size_t total = 0;
  std::size_t attention_macs = 0;  // per layer: Q K^T and P V over every head
  tasks_.clear();
  for (std::size_t b = 0; b < batch.size(); ++b) {
    const std::size_t n = batch[b].tokens.size();
    for (std::size_t row0 = 0; row0 < n; row0 += kQueryTile) {
      const std::size_t rows = std::min(kQueryTile, n - row0);
      for (std::size_t g = 0; g < spec_.num_kv_heads; ++g) {
        tasks_.push_back({b, total, g, row0, rows});
      }
      attention_macs += 2 * rows * (batch[b].start_position + row0 + rows) * q_dim;
    }
    total += n;
  }
  // Small attention (a short decode batch) runs on the caller: waking workers costs more.
  const bool parallel_attention = attention_macs >= kMinParallelAttentionMacs;
  // Longest context first, so that the big tasks do not start last and run alone.
  std::stable_sort(tasks_.begin(), tasks_.end(),
                   [&](const AttentionTask& a, const AttentionTask& b) {
                     return batch[a.step].start_position + a.row0 + a.rows >
                            batch[b.step].start_position + b.row0 + b.rows;
                   });

  // x = embed[tokens]: [T, hidden]
  x_.resize(total * hidden);
  std::size_t row = 0;
  for (const SequenceStep& step : batch) {
    for (canon::TokenId t : step.tokens) {
      std::memcpy(x_.data() + row++ * hidden, w.embed.data() + t * hidden, hidden * sizeof(float));
    }
  }
  rope_tables(batch, total);
  h_.resize(total * hidden);
  q_.resize(total * q_dim);
  k_.resize(total * kv_dim_);
  v_.resize(total * kv_dim_);
  attn_.resize(total * q_dim);
  proj_.resize(total * hidden);
  gate_.resize(total * inter);
  up_.resize(total * inter);

  for (std::size_t layer = 0; layer < spec_.num_layers; ++layer) {
    const LayerWeights& lw = w.layers[layer];
    // Attention block: x += o_proj(attention(rope(q), rope(k), v)) of rms_norm(x).
    cpu::rms_norm(x_.data(), lw.attn_norm.data(), total, hidden, eps, h_.data());
    linear(h_.data(), total, hidden, lw.wq, q_dim, q_.data());
    linear(h_.data(), total, hidden, lw.wk, kv_dim_, k_.data());
    linear(h_.data(), total, hidden, lw.wv, kv_dim_, v_.data());
    cpu::apply_rope(q_.data(), total, spec_.num_heads, spec_.head_dim, cos_.data(), sin_.data());
    cpu::apply_rope(k_.data(), total, spec_.num_kv_heads, spec_.head_dim, cos_.data(), sin_.data());
    // Every step's K/V goes into its pages first, so attention reads a sequence's own new
    // tokens the same way as its cached prefix.
    row = 0;
    for (const SequenceStep& step : batch) {
      write_kv(step, layer, k_.data() + row * kv_dim_, v_.data() + row * kv_dim_);
      row += step.tokens.size();
    }
    if (parallel_attention) {
      pool_.parallel_for(tasks_.size(), [&](std::size_t t, std::size_t worker) {
        attend(batch[tasks_[t].step], tasks_[t], layer, scratch_[worker]);
      });
    } else {
      for (const AttentionTask& task : tasks_) attend(batch[task.step], task, layer, scratch_[0]);
    }
    linear(attn_.data(), total, q_dim, lw.wo, hidden, proj_.data());
    for (std::size_t i = 0; i < total * hidden; ++i) x_[i] += proj_[i];

    // MLP block: x += down(silu(gate(h)) * up(h)), h = rms_norm(x).
    cpu::rms_norm(x_.data(), lw.mlp_norm.data(), total, hidden, eps, h_.data());
    linear(h_.data(), total, hidden, lw.w_gate, inter, gate_.data());
    linear(h_.data(), total, hidden, lw.w_up, inter, up_.data());
    for_rows(total, [&](std::size_t r0, std::size_t r1) {
      cpu::silu_mul(gate_.data() + r0 * inter, up_.data() + r0 * inter, (r1 - r0) * inter);
    });
    linear(gate_.data(), total, inter, lw.w_down, hidden, proj_.data());
    for (std::size_t i = 0; i < total * hidden; ++i) x_[i] += proj_[i];
  }

  // Final norm and LM head only for the last token of each sampling step: a prefill chunk's
  // other rows need no logits. last: [S, hidden] -> logits: [S, vocab]
  StepOutput output;
  output.tokens.assign(batch.size(), 0);
  std::size_t sampled = 0;
  last_.clear();
  row = 0;
  for (const SequenceStep& step : batch) {
    row += step.tokens.size();
    if (!step.sample) continue;
    last_.insert(last_.end(), x_.begin() + static_cast<std::ptrdiff_t>((row - 1) * hidden),
                 x_.begin() + static_cast<std::ptrdiff_t>(row * hidden));
    ++sampled;
  }
  if (sampled == 0) return output;
  cpu::rms_norm(last_.data(), w.final_norm.data(), sampled, hidden, eps, last_.data());
  const std::vector<float>& head = spec_.tie_word_embeddings ? w.embed : w.lm_head;
  const std::size_t vocab = spec_.vocab_size;
  output.logits.resize(sampled * vocab);
  linear(last_.data(), sampled, hidden, head, vocab, output.logits.data());
  std::size_t s = 0;
  for (std::size_t b = 0; b < batch.size(); ++b) {
    if (!batch[b].sample) continue;
    output.tokens[b] = sample_token(std::span(output.logits).subspan(s++ * vocab, vocab),
                                    *batch[b].sampling, batch[b].sample_step);
  }
  return output;
}

}  // namespace

std::unique_ptr<Device> make_cpu_device(const Model& model, int threads) {
  return std::make_unique<CpuDevice>(model, threads);
}

}  // namespace prefixgate::engine
