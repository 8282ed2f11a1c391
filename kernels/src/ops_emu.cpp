// EmuOps: Ops on the CPU. Device memory is host memory, kernels run in the CUDA emulator
// (emu/cuda_emu.h), and GEMMs are a plain fp32-accumulating loop over bf16 inputs, rounded like
// cuBLAS's output. Everything is synchronous.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "launchers.h"
#include "prefixgate/kernels/ops.h"

namespace prefixgate::kernels {
namespace {

class EmuOps final : public Ops {
 public:
  std::string name() const override { return "cuda emulator (cpu)"; }
  bool is_gpu() const override { return false; }
  // Small, so that decode_attention_splits() still splits the tests' short contexts.
  int multiprocessor_count() const override { return 4; }
  MemoryInfo memory_info() const override {
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    return {static_cast<std::size_t>(sysconf(_SC_AVPHYS_PAGES)) * page,
            static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) * page};
  }

  void* alloc(std::size_t bytes) override { return std::aligned_alloc(256, round_up(bytes)); }
  void free(void* ptr) override { std::free(ptr); }
  void* alloc_host(std::size_t bytes) override { return alloc(bytes); }
  void free_host(void* ptr) override { std::free(ptr); }
  void copy_to_device(void* dst, const void* src, std::size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  void copy_on_device(void* dst, const void* src, std::size_t bytes) override {
    if (bytes > 0) std::memmove(dst, src, bytes);
  }
  void fill_zero(void* dst, std::size_t bytes) override {
    if (bytes > 0) std::memset(dst, 0, bytes);
  }
  void synchronize() override {}

  void embedding(const EmbeddingParams& p) override {
    run([p] { emu::embedding(p, nullptr); });
  }
  void rms_norm(const RmsNormParams& p) override {
    run([p] { emu::rms_norm(p, nullptr); });
  }
  void silu_mul(const SiluMulParams& p) override {
    run([p] { emu::silu_mul(p, nullptr); });
  }
  void rope_table(const RopeTableParams& p) override {
    run([p] { emu::rope_table(p, nullptr); });
  }
  void rope_kv_write(const RopeKvParams& p) override {
    run([p] { emu::rope_kv_write(p, nullptr); });
  }
  void decode_attention(const DecodeAttentionParams& p) override {
    run([p] { emu::decode_attention(p, nullptr); });
  }
  void prefill_attention(const PrefillAttentionParams& p) override {
    run([p] { emu::prefill_attention(p, nullptr); });
  }
  void argmax(const ArgmaxParams& p) override {
    run([p] { emu::argmax(p, nullptr); });
  }
  void fill_random(const FillRandomParams& p) override {
    run([p] { emu::fill_random(p, nullptr); });
  }

  void gemm(const GemmParams& p) override {
    run([p] { reference_gemm(p); });
  }

  bool begin_capture() override {
    capturing_ = true;
    recording_.clear();
    return true;
  }
  int end_capture() override {
    capturing_ = false;
    graphs_.emplace(next_graph_, std::move(recording_));
    recording_.clear();
    return next_graph_++;
  }
  void replay(int graph) override {
    for (const auto& work : graphs_.at(graph)) work();
  }
  void release_graph(int graph) override { graphs_.erase(graph); }

  static void reference_gemm(const GemmParams& p) {
    for (int r = 0; r < p.rows; ++r) {
      const std::uint16_t* x = p.x + static_cast<std::ptrdiff_t>(r) * p.in;
      for (int o = 0; o < p.out; ++o) {
        const std::uint16_t* w = p.w + static_cast<std::ptrdiff_t>(o) * p.in;
        float sum = 0;
        for (int i = 0; i < p.in; ++i) sum += from_bf16(x[i]) * from_bf16(w[i]);
        const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(r) * p.out + o;
        if (p.y_fp32) {
          static_cast<float*>(p.y)[at] = sum;
        } else {
          static_cast<std::uint16_t*>(p.y)[at] = to_bf16(sum);
        }
      }
    }
  }

  // Runs `work` now, or records it while capturing (parameters by value, as a CUDA graph does).
  void run(std::function<void()> work) {
    if (capturing_) {
      recording_.push_back(std::move(work));
    } else {
      work();
    }
  }

  double time_ms(const std::function<void()>& work) override {
    const auto start = std::chrono::steady_clock::now();
    work();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  }

 private:
  bool capturing_ = false;
  std::vector<std::function<void()>> recording_;
  std::map<int, std::vector<std::function<void()>>> graphs_;
  int next_graph_ = 0;
  // aligned_alloc wants a multiple of the alignment.
  static std::size_t round_up(std::size_t bytes) {
    return (std::max<std::size_t>(bytes, 1) + 255) / 256 * 256;
  }
};

}  // namespace

std::unique_ptr<Ops> make_emu_ops() {
  return std::make_unique<EmuOps>();
}

}  // namespace prefixgate::kernels
