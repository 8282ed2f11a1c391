// A device allocation that frees itself (through the Ops that made it): the cuda device's weights,
// KV pool and activations.
#pragma once

#include <cstddef>

#include "prefixgate/kernels/ops.h"

namespace prefixgate::engine {

// ok() is false when the allocation did not fit; a zero-byte buffer holds no memory.
class Buffer {
 public:
  Buffer() = default;
  Buffer(kernels::Ops* ops, std::size_t bytes) : ops_(ops), bytes_(bytes) {
    ptr_ = bytes > 0 ? ops->alloc(bytes) : nullptr;
  }
  ~Buffer() { reset(); }
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept {
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
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

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
  kernels::Ops* ops_ = nullptr;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace prefixgate::engine
