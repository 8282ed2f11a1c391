// Parameters of the cuda device's kernels: plain structs of device pointers and shapes, one per
// kernel, shared by the CUDA build, the CPU emulator build and the CPU references in tests.
//
// Conventions: row-major tensors; bf16 values travel as their 16 bits (std::uint16_t) so that
// host code needs no CUDA header; fp8 KV values are e4m3 bytes with one fp32 scale per (token,
// KV head, K or V). Shapes are in the comments: T tokens in the step, H query heads, G KV heads,
// D head_dim, P tokens per page.
//
//   kernels::RmsNormParams p{.residual = x, .add = proj, .weight = w, .out = h,
//                            .rows = T, .dim = hidden, .eps = 1e-5f};
//   ops.rms_norm(p);   // ops.h
#pragma once

#include <cstddef>
#include <cstdint>

namespace prefixgate::kernels {

enum class KvDtype { kBf16, kFp8E4m3 };

// The largest finite e4m3 value: a K/V row's scale maps its largest magnitude here.
inline constexpr float kFp8E4m3Max = 448.0f;

// One layer's view of the paged KV pool. The pool is page-major: a page holds every layer's K
// and V for P consecutive positions, so `data` points at this layer's part of page 0:
//   K of (page p, head g, slot s): data + p * page_stride + (g * P + s) * D
//   V of (page p, head g, slot s): data + p * page_stride + ((G + g) * P + s) * D
// so one head's K (or V) in a page is a single [P, D] block. Elements are bf16 (2 bytes) or
// e4m3 (1 byte), per `dtype`; with e4m3, the scales have the same layout without D:
//   scale of K at (p, g, s): scales + p * scale_page_stride + g * P + s; V: + (G + g) * P + s.
struct KvCacheView {
  void* data = nullptr;
  float* scales = nullptr;  // e4m3 only
  KvDtype dtype = KvDtype::kBf16;
  std::int64_t page_stride = 0;        // elements
  std::int64_t scale_page_stride = 0;  // floats
  int page_tokens = 16;                // P
  int num_kv_heads = 0;                // G
  int head_dim = 0;                    // D
};

// out[t, :] = float(table[token_ids[t], :]).
struct EmbeddingParams {
  const std::int32_t* token_ids = nullptr;  // [T]
  const std::uint16_t* table = nullptr;     // [vocab, hidden] bf16
  float* out = nullptr;                     // [T, hidden] fp32
  int num_tokens = 0;
  int hidden = 0;
};

// The pre-norm of a transformer block, fused with the residual add before it:
//   if add: residual[r] += add[r]          (fp32, in place)
//   out[i] = bf16(residual[r] * rsqrt(mean(residual[r]^2) + eps) * weight)
// with r = rows_index ? rows_index[i] : i (the final norm reads only the sampled rows; `add`
// is indexed by r too).
struct RmsNormParams {
  float* residual = nullptr;                 // [rows or more, dim] fp32
  const float* add = nullptr;                // [rows, dim] fp32, or null
  const float* weight = nullptr;             // [dim] fp32
  std::uint16_t* out = nullptr;              // [rows, dim] bf16
  const std::int32_t* rows_index = nullptr;  // [rows], or null
  int rows = 0;
  int dim = 0;
  float eps = 1e-5f;
};

// out = silu(gate) * up, with gate_up = [gate | up] from one fused GEMM.
struct SiluMulParams {
  const std::uint16_t* gate_up = nullptr;  // [rows, 2 * inter] bf16
  std::uint16_t* out = nullptr;            // [rows, inter] bf16
  int rows = 0;
  int inter = 0;
};

// cos/sin of position * inv_freq[j], angles in double (positions reach 10^5, where fp32 keeps
// only a few digits of the phase). Once per step; every layer reads the table.
struct RopeTableParams {
  const std::int32_t* positions = nullptr;  // [T]
  const double* inv_freq = nullptr;         // [D / 2]
  float* cos = nullptr;                     // [T, D / 2]
  float* sin = nullptr;                     // [T, D / 2]
  int num_tokens = 0;
  int half_dim = 0;
};

// Rotary embedding of q and k (rotate-half pairs (i, i + D/2), as Hugging Face's Llama), fused
// with writing the new k (after RoPE) and v into their KV pages:
//   qkv[t] = [q: H * D | k: G * D | v: G * D]; q is rotated in place; k and v go to
//   cache slot slots[t] = page * P + slot_in_page.
struct RopeKvParams {
  std::uint16_t* qkv = nullptr;         // [T, (H + 2G) * D] bf16
  const float* cos = nullptr;           // [T, D / 2]
  const float* sin = nullptr;           // [T, D / 2]
  const std::int64_t* slots = nullptr;  // [T]
  KvCacheView cache;
  int num_tokens = 0;
  int num_heads = 0;  // H
};

// Attention of one new query token per sequence over its whole paged context (flash-decoding:
// the context splits into num_splits ranges, one thread block each per KV head, merged by
// log-sum-exp). The query heads that share a KV head read its pages once.
//   q of seq b, head h: q + q_rows[b] * q_row_stride + h * D; out likewise.
//   keys of seq b: positions [0, context_lens[b]), page i = page_table[b * stride + i].
struct DecodeAttentionParams {
  const std::uint16_t* q = nullptr;  // bf16
  std::int64_t q_row_stride = 0;     // elements
  std::uint16_t* out = nullptr;      // bf16
  std::int64_t out_row_stride = 0;
  const std::int32_t* q_rows = nullptr;        // [B]
  const std::int32_t* context_lens = nullptr;  // [B]
  const std::int32_t* page_table = nullptr;    // [B, page_table_stride]
  int page_table_stride = 0;
  int num_seqs = 0;   // B
  int num_heads = 0;  // H; H / G must be 1, 2, 4 or 8
  KvCacheView cache;
  float softmax_scale = 0;
  int num_splits = 1;  // 1 to 64; see decode_attention_splits()
  // Partial results when num_splits > 1: decode_attention_workspace_bytes() bytes.
  void* workspace = nullptr;
};

// Splits that fill one wave of blocks (`waves` blocks per multiprocessor, what the decode
// kernel's registers let run at once) and no more, each split at least `min_split_tokens` keys
// long, at most 64.
int decode_attention_splits(int num_seqs, int num_kv_heads, int max_context_len,
                            int multiprocessors, int min_split_tokens = 128, int waves = 4);
// Null when the attention kernels support (head_dim, query heads per KV head), else why not.
const char* unsupported_attention_shape(int head_dim, int group);
std::size_t decode_attention_workspace_bytes(int num_seqs, int num_heads, int head_dim,
                                             int num_splits);

// Causal attention of a chunk of new tokens per sequence over its cached prefix plus the chunk
// itself (their K/V already written by rope_kv_write), tiled over keys with an online softmax.
// Sequence s's new token i sits at position start_positions[s] + i, reads q row
// q_start_rows[s] + i, and sees keys [0, start_positions[s] + i]. The work is a list of tiles
// of kPrefillQueryTile query tokens: tiles[2k] = s, tiles[2k + 1] = first token i of the tile.
inline constexpr int kPrefillQueryTile = 64;
struct PrefillAttentionParams {
  const std::uint16_t* q = nullptr;
  std::int64_t q_row_stride = 0;
  std::uint16_t* out = nullptr;
  std::int64_t out_row_stride = 0;
  const std::int32_t* tiles = nullptr;            // [num_tiles, 2]
  const std::int32_t* q_start_rows = nullptr;     // [S]
  const std::int32_t* num_new = nullptr;          // [S]
  const std::int32_t* start_positions = nullptr;  // [S]
  const std::int32_t* page_table = nullptr;       // [S, page_table_stride]
  int page_table_stride = 0;
  int num_tiles = 0;
  int num_heads = 0;
  KvCacheView cache;
  float softmax_scale = 0;
};

// out[r] = the index of the largest logit of row r; the lowest index on ties; NaN never wins
// (the same rule as the host sampler's greedy path).
struct ArgmaxParams {
  const float* logits = nullptr;  // [rows, vocab]
  std::int32_t* out = nullptr;    // [rows]
  int rows = 0;
  int vocab = 0;
};

// out[i] = offset + scale * u(seed, i), u uniform in [-1, 1) from a counter-based hash:
// generated weights for benchmarks, made on the device (8B parameters would take minutes to
// generate on the host and to copy).
struct FillRandomParams {
  std::uint16_t* bf16_out = nullptr;  // one of the two
  float* f32_out = nullptr;
  std::size_t count = 0;
  std::uint64_t seed = 0;
  float scale = 1;
  float offset = 0;
};
float fill_random_value(std::uint64_t seed, std::size_t index, float scale, float offset);

// y = x W^T with bf16 inputs and fp32 accumulation (cuBLASLt on the GPU):
//   x: [rows, in] bf16, w: [out, in] bf16 (PyTorch's Linear layout), y: [rows, out] in bf16 or
//   fp32 (y_fp32).
struct GemmParams {
  const std::uint16_t* x = nullptr;
  const std::uint16_t* w = nullptr;
  void* y = nullptr;
  bool y_fp32 = false;
  int rows = 0;
  int in = 0;
  int out = 0;
};

// bf16 <-> fp32 on the host, round-to-nearest-even (the GPU's __float2bfloat16).
std::uint16_t to_bf16(float value);
float from_bf16(std::uint16_t bits);
// e4m3 (OCP FP8, finite, saturating) <-> fp32 on the host, as the GPU's __nv_fp8_e4m3.
std::uint8_t to_fp8_e4m3(float value);
float from_fp8_e4m3(std::uint8_t bits);

}  // namespace prefixgate::kernels
