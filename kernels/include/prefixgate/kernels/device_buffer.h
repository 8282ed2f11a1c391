// Device memory that frees itself through the Ops that allocated it: the cuda device's weights,
// KV pool and activations, and the GPU benchmark's arrays.
//
//   kernels::DeviceBuffer x(ops, rows * hidden * sizeof(float));
//   if (!x.ok()) return out_of_memory();
//   ops->rms_norm({.residual = x.as<float>(), ...});
#pragma once

#include <cstddef>
#include <utility>

#include "prefixgate/kernels/ops.h"

namespace prefixgate::kernels {

// ok() is false when the allocation did not fit; a zero-byte buffer holds no memory.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Ops* ops, std::size_t bytes) : ops_(ops), bytes_(bytes) {
    ptr_ = bytes > 0 ? ops->alloc(bytes) : nullptr;
  }
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      ops_ = other.ops_;
      ptr_ = other.ptr_;
      bytes_ = other.bytes_;
      other.ptr_ = nullptr;
      other.bytes_ = 0;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  bool ok() const { return bytes_ == 0 || ptr_ != nullptr; }
  std::size_t bytes() const { return bytes_; }
  template <class T = void>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void reset() {
    if (ptr_ != nullptr) ops_->free(ptr_);
    ptr_ = nullptr;
  }
  Ops* ops_ = nullptr;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace prefixgate::kernels
