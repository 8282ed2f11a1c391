#include "safetensors.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

namespace prefixgate::engine::safetensors {
namespace {

// A file image: 8-byte length, `header`, then `data_bytes` zero bytes.
std::vector<std::byte> image(std::string_view header, std::size_t data_bytes) {
  std::vector<std::byte> out(8);
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = std::byte((header.size() >> (8 * i)) & 0xff);
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  out.resize(out.size() + data_bytes);
  return out;
}

Error parse_error(const std::vector<std::byte>& file) {
  auto r = parse_header(file, "x.safetensors");
  EXPECT_FALSE(r.ok());
  if (r.ok()) return {};
  EXPECT_NE(r.error().message.find("x.safetensors"), std::string::npos) << r.error().message;
  return r.error();
}

TEST(SafetensorsTest, ParsesTensorsAndSkipsMetadata) {
  const auto file = image(
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]},"s":{"dtype":"F16","shape":[],"data_offsets":[32,34]}})",
      34);
  auto r = parse_header(file, "x.safetensors");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 3u);
  const TensorInfo& a = (*r)[0];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.shape, (std::vector<std::size_t>{2, 3}));
  EXPECT_EQ(a.numel, 6u);
  const std::size_t data_start = file.size() - 34;
  EXPECT_EQ(a.data_begin, data_start);
  EXPECT_EQ((*r)[1].dtype, DType::kBF16);
  EXPECT_EQ((*r)[1].data_begin, data_start + 24);
  EXPECT_EQ((*r)[2].numel, 1u);  // a scalar
}

TEST(SafetensorsTest, RejectsTruncatedAndMalformedFiles) {
  const std::string ok_header = R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  const auto good = image(ok_header, 16);
  ASSERT_TRUE(parse_header(good, "x.safetensors").ok());
  // Every truncation of a valid file is an error, never a read past the end.
  for (std::size_t n = 0; n < good.size(); ++n) {
    const std::vector<std::byte> cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_EQ(parse_error(cut).code, ErrorCode::kInvalidValue) << n;
  }
  // A header length far past the end, including one that would overflow.
  auto huge = good;
  for (int i = 0; i < 8; ++i) huge[static_cast<std::size_t>(i)] = std::byte{0xff};
  EXPECT_NE(parse_error(huge).message.find("header length"), std::string::npos);

  EXPECT_EQ(parse_error(image("{not json", 0)).code, ErrorCode::kInvalidValue);
  EXPECT_EQ(parse_error(image("[1,2]", 0)).code, ErrorCode::kInvalidValue);
  const auto offsets_past_end =
      parse_error(image(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 12));
  EXPECT_EQ(offsets_past_end.param, "a");
  EXPECT_NE(offsets_past_end.message.find("truncated"), std::string::npos);
  EXPECT_EQ(
      parse_error(image(R"({"a":{"dtype":"F32","shape":[5],"data_offsets":[0,16]}})", 16)).param,
      "a");
  EXPECT_EQ(
      parse_error(image(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[16,0]}})", 16)).code,
      ErrorCode::kInvalidValue);
  EXPECT_EQ(
      parse_error(image(R"({"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", 16)).code,
      ErrorCode::kInvalidValue);
  EXPECT_EQ(parse_error(image(R"({"a":{"dtype":"F32","data_offsets":[0,16]}})", 16)).code,
            ErrorCode::kInvalidValue);
  EXPECT_EQ(parse_error(image(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0]}})", 16)).code,
            ErrorCode::kInvalidValue);
  EXPECT_EQ(parse_error(image(R"({"a":[]})", 16)).code, ErrorCode::kInvalidValue);
  // Dimensions whose product overflows 64 bits.
  EXPECT_EQ(parse_error(image(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],)"
                              R"("data_offsets":[0,16]}})",
                              16))
                .code,
            ErrorCode::kInvalidValue);
}

TEST(SafetensorsTest, UnknownDtypeIsUnsupportedAndNamed) {
  const Error e =
      parse_error(image(R"({"w":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", 16));
  EXPECT_EQ(e.code, ErrorCode::kUnsupported);
  EXPECT_EQ(e.param, "w");
  EXPECT_NE(e.message.find("I64"), std::string::npos);
}

TEST(SafetensorsTest, HalfAndBfloatConversionsRoundToNearestEven) {
  const std::vector<float> values = {0.0f,     -0.0f,     1.0f,    -2.5f, 65504.0f,
                                     65520.0f, 1e-7f,     6.1e-5f, 0.1f,  3.14159265f,
                                     INFINITY, -INFINITY, NAN,     1e30f, 1e-40f};
  std::vector<std::byte> half, bf16;
  from_f32(DType::kF16, values, half);
  from_f32(DType::kBF16, values, bf16);
  std::vector<float> h(values.size()), b(values.size());
  to_f32(DType::kF16, half.data(), values.size(), h.data());
  to_f32(DType::kBF16, bf16.data(), values.size(), b.data());

  EXPECT_EQ(h[0], 0.0f);
  EXPECT_TRUE(std::signbit(h[1]));
  EXPECT_EQ(h[2], 1.0f);
  EXPECT_EQ(h[3], -2.5f);
  EXPECT_EQ(h[4], 65504.0f);      // the largest half
  EXPECT_EQ(h[5], INFINITY);      // halfway to 65536 rounds to even: overflow
  EXPECT_NEAR(h[6], 1e-7, 3e-8);  // a subnormal half (2^-24 steps)
  EXPECT_NEAR(h[7], 6.1e-5, 3e-8);
  EXPECT_NEAR(h[8], 0.1, 0.1 * 0x1p-11);
  EXPECT_NEAR(h[9], 3.14159265, 3.2 * 0x1p-11);
  EXPECT_EQ(h[10], INFINITY);
  EXPECT_EQ(h[11], -INFINITY);
  EXPECT_TRUE(std::isnan(h[12]));
  EXPECT_EQ(h[13], INFINITY);
  EXPECT_EQ(h[14], 0.0f);

  for (std::size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(values[i])) {
      EXPECT_TRUE(std::isnan(b[i]));
    } else if (std::isinf(values[i])) {
      EXPECT_EQ(b[i], values[i]);
    } else {
      // Relative 2^-8 for normal values; fp32 subnormals keep fewer bits in bf16 too.
      EXPECT_LE(std::abs(b[i] - values[i]), std::max(std::abs(values[i]) * 0x1p-8f, 1e-38f))
          << values[i];
    }
  }
  // Ties: 1 + 2^-8 lies halfway between bf16 1 and 1 + 2^-7 and goes to even (1).
  std::vector<std::byte> tie;
  from_f32(DType::kBF16, std::vector<float>{1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f}, tie);
  std::vector<float> back(2);
  to_f32(DType::kBF16, tie.data(), 2, back.data());
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], 1.0f + 0x1p-6f);

  // Every half converts exactly to fp32 and back.
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    if ((bits & 0x7c00) == 0x7c00 && (bits & 0x3ff)) continue;  // NaNs: payloads may differ
    const auto u = static_cast<std::uint16_t>(bits);
    std::byte raw[2];
    std::memcpy(raw, &u, 2);
    float f;
    to_f32(DType::kF16, raw, 1, &f);
    std::vector<std::byte> again;
    from_f32(DType::kF16, std::span(&f, 1), again);
    std::uint16_t round_trip;
    std::memcpy(&round_trip, again.data(), 2);
    ASSERT_EQ(round_trip, u) << std::hex << bits;
  }
}

TEST(SafetensorsTest, WritesAFileThatReadsBack) {
  const auto path =
      std::filesystem::path(::testing::TempDir()) / "safetensors_roundtrip.safetensors";
  const std::vector<float> a = {1.0f, -2.0f, 3.5f, 0.25f, 8.0f, -0.5f};
  const std::vector<float> b = {42.0f};
  const std::vector<TensorToWrite> tensors = {{"layer.a", {2, 3}, a}, {"b", {1}, b}};
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    ASSERT_TRUE(write_file(path.string(), tensors, dtype).ok());
    auto file = SafetensorsFile::open(path.string());
    ASSERT_TRUE(file.ok()) << file.error().message;
    const TensorInfo* info = file->find("layer.a");
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->dtype, dtype);
    EXPECT_EQ(info->shape, (std::vector<std::size_t>{2, 3}));
    EXPECT_EQ(info->data_begin % 8, 0u);  // the header is padded to keep data aligned
    std::vector<float> got(info->numel);
    file->read_f32(*info, got);
    EXPECT_EQ(got, a);  // these values are exact in every dtype
    EXPECT_EQ(file->find("missing"), nullptr);
  }
  std::filesystem::remove(path);
}

TEST(SafetensorsTest, OpeningAMissingOrEmptyFileFails) {
  auto missing = SafetensorsFile::open("/nonexistent/model.safetensors");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("/nonexistent/model.safetensors"), std::string::npos);

  const auto path = std::filesystem::path(::testing::TempDir()) / "empty.safetensors";
  std::ofstream(path).close();
  auto empty = SafetensorsFile::open(path.string());
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code, ErrorCode::kInvalidValue);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace prefixgate::engine::safetensors
