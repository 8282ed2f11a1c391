#include "safetensors.h"

#include <fcntl.h>
#include <simdjson.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <unordered_set>

#include "prefixgate/base/check.h"

namespace prefixgate::engine::safetensors {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

namespace {

// The format caps the header at 100 MB; a larger length is a corrupt file, not a big model.
constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;

Error malformed(std::string_view file_name, const std::string& what,
                const std::string& param = {}) {
  return make_error(ErrorCode::kInvalidValue, std::string(file_name) + ": " + what, param);
}

float half_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in fp32.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

std::uint16_t f32_to_half(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN
  // 65520 is halfway between 65504 (the largest half) and 65536; ties to even go up, to inf.
  if (ax >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (ax < 0x38800000u) {
    // Below 2^-14: a half subnormal, mantissa = round(|f| * 2^24). A result of 0x400 is the
    // smallest normal, which that bit pattern encodes anyway.
    const float scaled = std::ldexp(std::fabs(f), 24);
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(std::nearbyint(scaled)));
  }
  // Rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to nearest even; a
  // carry into the exponent is the correct result.
  const std::uint32_t rebiased = ax - (112u << 23);
  std::uint32_t half = rebiased >> 13;
  const std::uint32_t rest = rebiased & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return static_cast<std::uint16_t>(sign | half);
}

std::uint16_t f32_to_bf16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// Multiplies, or returns false on overflow.
bool checked_mul(std::size_t a, std::size_t b, std::size_t& out) {
  if (a != 0 && b > std::numeric_limits<std::size_t>::max() / a) return false;
  out = a * b;
  return true;
}

Result<TensorInfo> parse_tensor(std::string_view file_name, std::string_view name,
                                simdjson::dom::element entry, std::size_t data_start,
                                std::size_t data_size) {
  const std::string tensor(name);
  simdjson::dom::object obj;
  if (entry.get_object().get(obj) != simdjson::SUCCESS) {
    return malformed(file_name, "tensor " + tensor + " is not a JSON object", tensor);
  }
  std::string_view dtype_text;
  if (obj["dtype"].get_string().get(dtype_text) != simdjson::SUCCESS) {
    return malformed(file_name, "tensor " + tensor + " has no string \"dtype\"", tensor);
  }
  auto dtype = dtype_from_name(dtype_text);
  if (!dtype) {
    return make_error(ErrorCode::kUnsupported,
                      std::string(file_name) + ": tensor " + tensor + " has dtype " +
                          std::string(dtype_text) + "; only F32, F16 and BF16 are supported",
                      tensor);
  }
  TensorInfo info;
  info.name = tensor;
  info.dtype = *dtype;
  simdjson::dom::array shape;
  if (obj["shape"].get_array().get(shape) != simdjson::SUCCESS) {
    return malformed(file_name, "tensor " + tensor + " has no \"shape\" array", tensor);
  }
  info.numel = 1;
  for (simdjson::dom::element dim : shape) {
    std::uint64_t d = 0;
    if (dim.get_uint64().get(d) != simdjson::SUCCESS ||
        !checked_mul(info.numel, static_cast<std::size_t>(d), info.numel)) {
      return malformed(file_name, "tensor " + tensor + " has an invalid shape", tensor);
    }
    info.shape.push_back(static_cast<std::size_t>(d));
  }
  simdjson::dom::array offsets;
  std::uint64_t begin = 0, end = 0;
  if (obj["data_offsets"].get_array().get(offsets) != simdjson::SUCCESS || offsets.size() != 2 ||
      offsets.at(0).get_uint64().get(begin) != simdjson::SUCCESS ||
      offsets.at(1).get_uint64().get(end) != simdjson::SUCCESS) {
    return malformed(file_name, "tensor " + tensor + " needs \"data_offsets\": [begin, end]",
                     tensor);
  }
  if (begin > end || end > data_size) {
    return malformed(file_name,
                     "tensor " + tensor + " data [" + std::to_string(begin) + ", " +
                         std::to_string(end) + ") lies outside the " + std::to_string(data_size) +
                         " data bytes (truncated file?)",
                     tensor);
  }
  std::size_t expected = 0;
  if (!checked_mul(info.numel, dtype_bytes(info.dtype), expected) || expected != end - begin) {
    return malformed(file_name,
                     "tensor " + tensor + " has " + std::to_string(end - begin) +
                         " data bytes, its shape and dtype need " + std::to_string(expected),
                     tensor);
  }
  info.data_begin = data_start + static_cast<std::size_t>(begin);
  info.data_bytes = static_cast<std::size_t>(end - begin);
  return info;
}

}  // namespace

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
  }
  return "F32";
}

Result<DType> dtype_from_name(std::string_view name) {
  if (name == "F32") return DType::kF32;
  if (name == "F16") return DType::kF16;
  if (name == "BF16") return DType::kBF16;
  return make_error(ErrorCode::kUnsupported,
                    "dtype " + std::string(name) + " is not supported (F32, F16, BF16 are)");
}

std::size_t dtype_bytes(DType dtype) {
  return dtype == DType::kF32 ? 4 : 2;
}

Result<std::vector<TensorInfo>> parse_header(std::span<const std::byte> file,
                                             std::string_view file_name) {
  if (file.size() < 8) return malformed(file_name, "too short for a safetensors header");
  std::uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) {
    header_bytes =
        (header_bytes << 8) | std::to_integer<std::uint64_t>(file[static_cast<std::size_t>(i)]);
  }
  if (header_bytes > kMaxHeaderBytes || header_bytes > file.size() - 8) {
    return malformed(file_name, "header length " + std::to_string(header_bytes) +
                                    " does not fit in the file of " + std::to_string(file.size()) +
                                    " bytes (truncated or not safetensors)");
  }
  const std::size_t data_start = 8 + static_cast<std::size_t>(header_bytes);
  const std::size_t data_size = file.size() - data_start;

  const simdjson::padded_string header(reinterpret_cast<const char*>(file.data() + 8),
                                       static_cast<std::size_t>(header_bytes));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (const auto err = parser.parse(header).get(doc); err != simdjson::SUCCESS) {
    return malformed(file_name,
                     std::string("header is not valid JSON: ") + simdjson::error_message(err));
  }
  simdjson::dom::object root;
  if (doc.get_object().get(root) != simdjson::SUCCESS) {
    return malformed(file_name, "header is not a JSON object");
  }
  std::vector<TensorInfo> tensors;
  std::unordered_set<std::string_view> seen;
  for (const auto field : root) {
    if (field.key == "__metadata__") continue;
    if (!seen.insert(field.key).second) {
      return malformed(file_name, "tensor " + std::string(field.key) + " is named twice",
                       std::string(field.key));
    }
    auto info = parse_tensor(file_name, field.key, field.value, data_start, data_size);
    if (!info) return info.error();
    tensors.push_back(std::move(*info));
  }
  return tensors;
}

void to_f32(DType dtype, const std::byte* src, std::size_t count, float* dst) {
  switch (dtype) {
    case DType::kF32: std::memcpy(dst, src, count * sizeof(float)); return;
    case DType::kF16:
      for (std::size_t i = 0; i < count; ++i) {
        std::uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = half_to_f32(h);
      }
      return;
    case DType::kBF16:
      for (std::size_t i = 0; i < count; ++i) {
        std::uint16_t b;
        std::memcpy(&b, src + 2 * i, 2);
        dst[i] = std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
      }
      return;
  }
}

void from_f32(DType dtype, std::span<const float> src, std::vector<std::byte>& out) {
  const std::size_t at = out.size();
  out.resize(at + src.size() * dtype_bytes(dtype));
  std::byte* dst = out.data() + at;
  for (std::size_t i = 0; i < src.size(); ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(dst + 4 * i, &src[i], 4);
    } else {
      const std::uint16_t h = dtype == DType::kF16 ? f32_to_half(src[i]) : f32_to_bf16(src[i]);
      std::memcpy(dst + 2 * i, &h, 2);
    }
  }
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return make_error(ErrorCode::kNotFound, path + ": cannot open: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(ErrorCode::kInvalidValue, path + ": not a regular file");
  }
  SafetensorsFile file;
  file.path_ = path;
  file.size_ = static_cast<std::size_t>(st.st_size);
  if (file.size_ > 0) {
    void* mapped = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
      ::close(fd);
      return make_error(ErrorCode::kInvalidValue, path + ": mmap failed: " + std::strerror(errno));
    }
    file.data_ = static_cast<const std::byte*>(mapped);
  }
  ::close(fd);  // the mapping keeps the file alive
  auto tensors = parse_header(std::span(file.data_, file.size_), path);
  if (!tensors) return tensors.error();
  file.tensors_ = std::move(*tensors);
  return file;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      tensors_(std::move(other.tensors_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    tensors_ = std::move(other.tensors_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  unmap();
}

void SafetensorsFile::unmap() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  for (const TensorInfo& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

void SafetensorsFile::read_f32(const TensorInfo& info, std::span<float> out) const {
  // parse_header checked the range against the file size, and the caller sized `out`.
  PG_DCHECK(out.size() == info.numel && info.data_begin + info.data_bytes <= size_);
  to_f32(info.dtype, data_ + info.data_begin, info.numel, out.data());
}

Status write_file(const std::string& path, std::span<const TensorToWrite> tensors, DType dtype) {
  std::string header = "{";
  std::size_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    std::size_t numel = 1;
    for (std::size_t d : t.shape) numel *= d;
    PG_DCHECK(numel == t.values.size());
    const std::size_t bytes = numel * dtype_bytes(dtype);
    // Our tensor names are ASCII identifiers with dots: nothing to escape.
    header += "\"" + t.name + "\":{\"dtype\":\"" + dtype_name(dtype) + "\",\"shape\":[";
    for (std::size_t i = 0; i < t.shape.size(); ++i) {
      header += (i ? "," : "") + std::to_string(t.shape[i]);
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + bytes) + "]},";
    offset += bytes;
  }
  header += "\"__metadata__\":{\"format\":\"pt\"}}";
  // Pad with spaces (allowed by the format) so the data starts 8-byte aligned.
  while ((8 + header.size()) % 8 != 0) header += ' ';

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return make_error(ErrorCode::kInvalidValue, path + ": cannot open for writing");
  char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  out.write(length, 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  std::vector<std::byte> buffer;
  for (const TensorToWrite& t : tensors) {
    buffer.clear();
    from_f32(dtype, t.values, buffer);
    out.write(reinterpret_cast<const char*>(buffer.data()),
              static_cast<std::streamsize>(buffer.size()));
  }
  out.close();
  if (!out) return make_error(ErrorCode::kInvalidValue, path + ": write failed");
  return {};
}

}  // namespace prefixgate::engine::safetensors
