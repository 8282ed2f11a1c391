// Safetensors (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length
// N, N bytes of JSON naming each tensor's dtype, shape and [begin, end) byte range in the data
// that follows, then the data. We read F32, F16 and BF16 into fp32 and write the same.
//
// Parsing is bounds-checked against the file size, so a truncated or hostile file is an error
// naming the file and the tensor, never a read past the end.
//
//   auto file = SafetensorsFile::open("model.safetensors");
//   if (!file) return file.error();
//   const TensorInfo* t = file->find("model.norm.weight");
//   std::vector<float> w(t->numel);
//   file->read_f32(*t, w);
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/base/status.h"

namespace prefixgate::engine::safetensors {

enum class DType { kF32, kF16, kBF16 };

// "F32", "F16", "BF16".
const char* dtype_name(DType dtype);
Result<DType> dtype_from_name(std::string_view name);
std::size_t dtype_bytes(DType dtype);

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::size_t> shape;
  std::size_t numel = 0;
  std::size_t data_begin = 0;  // byte offset from the start of the file
  std::size_t data_bytes = 0;
};

// Parses the header of a safetensors file whose full contents are `file` (its size bounds every
// offset). `file_name` goes into error messages.
Result<std::vector<TensorInfo>> parse_header(std::span<const std::byte> file,
                                             std::string_view file_name);

// Converts `count` elements of `dtype` (little-endian) to fp32.
void to_f32(DType dtype, const std::byte* src, std::size_t count, float* dst);
// Converts fp32 to `dtype` (round to nearest even; NaN stays NaN), appending the bytes.
void from_f32(DType dtype, std::span<const float> src, std::vector<std::byte>& out);

// A safetensors file mapped read-only into memory.
class SafetensorsFile {
 public:
  static Result<SafetensorsFile> open(const std::string& path);

  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(std::string_view name) const;
  // Converts the tensor to fp32 into `out` (out.size() == info.numel).
  void read_f32(const TensorInfo& info, std::span<float> out) const;

 private:
  SafetensorsFile() = default;
  void unmap();

  std::string path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::vector<TensorInfo> tensors_;
};

struct TensorToWrite {
  std::string name;
  std::vector<std::size_t> shape;
  std::span<const float> values;  // row-major, product(shape) elements
};

// Writes `tensors` as one safetensors file in `dtype`. Errors name the path.
Status write_file(const std::string& path, std::span<const TensorToWrite> tensors, DType dtype);

}  // namespace prefixgate::engine::safetensors
