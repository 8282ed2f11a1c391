// The Ops a kernel or cuda-device test runs on. The same test sources build twice:
// kernels_emu_tests / cuda_device_emu_tests (the CPU emulator; ctest label unit, run in CI) and
// kernels_gpu_tests / cuda_device_gpu_tests (a real GPU, PREFIXGATE_TEST_GPU; label gpu), which
// skip with the CUDA runtime's reason where there is no GPU.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "prefixgate/kernels/ops.h"

namespace prefixgate::kernels::testing {

inline Ops* test_ops(std::string& why_not) {
#if defined(PREFIXGATE_TEST_GPU)
  static OpsResult result = make_cuda_ops();
  if (!result.ok) why_not = result.error;
  return result.ops.get();
#else
  static std::unique_ptr<Ops> ops = make_emu_ops();
  why_not.clear();
  return ops.get();
#endif
}

// Device memory holding a vector's worth of T, freed with the buffer.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer(Ops& ops, std::size_t count) : ops_(&ops), count_(count) {
    ptr_ = static_cast<T*>(ops.alloc(std::max<std::size_t>(1, count) * sizeof(T)));
    if (ptr_ == nullptr) std::abort();
    ops.fill_zero(ptr_, std::max<std::size_t>(1, count) * sizeof(T));
  }
  DeviceBuffer(Ops& ops, const std::vector<T>& values) : DeviceBuffer(ops, values.size()) {
    ops.copy_to_device(ptr_, values.data(), values.size() * sizeof(T));
    ops.synchronize();
  }
  ~DeviceBuffer() { ops_->free(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return ptr_; }
  std::vector<T> read() const {
    std::vector<T> out(count_);
    ops_->copy_to_host(out.data(), ptr_, count_ * sizeof(T));
    return out;
  }

 private:
  Ops* ops_;
  std::size_t count_;
  T* ptr_;
};

}  // namespace prefixgate::kernels::testing

// Binds `ops` to the test's Ops, or skips the test (GPU builds without a usable GPU).
#define PREFIXGATE_OPS_OR_SKIP(ops)                                                                \
  std::string ops##_why_not;                                                                       \
  ::prefixgate::kernels::Ops* ops##_ptr = ::prefixgate::kernels::testing::test_ops(ops##_why_not); \
  if (ops##_ptr == nullptr) GTEST_SKIP() << "no GPU to run on: " << ops##_why_not;                 \
  ::prefixgate::kernels::Ops& ops = *ops##_ptr
