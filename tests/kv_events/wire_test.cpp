// The KV-event decoder against batches written by the tests' own encoder (support/vllm_wire.h,
// from vLLM's and SGLang's definitions): both encodings, both hash forms, defaults left out,
// unknown fields and events; and kv_events' own encoder read back.
#include "prefixgate/kv_events/wire.h"

#include <gtest/gtest.h>

#include "support/vllm_wire.h"

namespace prefixgate::kv_events {
namespace {

namespace vw = testing::vllm_wire;
using namespace std::string_literals;
using namespace std::string_view_literals;

std::vector<std::uint32_t> iota_tokens(std::size_t n, std::uint32_t first = 100) {
  std::vector<std::uint32_t> t(n);
  for (std::size_t i = 0; i < n; ++i) t[i] = first + static_cast<std::uint32_t>(i);
  return t;
}

EngineHash expected_hash(std::uint64_t h, vw::Hashes form) {
  if (form == vw::Hashes::kInteger) return h;
  const std::string d = vw::digest_of(h);
  return fold_digest(std::span(reinterpret_cast<const std::uint8_t*>(d.data()), d.size()));
}

struct Case {
  vw::Form form;
  vw::Hashes hashes;
  bool unknown_fields;
};

class WireDecodeTest : public ::testing::TestWithParam<Case> {};

TEST_P(WireDecodeTest, DecodesStoredRemovedAndClearedInOrder) {
  const Case c = GetParam();
  const auto tokens = iota_tokens(32);
  const std::string payload = vw::encode(
      {vw::Stored{{11, 12}, std::nullopt, tokens, 16, "GPU", "tenant-a"},
       vw::Stored{{13}, 12, iota_tokens(16, 500), 16, "CPU"}, vw::Removed{{11}, ""}, vw::Cleared{}},
      {.form = c.form, .hashes = c.hashes, .rank = 1, .unknown_fields = c.unknown_fields});
  auto batch = decode_event_batch(payload);
  ASSERT_TRUE(batch.ok()) << batch.error().message;
  EXPECT_DOUBLE_EQ(batch->ts, 1700000000.5);
  ASSERT_TRUE(batch->data_parallel_rank.has_value());
  EXPECT_EQ(*batch->data_parallel_rank, 1);
  EXPECT_EQ(batch->unknown_events, c.unknown_fields ? 1U : 0U);
  ASSERT_EQ(batch->events.size(), 4U);

  const auto& first = std::get<BlockStored>(batch->events[0]);
  EXPECT_EQ(first.block_hashes,
            (std::vector<EngineHash>{expected_hash(11, c.hashes), expected_hash(12, c.hashes)}));
  EXPECT_FALSE(first.parent.has_value());
  EXPECT_EQ(first.token_ids, tokens);
  EXPECT_EQ(first.block_size, 16U);
  EXPECT_EQ(first.medium, Medium::kGpu);
  EXPECT_EQ(first.cache_salt, "tenant-a");
  EXPECT_FALSE(first.lora);

  const auto& second = std::get<BlockStored>(batch->events[1]);
  ASSERT_TRUE(second.parent.has_value());
  EXPECT_EQ(*second.parent, expected_hash(12, c.hashes));
  EXPECT_EQ(second.medium, Medium::kOffload);
  EXPECT_EQ(second.cache_salt, "");

  const auto& removed = std::get<BlockRemoved>(batch->events[2]);
  EXPECT_EQ(removed.block_hashes, std::vector<EngineHash>{expected_hash(11, c.hashes)});
  EXPECT_EQ(removed.medium, Medium::kGpu);  // nil medium: the device's cache
  EXPECT_TRUE(std::holds_alternative<AllBlocksCleared>(batch->events[3]));
}

INSTANTIATE_TEST_SUITE_P(Encodings, WireDecodeTest,
                         ::testing::Values(Case{vw::Form::kMap, vw::Hashes::kInteger, false},
                                           Case{vw::Form::kMap, vw::Hashes::kBytes, false},
                                           Case{vw::Form::kMap, vw::Hashes::kBytes, true},
                                           Case{vw::Form::kArray, vw::Hashes::kInteger, false},
                                           Case{vw::Form::kArray, vw::Hashes::kBytes, true}),
                         [](const auto& param_info) {
                           const Case& c = param_info.param;
                           return std::string(c.form == vw::Form::kMap ? "Map" : "Array") +
                                  (c.hashes == vw::Hashes::kInteger ? "IntegerHashes"
                                                                    : "DigestHashes") +
                                  (c.unknown_fields ? "UnknownFields" : "");
                         });

TEST(WireDecodeTest, ReadsSglangArrayFormWithItsSaltMetadata) {
  const std::string payload =
      vw::encode({vw::Stored{{7}, std::nullopt, iota_tokens(1), 1, "CPU_PINNED", "salt-x"}},
                 {.form = vw::Form::kArray, .sglang = true});
  auto batch = decode_event_batch(payload);
  ASSERT_TRUE(batch.ok()) << batch.error().message;
  const auto& e = std::get<BlockStored>(batch->events[0]);
  EXPECT_EQ(e.cache_salt, "salt-x");
  EXPECT_EQ(e.medium, Medium::kOffload);
  EXPECT_EQ(e.block_size, 1U);
}

TEST(WireDecodeTest, OlderArrayFormWithoutMediumOrRankDecodes) {
  // vLLM 0.8's layout: [tag, hashes, parent, tokens, block_size, lora_id], batch [ts, events].
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> p(buf);
  p.pack_array(2);
  p.pack_double(1.0);
  p.pack_array(1);
  p.pack_array(6);
  p.pack(std::string("BlockStored"));
  p.pack_array(1);
  p.pack_int64(-5);  // Python's hash() can be negative
  p.pack_nil();
  p.pack_array(0);
  p.pack_uint32(16);
  p.pack_nil();
  auto batch = decode_event_batch(std::string_view(buf.data(), buf.size()));
  ASSERT_TRUE(batch.ok()) << batch.error().message;
  const auto& e = std::get<BlockStored>(batch->events[0]);
  EXPECT_EQ(e.block_hashes[0], static_cast<EngineHash>(-5));
  EXPECT_EQ(e.medium, Medium::kGpu);
  EXPECT_FALSE(batch->data_parallel_rank.has_value());
}

TEST(WireDecodeTest, LoraBlocksAreMarked) {
  auto batch = decode_event_batch(
      vw::encode({vw::Stored{{1}, std::nullopt, iota_tokens(16), 16, "GPU", "", 3}}));
  ASSERT_TRUE(batch.ok());
  EXPECT_TRUE(std::get<BlockStored>(batch->events[0]).lora);
}

TEST(WireDecodeTest, RefusesWhatIsNotABatchWithAReason) {
  const auto refuse = [](std::string_view bytes, std::string_view reason) {
    auto r = decode_event_batch(bytes);
    ASSERT_FALSE(r.ok()) << "accepted " << bytes.size() << " bytes";
    EXPECT_NE(r.error().message.find(reason), std::string::npos) << r.error().message;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidValue);
  };
  refuse("", "empty");
  refuse("\xc1", "not msgpack");              // a reserved byte
  refuse("\x92\xcb\x3f\xf0", "not msgpack");  // truncated double
  refuse(std::string("\x2a", 1), "expected an array or a map");
  refuse(std::string("\x92\xc0\x90", 3), "ts");             // [nil, []]
  refuse(std::string("\x92\x01\x01", 3), "events");         // [1, 1]
  refuse(std::string("\x92\x01\x91\x91\x01", 5), "event");  // [1, [[1]]]
  refuse(std::string("\x92\x01\x90\x00", 4), "trailing");
  // [1, [["BlockStored", "not an array"]]]
  refuse(
      "\x92\x01\x91\x92\xab"
      "BlockStored\xa1x"sv,
      "block_hashes");
  // A huge declared array in a few bytes: refused by the size limits, nothing allocated.
  refuse(std::string("\x92\x01\xdd\xff\xff\xff\xff", 7), "not msgpack");
}

TEST(WireEncodeTest, OwnEncoderRoundTripsInBothForms) {
  EventBatch batch;
  batch.ts = 12.25;
  batch.data_parallel_rank = 0;
  BlockStored s;
  s.block_hashes = {0xfedcba9876543210ULL, 2};
  s.token_ids = iota_tokens(32);
  s.block_size = 16;
  s.cache_salt = "t";
  batch.events.push_back(s);
  BlockStored child;
  child.block_hashes = {3};
  child.parent = 2;
  child.token_ids = iota_tokens(16, 9);
  child.block_size = 16;
  child.medium = Medium::kOffload;
  child.group = 2;
  batch.events.push_back(child);
  batch.events.push_back(BlockRemoved{{2, 3}, Medium::kOffload, 0});
  batch.events.push_back(AllBlocksCleared{});
  for (WireForm form : {WireForm::kMap, WireForm::kArray}) {
    auto back = decode_event_batch(encode_event_batch(batch, form));
    ASSERT_TRUE(back.ok()) << back.error().message;
    ASSERT_EQ(back->events.size(), 4U);
    const auto& a = std::get<BlockStored>(back->events[0]);
    EXPECT_EQ(a.block_hashes, s.block_hashes);
    EXPECT_EQ(a.token_ids, s.token_ids);
    EXPECT_EQ(a.cache_salt, "t");
    const auto& b = std::get<BlockStored>(back->events[1]);
    EXPECT_EQ(b.parent, std::optional<EngineHash>(2));
    EXPECT_EQ(b.medium, Medium::kOffload);
    EXPECT_EQ(b.group, 2U);
    EXPECT_EQ(std::get<BlockRemoved>(back->events[2]).block_hashes,
              (std::vector<EngineHash>{2, 3}));
    EXPECT_EQ(back->data_parallel_rank, std::optional<std::int64_t>(0));
  }
}

TEST(WireEncodeTest, MapFormIsWhatVllmSends) {
  // vLLM's msgspec encoding of KVEventBatch(ts=0.5, events=[AllBlocksCleared()]) with the rank
  // left at its default: {"ts": 0.5, "events": [{"type": "AllBlocksCleared"}]}.
  EventBatch batch;
  batch.ts = 0.5;
  batch.events.push_back(AllBlocksCleared{});
  const std::string expected =
      "\x82\xa2ts\xcb\x3f\xe0\x00\x00\x00\x00\x00\x00\xa6"
      "events\x91\x81\xa4type\xb0"
      "AllBlocksCleared"s;
  EXPECT_EQ(encode_event_batch(batch), expected);
}

TEST(WireSequenceTest, EightBytesBigEndianBothWays) {
  EXPECT_EQ(encode_sequence(258), std::string("\0\0\0\0\0\0\x01\x02", 8));
  EXPECT_EQ(decode_sequence(std::string("\0\0\0\0\0\0\x01\x02", 8)), 258);
  EXPECT_EQ(decode_sequence(encode_sequence(kEndOfReplay)), kEndOfReplay);
  EXPECT_FALSE(decode_sequence("1234567").has_value());
  EXPECT_FALSE(decode_sequence("123456789").has_value());
}

TEST(WireEndpointTest, RanksOffsetTcpPortsAndSuffixInprocNames) {
  EXPECT_EQ(endpoint_for_rank("tcp://10.0.0.5:5557", 0), "tcp://10.0.0.5:5557");
  EXPECT_EQ(endpoint_for_rank("tcp://10.0.0.5:5557", 3), "tcp://10.0.0.5:5560");
  EXPECT_EQ(endpoint_for_rank("inproc://cache", 2), "inproc://cache_dp2");
  EXPECT_FALSE(endpoint_for_rank("tcp://10.0.0.5:65535", 1).has_value());
  EXPECT_FALSE(endpoint_for_rank("ipc:///tmp/x", 1).has_value());
  EXPECT_FALSE(endpoint_for_rank("tcp://host:port", 1).has_value());
}

}  // namespace
}  // namespace prefixgate::kv_events
