// The cuda device: one execute() is one pass of every new token of the batch through the model,
// on the Ops stream, with one upload of the step's metadata and one download of its tokens.
//
// Per layer (T = tokens in the step, S = sampled steps):
//   h = rms_norm(x += proj)                       fused residual add (fp32 x) + norm (bf16 h)
//   qkv = h Wqkv^T                                cuBLASLt, [T, (H + 2G) D] bf16
//   rope(q), rope(k) -> pages, v -> pages         rope_kv_write
//   attn = decode_attention (1-token steps) and prefill_attention (chunks), [T, H D]
//   proj = attn Wo^T                              fp32 out, added to x by the next norm
//   h = rms_norm(x += proj); gate_up = h Wgu^T; act = silu(gate) * up; proj = act Wdown^T
// then the final norm of the S sampled rows only, the LM head, and argmax on the device.
//
// Sampling: greedy rows are decided on the device (4 bytes back per row). Rows that sample
// (temperature > 0) copy their logits to the host and use the same sample_token() as the cpu
// device, so a seed draws the same token on either device; top-k/top-p on the device would
// need its own seeded sampler to keep that promise, and costs only where requests ask for it.
#include "prefixgate/engine/cuda_device.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <tuple>

#include "../device_checks.h"
#include "prefixgate/base/check.h"
#include "prefixgate/engine/sampling.h"
#include "prefixgate/kernels/device_buffer.h"
#include "step_layout.h"

namespace prefixgate::engine {
namespace {

namespace k = kernels;
using Buffer = kernels::DeviceBuffer;

Error error(ErrorCode code, std::string message) {
  return Error{code, std::move(message), "device"};
}

struct LayerBuffers {
  Buffer attn_norm;  // [hidden] fp32
  Buffer w_qkv;      // [(H + 2G) D, hidden] bf16
  Buffer wo;         // [hidden, H D] bf16
  Buffer mlp_norm;   // [hidden] fp32
  Buffer w_gate_up;  // [2 I, hidden] bf16
  Buffer w_down;     // [hidden, I] bf16
};

// Bytes of each tensor, for allocation and weight_bytes().
struct Shapes {
  explicit Shapes(const ModelSpec& s)
      : hidden(s.hidden_size),
        heads(s.num_heads),
        kv_heads(s.num_kv_heads),
        head_dim(s.head_dim),
        inter(s.intermediate_size),
        vocab(s.vocab_size),
        q_dim(heads * head_dim),
        qkv_dim((heads + 2 * kv_heads) * head_dim) {}
  std::size_t hidden, heads, kv_heads, head_dim, inter, vocab, q_dim, qkv_dim;
};

class CudaDeviceImpl final : public CudaDevice {
 public:
  CudaDeviceImpl(const ModelSpec& spec, std::unique_ptr<k::Ops> ops,
                 const CudaDeviceOptions& options)
      : spec_(spec), shapes_(spec), ops_(std::move(ops)), options_(options) {}

  ~CudaDeviceImpl() override {
    if (staging_ != nullptr) ops_->free_host(staging_);
  }

  std::string_view name() const override { return "cuda"; }
  const ModelSpec& spec() const override { return spec_; }
  std::size_t free_memory_bytes() const override { return ops_->memory_info().free_bytes; }
  const k::Ops& ops() const override { return *ops_; }
  std::size_t weight_bytes() const override { return weight_bytes_; }
  void set_cuda_graphs(bool on) override {
    if (!on) release_graphs();
    options_.cuda_graphs = on;
  }

  std::size_t kv_page_bytes(std::size_t page_tokens) const override {
    const std::size_t elements = 2 * spec_.num_layers * shapes_.kv_heads * page_tokens;
    if (options_.kv_dtype == k::KvDtype::kBf16) return elements * shapes_.head_dim * 2;
    return elements * (shapes_.head_dim + sizeof(float));
  }

  void init_kv_cache(std::size_t num_pages, std::size_t page_tokens) override {
    PG_CHECK(page_tokens > 0, "page_tokens > 0");
    num_pages_ = num_pages;
    page_tokens_ = page_tokens;
    const std::size_t per_layer = 2 * shapes_.kv_heads * page_tokens;  // rows of head_dim
    const std::size_t element_bytes = options_.kv_dtype == k::KvDtype::kBf16 ? 2 : 1;
    kv_ = Buffer(ops_.get(),
                 num_pages * spec_.num_layers * per_layer * shapes_.head_dim * element_bytes);
    if (options_.kv_dtype == k::KvDtype::kFp8E4m3) {
      kv_scales_ = Buffer(ops_.get(), num_pages * spec_.num_layers * per_layer * sizeof(float));
    }
    // init_kv_cache() is given a pool that kv_pages_for_utilization() sized to fit.
    PG_CHECK(kv_.ok() && kv_scales_.ok(),
             "the KV pool of " + std::to_string(num_pages) + " pages (" +
                 std::to_string(num_pages * kv_page_bytes(page_tokens) >> 20) +
                 " MiB) fits in GPU memory");
    // Pages are not cleared: every position is written before it is read.
  }

  StepOutput execute(std::span<const SequenceStep> batch) override;

  // Allocation of the weights and buffers; false when GPU memory runs out.
  Status allocate_weights();
  void upload(const ModelWeights& w);
  void generate(std::uint64_t seed);
  Status reserve(std::size_t tokens, std::size_t seqs);

 private:
  // Decode graphs by step shape: decode steps, padded table width, sampled rows, splits.
  using GraphKey = std::tuple<std::size_t, std::size_t, std::size_t, int>;
  static constexpr std::size_t kMaxGraphs = 64;

  // Every kernel of one step, embedding to argmax, reading the step's metadata from meta_.
  void forward(const StepLayout& l, std::size_t total, int splits);
  // Tokens (and logits, sampling) back to the host.
  StepOutput finish(std::span<const SequenceStep> batch, const StepLayout& l);
  void release_graphs();
  k::KvCacheView layer_view(std::size_t layer) const;
  // Writes the step's metadata (planned by plan_step) into the staging area and uploads it to
  // meta_, growing both as needed.
  void stage(std::span<const SequenceStep> batch, const StepLayout& l);
  void gemm(const Buffer& x, const Buffer& w, void* y, bool y_fp32, std::size_t rows,
            std::size_t in, std::size_t out) {
    ops_->gemm({.x = x.as<std::uint16_t>(),
                .w = w.as<std::uint16_t>(),
                .y = y,
                .y_fp32 = y_fp32,
                .rows = static_cast<int>(rows),
                .in = static_cast<int>(in),
                .out = static_cast<int>(out)});
  }

  ModelSpec spec_;
  Shapes shapes_;
  std::unique_ptr<k::Ops> ops_;
  CudaDeviceOptions options_;
  std::size_t weight_bytes_ = 0;

  Buffer embed_;       // [vocab, hidden] bf16
  Buffer lm_head_;     // [vocab, hidden] bf16, unless tied
  Buffer final_norm_;  // [hidden] fp32
  Buffer inv_freq_;    // [D / 2] double
  std::vector<LayerBuffers> layers_;

  std::size_t num_pages_ = 0;
  std::size_t page_tokens_ = 0;
  Buffer kv_;
  Buffer kv_scales_;

  // Activations, for up to capacity_tokens_ tokens and capacity_seqs_ sampled rows.
  std::size_t capacity_tokens_ = 0;
  std::size_t capacity_seqs_ = 0;
  Buffer x_, proj_, h_, qkv_, attn_, gate_up_, act_, cos_, sin_;
  Buffer last_, logits_, sampled_;
  Buffer meta_;              // the step's metadata on the device
  Buffer workspace_;         // decode attention's split partials
  void* staging_ = nullptr;  // pinned host copy of the metadata
  std::size_t staging_bytes_ = 0;
  std::vector<std::int32_t> host_tokens_;
  std::map<GraphKey, int> graphs_;
};

Status CudaDeviceImpl::allocate_weights() {
  const Shapes& s = shapes_;
  k::Ops* ops = ops_.get();
  const std::size_t bf16 = 2;
  embed_ = Buffer(ops, s.vocab * s.hidden * bf16);
  if (!spec_.tie_word_embeddings) lm_head_ = Buffer(ops, s.vocab * s.hidden * bf16);
  final_norm_ = Buffer(ops, s.hidden * sizeof(float));
  inv_freq_ = Buffer(ops, s.head_dim / 2 * sizeof(double));
  bool ok = embed_.ok() && lm_head_.ok() && final_norm_.ok() && inv_freq_.ok();
  layers_.resize(spec_.num_layers);
  for (LayerBuffers& l : layers_) {
    l.attn_norm = Buffer(ops, s.hidden * sizeof(float));
    l.w_qkv = Buffer(ops, s.qkv_dim * s.hidden * bf16);
    l.wo = Buffer(ops, s.hidden * s.q_dim * bf16);
    l.mlp_norm = Buffer(ops, s.hidden * sizeof(float));
    l.w_gate_up = Buffer(ops, 2 * s.inter * s.hidden * bf16);
    l.w_down = Buffer(ops, s.hidden * s.inter * bf16);
    ok = ok && l.attn_norm.ok() && l.w_qkv.ok() && l.wo.ok() && l.mlp_norm.ok() &&
         l.w_gate_up.ok() && l.w_down.ok();
    weight_bytes_ += l.attn_norm.bytes() + l.w_qkv.bytes() + l.wo.bytes() + l.mlp_norm.bytes() +
                     l.w_gate_up.bytes() + l.w_down.bytes();
  }
  weight_bytes_ += embed_.bytes() + lm_head_.bytes() + final_norm_.bytes();
  if (!ok) {
    return error(ErrorCode::kResourceExhausted, "the weights (" +
                                                    std::to_string(weight_bytes_ >> 20) +
                                                    " MiB in bf16) do not fit in GPU memory");
  }
  const std::vector<double> inv_freq = spec_.rope_inv_freq();
  ops_->copy_to_device(inv_freq_.as(), inv_freq.data(), inv_freq.size() * sizeof(double));
  ops_->synchronize();
  return {};
}

void CudaDeviceImpl::upload(const ModelWeights& w) {
  // Rounded to bf16 on the host, one tensor (or fused pair) at a time.
  std::vector<std::uint16_t> bits;
  const auto put_bf16 = [&](const Buffer& dst,
                            std::initializer_list<const std::vector<float>*> parts) {
    bits.clear();
    for (const std::vector<float>* part : parts) {
      for (float v : *part) bits.push_back(k::to_bf16(v));
    }
    PG_CHECK(bits.size() * 2 == dst.bytes(), "weight tensor size");
    ops_->copy_to_device(dst.as(), bits.data(), dst.bytes());
    ops_->synchronize();
  };
  const auto put_f32 = [&](const Buffer& dst, const std::vector<float>& v) {
    PG_CHECK(v.size() * sizeof(float) == dst.bytes(), "norm size");
    ops_->copy_to_device(dst.as(), v.data(), dst.bytes());
    ops_->synchronize();
  };
  put_bf16(embed_, {&w.embed});
  if (!spec_.tie_word_embeddings) put_bf16(lm_head_, {&w.lm_head});
  put_f32(final_norm_, w.final_norm);
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const LayerWeights& lw = w.layers[i];
    LayerBuffers& l = layers_[i];
    put_f32(l.attn_norm, lw.attn_norm);
    put_bf16(l.w_qkv, {&lw.wq, &lw.wk, &lw.wv});
    put_bf16(l.wo, {&lw.wo});
    put_f32(l.mlp_norm, lw.mlp_norm);
    put_bf16(l.w_gate_up, {&lw.w_gate, &lw.w_up});
    put_bf16(l.w_down, {&lw.w_down});
  }
}

void CudaDeviceImpl::generate(std::uint64_t seed) {
  std::uint64_t stream = seed;
  const auto fill = [&](const Buffer& b, bool bf16, float scale, float offset) {
    const std::size_t count = b.bytes() / (bf16 ? 2 : 4);
    ops_->fill_random({.bf16_out = bf16 ? b.as<std::uint16_t>() : nullptr,
                       .f32_out = bf16 ? nullptr : b.as<float>(),
                       .count = count,
                       .seed = ++stream * 0x9E3779B97F4A7C15ull,
                       .scale = scale,
                       .offset = offset});
  };
  const auto linear_scale = [](std::size_t fan_in) {
    return static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in)));
  };
  fill(embed_, true, 1.0f, 0.0f);
  if (!spec_.tie_word_embeddings) fill(lm_head_, true, linear_scale(shapes_.hidden), 0.0f);
  fill(final_norm_, false, 0.1f, 1.0f);
  for (LayerBuffers& l : layers_) {
    fill(l.attn_norm, false, 0.1f, 1.0f);
    fill(l.w_qkv, true, linear_scale(shapes_.hidden), 0.0f);
    fill(l.wo, true, linear_scale(shapes_.q_dim), 0.0f);
    fill(l.mlp_norm, false, 0.1f, 1.0f);
    fill(l.w_gate_up, true, linear_scale(shapes_.hidden), 0.0f);
    fill(l.w_down, true, linear_scale(shapes_.inter), 0.0f);
  }
  ops_->synchronize();
}

Status CudaDeviceImpl::reserve(std::size_t tokens, std::size_t seqs) {
  if (tokens <= capacity_tokens_ && seqs <= capacity_seqs_) return {};
  tokens = std::max(tokens, capacity_tokens_);
  seqs = std::max(seqs, capacity_seqs_);
  const Shapes& s = shapes_;
  k::Ops* ops = ops_.get();
  x_ = Buffer(ops, tokens * s.hidden * sizeof(float));
  proj_ = Buffer(ops, tokens * s.hidden * sizeof(float));
  h_ = Buffer(ops, tokens * s.hidden * 2);
  qkv_ = Buffer(ops, tokens * s.qkv_dim * 2);
  attn_ = Buffer(ops, tokens * s.q_dim * 2);
  gate_up_ = Buffer(ops, tokens * 2 * s.inter * 2);
  act_ = Buffer(ops, tokens * s.inter * 2);
  cos_ = Buffer(ops, tokens * s.head_dim / 2 * sizeof(float));
  sin_ = Buffer(ops, tokens * s.head_dim / 2 * sizeof(float));
  last_ = Buffer(ops, seqs * s.hidden * 2);
  logits_ = Buffer(ops, seqs * s.vocab * sizeof(float));
  sampled_ = Buffer(ops, seqs * sizeof(std::int32_t));
  const bool ok = x_.ok() && proj_.ok() && h_.ok() && qkv_.ok() && attn_.ok() && gate_up_.ok() &&
                  act_.ok() && cos_.ok() && sin_.ok() && last_.ok() && logits_.ok() &&
                  sampled_.ok();
  if (!ok) {
    return error(ErrorCode::kResourceExhausted, "activation buffers for " + std::to_string(tokens) +
                                                    " tokens per step do not fit in GPU memory");
  }
  capacity_tokens_ = tokens;
  capacity_seqs_ = seqs;
  return {};
}

k::KvCacheView CudaDeviceImpl::layer_view(std::size_t layer) const {
  const std::size_t rows_per_layer = 2 * shapes_.kv_heads * page_tokens_;
  const std::size_t element_bytes = options_.kv_dtype == k::KvDtype::kBf16 ? 2 : 1;
  k::KvCacheView v;
  v.data = kv_.as<std::uint8_t>() + layer * rows_per_layer * shapes_.head_dim * element_bytes;
  v.scales = options_.kv_dtype == k::KvDtype::kFp8E4m3
                 ? kv_scales_.as<float>() + layer * rows_per_layer
                 : nullptr;
  v.dtype = options_.kv_dtype;
  v.page_stride = static_cast<std::int64_t>(spec_.num_layers * rows_per_layer * shapes_.head_dim);
  v.scale_page_stride = static_cast<std::int64_t>(spec_.num_layers * rows_per_layer);
  v.page_tokens = static_cast<int>(page_tokens_);
  v.num_kv_heads = static_cast<int>(shapes_.kv_heads);
  v.head_dim = static_cast<int>(shapes_.head_dim);
  return v;
}

void CudaDeviceImpl::stage(std::span<const SequenceStep> batch, const StepLayout& l) {
  if (l.bytes > staging_bytes_) {
    if (staging_ != nullptr) ops_->free_host(staging_);
    staging_bytes_ = std::max(l.bytes, 2 * staging_bytes_);
    staging_ = ops_->alloc_host(staging_bytes_);
    PG_CHECK(staging_ != nullptr, "pinned host memory for the step's metadata");
    meta_ = Buffer(ops_.get(), staging_bytes_);
    PG_CHECK(meta_.ok(), "device memory for the step's metadata");
  }
  write_step(batch, page_tokens_, l, static_cast<std::uint8_t*>(staging_));
  ops_->copy_to_device(meta_.as(), staging_, l.bytes);
}

StepOutput CudaDeviceImpl::execute(std::span<const SequenceStep> batch) {
  check_batch(
      "cuda device", batch,
      {.vocab_size = spec_.vocab_size, .num_pages = num_pages_, .page_tokens = page_tokens_});
  const StepLayout l =
      plan_step(batch, page_tokens_, std::max<std::size_t>(1, options_.decode_width_quantum_pages));
  const std::size_t total = l.tokens;
  const std::size_t capacity_before = capacity_tokens_ + capacity_seqs_;
  const Status reserved = reserve(total, batch.size());
  // The buffers were sized for max_batch_tokens at start: more is a scheduler bug.
  PG_CHECK(reserved.ok(), reserved.ok() ? std::string() : reserved.error().message);
  const void* meta_before = meta_.as();
  stage(batch, l);
  const Shapes& s = shapes_;

  // Decode attention's split plan and workspace, the same for every layer. From the padded
  // table width rather than the exact context, so that it changes (and a decode graph with
  // it) only every decode_width_quantum_pages pages.
  int splits = 1;
  if (l.decodes > 0) {
    splits = k::decode_attention_splits(static_cast<int>(l.decodes), static_cast<int>(s.kv_heads),
                                        static_cast<int>(l.decode_width * page_tokens_),
                                        ops_->multiprocessor_count());
    const std::size_t bytes =
        k::decode_attention_workspace_bytes(static_cast<int>(l.decodes), static_cast<int>(s.heads),
                                            static_cast<int>(s.head_dim), splits);
    if (bytes > workspace_.bytes()) {
      release_graphs();
      workspace_ = Buffer(ops_.get(), std::max(bytes, 2 * workspace_.bytes()));
      PG_CHECK(workspace_.ok(), "device memory for decode attention's workspace");
    }
  }
  // Graphs hold pointers: buffers that moved invalidate them.
  if (meta_.as() != meta_before || capacity_tokens_ + capacity_seqs_ != capacity_before) {
    release_graphs();
  }

  if (options_.cuda_graphs && l.prefills == 0 && l.decodes > 0) {
    // A decode step: the same kernels with the same parameters for every step of this shape,
    // replayed from a graph; the step's tokens, positions and pages travel in meta_.
    const GraphKey key{l.decodes, l.decode_width, l.sampled, splits};
    auto it = graphs_.find(key);
    if (it == graphs_.end()) {
      if (graphs_.size() >= kMaxGraphs) release_graphs();
      int graph = -1;
      if (ops_->begin_capture()) {
        forward(l, total, splits);
        graph = ops_->end_capture();
      }
      if (graph < 0) {
        options_.cuda_graphs = false;  // the runtime refused: run every step directly
        forward(l, total, splits);
        return finish(batch, l);
      }
      it = graphs_.emplace(key, graph).first;
    }
    ops_->replay(it->second);
  } else {
    forward(l, total, splits);
  }
  return finish(batch, l);
}

void CudaDeviceImpl::release_graphs() {
  for (const auto& [key, graph] : graphs_) ops_->release_graph(graph);
  graphs_.clear();
}

void CudaDeviceImpl::forward(const StepLayout& l, std::size_t total, int splits) {
  const Shapes& s = shapes_;
  auto* meta = meta_.as<std::uint8_t>();
  const auto i32 = [&](std::size_t offset) {
    return reinterpret_cast<const std::int32_t*>(meta + offset);
  };
  const int rows = static_cast<int>(total);
  const int hidden = static_cast<int>(s.hidden);
  const auto eps = static_cast<float>(spec_.rms_norm_eps);
  const float softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));

  ops_->embedding({.token_ids = i32(l.token_ids),
                   .table = embed_.as<std::uint16_t>(),
                   .out = x_.as<float>(),
                   .num_tokens = rows,
                   .hidden = hidden});
  ops_->rope_table({.positions = i32(l.positions),
                    .inv_freq = inv_freq_.as<double>(),
                    .cos = cos_.as<float>(),
                    .sin = sin_.as<float>(),
                    .num_tokens = rows,
                    .half_dim = static_cast<int>(s.head_dim / 2)});

  for (std::size_t layer = 0; layer < layers_.size(); ++layer) {
    const LayerBuffers& lw = layers_[layer];
    const k::KvCacheView view = layer_view(layer);
    // Attention block. The previous layer's MLP output (proj) joins the residual here.
    ops_->rms_norm({.residual = x_.as<float>(),
                    .add = layer > 0 ? proj_.as<float>() : nullptr,
                    .weight = lw.attn_norm.as<float>(),
                    .out = h_.as<std::uint16_t>(),
                    .rows = rows,
                    .dim = hidden,
                    .eps = eps});
    gemm(h_, lw.w_qkv, qkv_.as(), false, total, s.hidden, s.qkv_dim);
    ops_->rope_kv_write({.qkv = qkv_.as<std::uint16_t>(),
                         .cos = cos_.as<float>(),
                         .sin = sin_.as<float>(),
                         .slots = reinterpret_cast<const std::int64_t*>(meta + l.slots),
                         .cache = view,
                         .num_tokens = rows,
                         .num_heads = static_cast<int>(s.heads)});
    if (l.decodes > 0) {
      ops_->decode_attention({.q = qkv_.as<std::uint16_t>(),
                              .q_row_stride = static_cast<std::int64_t>(s.qkv_dim),
                              .out = attn_.as<std::uint16_t>(),
                              .out_row_stride = static_cast<std::int64_t>(s.q_dim),
                              .q_rows = i32(l.d_rows),
                              .context_lens = i32(l.d_lens),
                              .page_table = i32(l.d_table),
                              .page_table_stride = static_cast<int>(l.decode_width),
                              .num_seqs = static_cast<int>(l.decodes),
                              .num_heads = static_cast<int>(s.heads),
                              .cache = view,
                              .softmax_scale = softmax_scale,
                              .num_splits = splits,
                              .workspace = workspace_.as()});
    }
    if (l.prefills > 0) {
      ops_->prefill_attention({.q = qkv_.as<std::uint16_t>(),
                               .q_row_stride = static_cast<std::int64_t>(s.qkv_dim),
                               .out = attn_.as<std::uint16_t>(),
                               .out_row_stride = static_cast<std::int64_t>(s.q_dim),
                               .tiles = i32(l.p_tiles),
                               .q_start_rows = i32(l.p_start),
                               .num_new = i32(l.p_new),
                               .start_positions = i32(l.p_pos),
                               .page_table = i32(l.p_table),
                               .page_table_stride = static_cast<int>(l.prefill_width),
                               .num_tiles = static_cast<int>(l.tiles),
                               .num_heads = static_cast<int>(s.heads),
                               .cache = view,
                               .softmax_scale = softmax_scale});
    }
    gemm(attn_, lw.wo, proj_.as(), true, total, s.q_dim, s.hidden);
    // MLP block.
    ops_->rms_norm({.residual = x_.as<float>(),
                    .add = proj_.as<float>(),
                    .weight = lw.mlp_norm.as<float>(),
                    .out = h_.as<std::uint16_t>(),
                    .rows = rows,
                    .dim = hidden,
                    .eps = eps});
    gemm(h_, lw.w_gate_up, gate_up_.as(), false, total, s.hidden, 2 * s.inter);
    ops_->silu_mul({.gate_up = gate_up_.as<std::uint16_t>(),
                    .out = act_.as<std::uint16_t>(),
                    .rows = rows,
                    .inter = static_cast<int>(s.inter)});
    gemm(act_, lw.w_down, proj_.as(), true, total, s.inter, s.hidden);
  }

  if (l.sampled == 0) return;
  // The last MLP output joins the residual of the sampled rows only, then the final norm.
  ops_->rms_norm({.residual = x_.as<float>(),
                  .add = proj_.as<float>(),
                  .weight = final_norm_.as<float>(),
                  .out = last_.as<std::uint16_t>(),
                  .rows_index = i32(l.sample_rows),
                  .rows = static_cast<int>(l.sampled),
                  .dim = hidden,
                  .eps = eps});
  const Buffer& head = spec_.tie_word_embeddings ? embed_ : lm_head_;
  gemm(last_, head, logits_.as(), true, l.sampled, s.hidden, s.vocab);
  ops_->argmax({.logits = logits_.as<float>(),
                .out = sampled_.as<std::int32_t>(),
                .rows = static_cast<int>(l.sampled),
                .vocab = static_cast<int>(s.vocab)});
}

StepOutput CudaDeviceImpl::finish(std::span<const SequenceStep> batch, const StepLayout& l) {
  const Shapes& s = shapes_;
  StepOutput output;
  output.tokens.assign(batch.size(), 0);
  if (l.sampled == 0) {
    ops_->synchronize();  // the staging area is reused by the next step
    return output;
  }
  host_tokens_.resize(l.sampled);
  ops_->copy_to_host(host_tokens_.data(), sampled_.as(), l.sampled * sizeof(std::int32_t));
  if (options_.return_logits) {
    output.logits.resize(l.sampled * s.vocab);
    ops_->copy_to_host(output.logits.data(), logits_.as(), output.logits.size() * sizeof(float));
  }
  std::vector<float> row_logits;
  std::size_t sampled_index = 0;
  for (std::size_t b = 0; b < batch.size(); ++b) {
    const SequenceStep& step = batch[b];
    if (!step.sample) continue;
    const SamplingParams& params = *step.sampling;
    const bool greedy = !(params.temperature > 0.0) || params.top_k == 1;
    if (greedy) {
      output.tokens[b] = static_cast<canon::TokenId>(host_tokens_[sampled_index]);
    } else if (options_.return_logits) {
      output.tokens[b] = sample_token(
          std::span<const float>(output.logits).subspan(sampled_index * s.vocab, s.vocab), params,
          step.sample_step);
    } else {
      row_logits.resize(s.vocab);
      ops_->copy_to_host(row_logits.data(), logits_.as<float>() + sampled_index * s.vocab,
                         s.vocab * sizeof(float));
      output.tokens[b] = sample_token(row_logits, params, step.sample_step);
    }
    ++sampled_index;
  }
  return output;
}

// Checks before any memory is taken: the kernels' supported shapes.
Status check_shape(const ModelSpec& spec) {
  const char* why = k::unsupported_attention_shape(
      static_cast<int>(spec.head_dim), static_cast<int>(spec.num_heads / spec.num_kv_heads));
  if (why != nullptr)
    return error(ErrorCode::kUnsupported,
                 std::string("the cuda device cannot run ") + spec.id + ": " + why);
  return {};
}

Result<std::unique_ptr<CudaDevice>> finish(std::unique_ptr<CudaDeviceImpl> device,
                                           const CudaDeviceOptions& options) {
  const Status reserved = device->reserve(std::max<std::size_t>(1, options.max_batch_tokens),
                                          std::max<std::size_t>(1, options.max_seqs));
  if (!reserved.ok()) return reserved.error();
  return std::unique_ptr<CudaDevice>(std::move(device));
}

}  // namespace

Result<std::unique_ptr<CudaDevice>> make_cuda_device(const Model& model,
                                                     std::unique_ptr<k::Ops> ops,
                                                     const CudaDeviceOptions& options) {
  if (model.weights == nullptr) return error(ErrorCode::kInternal, "the model has no weights");
  if (const Status shape = check_shape(model.spec); !shape.ok()) return shape.error();
  auto device = std::make_unique<CudaDeviceImpl>(model.spec, std::move(ops), options);
  if (const Status allocated = device->allocate_weights(); !allocated.ok()) {
    return allocated.error();
  }
  device->upload(*model.weights);
  return finish(std::move(device), options);
}

Result<std::unique_ptr<CudaDevice>> make_generated_cuda_device(const ModelSpec& spec,
                                                               std::uint64_t seed,
                                                               std::unique_ptr<k::Ops> ops,
                                                               const CudaDeviceOptions& options) {
  if (const Status shape = check_shape(spec); !shape.ok()) return shape.error();
  auto device = std::make_unique<CudaDeviceImpl>(spec, std::move(ops), options);
  if (const Status allocated = device->allocate_weights(); !allocated.ok()) {
    return allocated.error();
  }
  device->generate(seed);
  return finish(std::move(device), options);
}

std::size_t kv_pages_for_utilization(std::size_t free_bytes, double fraction,
                                     std::size_t page_bytes) {
  if (page_bytes == 0 || !(fraction > 0.0)) return 0;
  const double budget = static_cast<double>(free_bytes) * std::min(fraction, 1.0);
  return static_cast<std::size_t>(budget / static_cast<double>(page_bytes));
}

}  // namespace prefixgate::engine
