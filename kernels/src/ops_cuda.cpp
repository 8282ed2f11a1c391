// CudaOps: Ops on an NVIDIA GPU. One non-blocking stream carries every copy, kernel and GEMM in
// order; memory is plain cudaMalloc (never managed memory); GEMMs go through cuBLASLt in bf16
// with fp32 accumulation, the algorithm chosen once per shape by cuBLASLt's heuristic.
//
// Errors: a failing CUDA call after start-up is a broken invariant or a dead GPU, not bad
// input, so it aborts with the runtime's message rather than serve wrong tokens.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "launchers.h"
#include "prefixgate/base/check.h"
#include "prefixgate/kernels/ops.h"

namespace prefixgate::kernels {
namespace {

// A failing CUDA or cuBLASLt call after start-up, as a broken invariant with the library's words.
void check(cudaError_t status, const char* what) {
  PG_CHECK(status == cudaSuccess, std::string("cuda: ") + what + ": " + cudaGetErrorString(status));
}
void check(cublasStatus_t status, const char* what) {
  PG_CHECK(status == CUBLAS_STATUS_SUCCESS, std::string("cublasLt: ") + what + ": status " +
                                                std::to_string(static_cast<int>(status)));
}

constexpr std::size_t kGemmWorkspaceBytes = 32u << 20;

class CudaOps final : public Ops {
 public:
  CudaOps(int device, const cudaDeviceProp& prop) : device_(device), prop_(prop) {
    bind();
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cublasLtCreate(&lt_), "cublasLtCreate");
    check(cudaMalloc(&gemm_workspace_, kGemmWorkspaceBytes), "cudaMalloc(gemm workspace)");
  }
  ~CudaOps() override {
    for (auto& [id, exec] : graphs_) cudaGraphExecDestroy(exec);
    for (auto& [key, plan] : plans_) destroy(plan);
    cudaFree(gemm_workspace_);
    cublasLtDestroy(lt_);
    cudaStreamDestroy(stream_);
  }
  CudaOps(const CudaOps&) = delete;
  CudaOps& operator=(const CudaOps&) = delete;

  std::string name() const override {
    return std::string(prop_.name) + " (sm_" + std::to_string(prop_.major) +
           std::to_string(prop_.minor) + ", " + std::to_string(prop_.multiProcessorCount) + " SMs)";
  }
  bool is_gpu() const override { return true; }
  int multiprocessor_count() const override { return prop_.multiProcessorCount; }
  MemoryInfo memory_info() const override {
    bind();
    MemoryInfo info;
    check(cudaMemGetInfo(&info.free_bytes, &info.total_bytes), "cudaMemGetInfo");
    return info;
  }

  void* alloc(std::size_t bytes) override {
    bind();
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free out-of-memory error
      return nullptr;
    }
    return p;
  }
  void free(void* ptr) override { check(cudaFree(ptr), "cudaFree"); }
  void* alloc_host(std::size_t bytes) override {
    bind();
    void* p = nullptr;
    if (cudaMallocHost(&p, bytes) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return p;
  }
  void free_host(void* ptr) override { check(cudaFreeHost(ptr), "cudaFreeHost"); }
  void copy_to_device(void* dst, const void* src, std::size_t bytes) override {
    bind();
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "copy to device");
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    bind();
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "copy to host");
    check(cudaStreamSynchronize(stream_), "copy to host");
  }
  void copy_on_device(void* dst, const void* src, std::size_t bytes) override {
    bind();
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "copy on device");
  }
  void fill_zero(void* dst, std::size_t bytes) override {
    bind();
    check(cudaMemsetAsync(dst, 0, bytes, stream_), "memset");
  }
  void synchronize() override {
    bind();
    check(cudaStreamSynchronize(stream_), "synchronize");
  }

  void embedding(const EmbeddingParams& p) override { launch(cuda::embedding, p, "embedding"); }
  void rms_norm(const RmsNormParams& p) override { launch(cuda::rms_norm, p, "rms_norm"); }
  void silu_mul(const SiluMulParams& p) override { launch(cuda::silu_mul, p, "silu_mul"); }
  void rope_table(const RopeTableParams& p) override { launch(cuda::rope_table, p, "rope_table"); }
  void rope_kv_write(const RopeKvParams& p) override {
    launch(cuda::rope_kv_write, p, "rope_kv_write");
  }
  void decode_attention(const DecodeAttentionParams& p) override {
    launch(cuda::decode_attention, p, "decode_attention");
  }
  void prefill_attention(const PrefillAttentionParams& p) override {
    launch(cuda::prefill_attention, p, "prefill_attention");
  }
  void argmax(const ArgmaxParams& p) override { launch(cuda::argmax, p, "argmax"); }
  void fill_random(const FillRandomParams& p) override {
    launch(cuda::fill_random, p, "fill_random");
  }

  // Row-major y[rows, out] = x[rows, in] W[out, in]^T is column-major
  // y^T[out, rows] = W^T... : with A = W (column-major [in, out], transposed) and B = x
  // (column-major [in, rows]), D = op(A) B with op = T: m = out, n = rows, k = in.
  void gemm(const GemmParams& p) override {
    bind();
    if (p.rows == 0 || p.out == 0) return;
    Plan& plan = plan_for(p);
    const float alpha = 1.0f;
    const float beta = 0.0f;
    check(cublasLtMatmul(lt_, plan.op, &alpha, p.w, plan.a, p.x, plan.b, &beta, p.y, plan.d, p.y,
                         plan.d, plan.has_algo ? &plan.algo : nullptr, gemm_workspace_,
                         kGemmWorkspaceBytes, stream_),
          "cublasLtMatmul");
  }

  bool begin_capture() override {
    bind();
    if (cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return true;
  }
  int end_capture() override {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    const bool ok = ended == cudaSuccess && graph != nullptr &&
                    cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (!ok) {
      std::fprintf(stderr, "cuda: graph capture failed (%s); running without graphs\n",
                   cudaGetErrorString(cudaGetLastError()));
      return -1;
    }
    graphs_.emplace(next_graph_, exec);
    return next_graph_++;
  }
  void replay(int graph) override {
    bind();
    check(cudaGraphLaunch(graphs_.at(graph), stream_), "cudaGraphLaunch");
  }
  void release_graph(int graph) override {
    auto it = graphs_.find(graph);
    if (it == graphs_.end()) return;
    cudaGraphExecDestroy(it->second);
    graphs_.erase(it);
  }

  double time_ms(const std::function<void()>& work) override {
    bind();
    cudaEvent_t start;
    cudaEvent_t stop;
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
    check(cudaEventRecord(start, stream_), "cudaEventRecord");
    work();
    check(cudaEventRecord(stop, stream_), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return ms;
  }

 private:
  // The current device is per host thread: the engine creates the device on its main thread and
  // steps it on the engine thread, so every entry point makes sure it talks to device_.
  void bind() const {
    thread_local int bound = -1;
    if (bound != device_) {
      check(cudaSetDevice(device_), "cudaSetDevice");
      bound = device_;
    }
  }

  // A kernel launch on the stream; launch errors (a bad configuration) show only through
  // cudaGetLastError.
  template <class Params>
  void launch(void (*launcher)(const Params&, void*), const Params& p, const char* kernel) {
    bind();
    launcher(p, stream_);
    check(cudaGetLastError(), kernel);
  }

  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr;
    cublasLtMatrixLayout_t b = nullptr;
    cublasLtMatrixLayout_t d = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool has_algo = false;
  };

  static void destroy(Plan& plan) {
    cublasLtMatrixLayoutDestroy(plan.a);
    cublasLtMatrixLayoutDestroy(plan.b);
    cublasLtMatrixLayoutDestroy(plan.d);
    cublasLtMatmulDescDestroy(plan.op);
  }

  Plan& plan_for(const GemmParams& p) {
    const auto key = std::make_tuple(p.rows, p.in, p.out, p.y_fp32);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    Plan plan;
    check(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc");
    const cublasOperation_t transpose = CUBLAS_OP_T;
    check(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose,
                                         sizeof(transpose)),
          "matmul transa");
    const auto m = static_cast<std::uint64_t>(p.out);
    const auto n = static_cast<std::uint64_t>(p.rows);
    const auto k = static_cast<std::uint64_t>(p.in);
    check(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_16BF, k, m, static_cast<std::int64_t>(k)),
          "layout a");
    check(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_16BF, k, n, static_cast<std::int64_t>(k)),
          "layout b");
    check(cublasLtMatrixLayoutCreate(&plan.d, p.y_fp32 ? CUDA_R_32F : CUDA_R_16BF, m, n,
                                     static_cast<std::int64_t>(m)),
          "layout d");
    cublasLtMatmulPreference_t preference = nullptr;
    check(cublasLtMatmulPreferenceCreate(&preference), "preference");
    const std::size_t workspace = kGemmWorkspaceBytes;
    check(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                               &workspace, sizeof(workspace)),
          "preference workspace");
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    check(cublasLtMatmulAlgoGetHeuristic(lt_, plan.op, plan.a, plan.b, plan.d, plan.d, preference,
                                         1, &result, &found),
          "heuristic");
    cublasLtMatmulPreferenceDestroy(preference);
    if (found > 0) {
      plan.algo = result.algo;
      plan.has_algo = true;
    }
    return plans_.emplace(key, plan).first->second;
  }

  int device_;
  cudaDeviceProp prop_;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* gemm_workspace_ = nullptr;
  std::map<std::tuple<int, int, int, bool>, Plan> plans_;
  std::map<int, cudaGraphExec_t> graphs_;
  int next_graph_ = 0;
};

}  // namespace

bool built_with_cuda() {
  return true;
}

OpsResult make_cuda_ops(int device) {
  OpsResult result;
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver) {
    // What a machine without an NVIDIA GPU, or without its driver, reports.
    result.error = "no NVIDIA GPU with a driver for CUDA " + std::to_string(CUDART_VERSION / 1000) +
                   " on this machine (" + cudaGetErrorString(status) + ")";
    return result;
  }
  if (status != cudaSuccess) {
    result.error = std::string("no usable CUDA device: ") + cudaGetErrorString(status);
    return result;
  }
  if (device < 0 || device >= count) {
    result.error = "CUDA device " + std::to_string(device) + " does not exist (" +
                   std::to_string(count) + " found)";
    return result;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    result.error = "cannot read CUDA device " + std::to_string(device) + "'s properties";
    return result;
  }
  if (prop.major < 8) {
    result.error = std::string(prop.name) + " is compute capability " + std::to_string(prop.major) +
                   "." + std::to_string(prop.minor) + "; the kernels need 8.0 or newer (bf16)";
    return result;
  }
  result.ops = std::make_unique<CudaOps>(device, prop);
  result.ok = true;
  return result;
}

}  // namespace prefixgate::kernels
