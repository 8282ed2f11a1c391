// The cursor decoding of the common KV-event batches (wire_scan.h) against msgpack-c++'s object
// tree (decode_event_batch_tree): the batches vLLM and SGLang send are scanned, and every payload
// the scan answers for, valid or mutated, decodes to the same batch through the tree.
#include "wire_scan.h"

#include <gtest/gtest.h>

#include <bit>
#include <functional>
#include <random>

#include "prefixgate/kv_events/wire.h"
#include "support/vllm_wire.h"

namespace prefixgate::kv_events {
namespace {

namespace vw = testing::vllm_wire;

std::span<const std::uint8_t> bytes_of(std::string_view s) {
  return std::span(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
}

// Field for field (the times bit for bit: a mutated one may be a NaN).
void expect_same(const EventBatch& a, const EventBatch& b, std::string_view what) {
  EXPECT_EQ(std::bit_cast<std::uint64_t>(a.ts), std::bit_cast<std::uint64_t>(b.ts)) << what;
  EXPECT_EQ(a.data_parallel_rank, b.data_parallel_rank) << what;
  EXPECT_EQ(a.unknown_events, b.unknown_events) << what;
  ASSERT_EQ(a.events.size(), b.events.size()) << what;
  for (std::size_t i = 0; i < a.events.size(); ++i) {
    ASSERT_EQ(a.events[i].index(), b.events[i].index()) << what << ", event " << i;
    if (const auto* s = std::get_if<BlockStored>(&a.events[i])) {
      const auto& t = std::get<BlockStored>(b.events[i]);
      EXPECT_EQ(s->block_hashes, t.block_hashes) << what;
      EXPECT_EQ(s->parent, t.parent) << what;
      EXPECT_EQ(s->token_ids, t.token_ids) << what;
      EXPECT_EQ(s->block_size, t.block_size) << what;
      EXPECT_EQ(s->medium, t.medium) << what;
      EXPECT_EQ(s->lora, t.lora) << what;
      EXPECT_EQ(s->cache_salt, t.cache_salt) << what;
      EXPECT_EQ(s->group, t.group) << what;
    } else if (const auto* r = std::get_if<BlockRemoved>(&a.events[i])) {
      const auto& t = std::get<BlockRemoved>(b.events[i]);
      EXPECT_EQ(r->block_hashes, t.block_hashes) << what;
      EXPECT_EQ(r->medium, t.medium) << what;
      EXPECT_EQ(r->group, t.group) << what;
    }
  }
}

// Whether the scan answered; when it did, the tree must decode the payload to the same batch.
bool scanned_as_the_tree_decodes(std::string_view payload, std::string_view what) {
  const auto scanned = internal::scan_event_batch(bytes_of(payload));
  const auto tree = internal::decode_event_batch_tree(bytes_of(payload));
  const auto decoded = decode_event_batch(payload);
  EXPECT_EQ(decoded.ok(), tree.ok()) << what;
  if (decoded.ok() && tree.ok()) {
    expect_same(*decoded, *tree, what);
  } else if (!decoded.ok() && !tree.ok()) {
    EXPECT_EQ(decoded.error().message, tree.error().message);
  }
  if (!scanned) return false;
  EXPECT_TRUE(tree.ok()) << what << ": the scan decoded what the tree refuses";
  if (tree.ok()) expect_same(*scanned, *tree, what);
  return true;
}

std::vector<std::uint32_t> mixed_width_tokens(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint32_t> t(n);
  // Every integer width the encoders choose: fixint, 8, 16 and 32 bits.
  for (std::size_t i = 0; i < n; ++i) t[i] = (seed * 2654435761U + i * 40503U) >> (i % 4 * 8);
  return t;
}

TEST(WireScanTest, TheBatchesEnginesSendAreScannedAsTheTreeDecodesThem) {
  const std::vector<vw::Event> events{
      vw::Stored{{1, 2, 3}, std::nullopt, mixed_width_tokens(48, 1), 16, "GPU"},
      vw::Stored{{4, 0xffffffffffffffffULL}, 3, mixed_width_tokens(32, 2), 16, "CPU"},
      vw::Stored{{5}, std::nullopt, mixed_width_tokens(16, 3), 16, ""},
      vw::Removed{{2, 3}, "GPU"},
      vw::Removed{{4}, ""},
      vw::Cleared{}};
  std::size_t scanned = 0, payloads = 0;
  for (vw::Form form : {vw::Form::kMap, vw::Form::kArray}) {
    for (vw::Hashes hashes : {vw::Hashes::kInteger, vw::Hashes::kBytes}) {
      for (bool unknown : {false, true}) {
        for (bool sglang : {false, true}) {
          for (std::optional<std::int64_t> rank : {std::optional<std::int64_t>(), {3}}) {
            const std::string payload = vw::encode(events, {.form = form,
                                                            .hashes = hashes,
                                                            .rank = rank,
                                                            .unknown_fields = unknown,
                                                            .sglang = sglang});
            ++payloads;
            scanned += scanned_as_the_tree_decodes(payload, "encoded by the tests' encoder");
          }
        }
      }
    }
  }
  EXPECT_EQ(scanned, payloads);  // none of these needs the tree
  // vLLM's cache salt (extra_keys) is scanned; SGLang's (its metadata map) is the tree's.
  const std::vector<vw::Event> salted{
      vw::Stored{{7, 8}, std::nullopt, mixed_width_tokens(32, 4), 16, "GPU", "tenant-a"}};
  EXPECT_TRUE(scanned_as_the_tree_decodes(vw::encode(salted, {.form = vw::Form::kMap}), "salt"));
  EXPECT_TRUE(scanned_as_the_tree_decodes(vw::encode(salted, {.form = vw::Form::kArray}), "salt"));
  EXPECT_FALSE(scanned_as_the_tree_decodes(
      vw::encode(salted, {.form = vw::Form::kArray, .sglang = true}), "SGLang's salt"));
  EXPECT_EQ(std::get<BlockStored>(decode_event_batch(vw::encode(salted))->events[0]).cache_salt,
            "tenant-a");
  // A LoRA adapter's blocks: the tree's (lora_id), and the same answer.
  const std::vector<vw::Event> lora{
      vw::Stored{{9}, std::nullopt, mixed_width_tokens(16, 5), 16, "GPU", "", 7}};
  scanned_as_the_tree_decodes(vw::encode(lora), "lora");
  EXPECT_TRUE(std::get<BlockStored>(decode_event_batch(vw::encode(lora))->events[0]).lora);
  // kv_events' own encoder, as prefixgate-engine publishes.
  EventBatch own;
  BlockStored stored;
  stored.block_hashes = {11, 12};
  stored.token_ids = mixed_width_tokens(32, 6);
  stored.block_size = 16;
  stored.cache_salt = "x";
  own.events.push_back(stored);
  own.events.push_back(BlockRemoved{{11}, Medium::kOffload, 0});
  own.data_parallel_rank = 1;
  for (WireForm form : {WireForm::kMap, WireForm::kArray}) {
    EXPECT_TRUE(scanned_as_the_tree_decodes(encode_event_batch(own, form), "own encoder"));
  }
}

// A batch of one BlockStored whose fields are written by `fields` (map form), or in array form
// with `extra` written after its ninth field; the scan must step over whatever `extra` holds.
std::string handmade_stored_batch(bool map, const std::function<void(vw::detail::Packer&)>& extra) {
  using vw::detail::str;
  msgpack::sbuffer buf;
  vw::detail::Packer p(buf);
  p.pack_array(2);
  p.pack_double(1.5);
  p.pack_array(1);
  if (map) {
    p.pack_map(7);
    str(p, "type");
  } else {
    p.pack_array(11);
  }
  str(p, "BlockStored");
  if (map) str(p, "block_hashes");
  p.pack_array(2);
  p.pack_uint64(1);
  p.pack_uint64(2);
  if (map) str(p, "parent_block_hash");
  p.pack_nil();
  if (map) str(p, "token_ids");
  p.pack_array(2);
  p.pack_uint8(5);
  p.pack_uint32(70000);
  if (map) str(p, "block_size");
  p.pack_uint8(1);
  if (!map) {
    p.pack_nil();   // lora_id
    str(p, "gpu");  // medium, in lower case
    p.pack_nil();   // lora_name
  }
  if (map) str(p, "extra_keys");
  // The first block's tuple: the salt is its last string.
  p.pack_array(2);
  p.pack_array(3);
  str(p, "lora-name");
  p.pack_uint8(3);
  str(p, "tenant-b");
  p.pack_nil();
  if (map) {
    str(p, "a_field_from_the_future");
  } else {
    p.pack_uint8(0);  // group_idx
  }
  extra(p);
  return std::string(buf.data(), buf.size());
}

TEST(WireScanTest, EveryValueTypeIsSteppedOverAndTheSaltIsTheTuplesLastString) {
  const auto every_type = [](vw::detail::Packer& p) {
    const char bytes[300] = {};
    p.pack_array(23);
    p.pack_int8(-3);
    p.pack_int16(-300);
    p.pack_int32(-70000);
    p.pack_int64(-5000000000);
    p.pack_uint16(300);
    p.pack_uint64(1);
    p.pack_float(1.25F);
    p.pack_true();
    p.pack_false();
    p.pack_str(40);
    p.pack_str_body(bytes, 40);
    p.pack_str(300);
    p.pack_str_body(bytes, 300);
    p.pack_bin(3);
    p.pack_bin_body(bytes, 3);
    p.pack_bin(300);
    p.pack_bin_body(bytes, 300);
    for (std::uint32_t n : {1U, 2U, 4U, 8U, 16U, 3U, 300U}) {
      p.pack_ext(n, 7);  // fixext 1-16, ext 8 and ext 16
      p.pack_ext_body(bytes, n);
    }
    p.pack_array(20);  // array 16
    for (int i = 0; i < 20; ++i) p.pack_nil();
    p.pack_map(17);  // map 16
    for (int i = 0; i < 17; ++i) {
      p.pack_uint8(static_cast<std::uint8_t>(i));
      p.pack_map(0);
    }
    p.pack_array(1);
    p.pack_array(1);
    p.pack_array(0);
  };
  for (bool map : {true, false}) {
    const std::string payload = handmade_stored_batch(map, every_type);
    EXPECT_TRUE(scanned_as_the_tree_decodes(payload, map ? "map form" : "array form"));
    const auto batch = decode_event_batch(payload);
    ASSERT_TRUE(batch.ok()) << batch.error().message;
    const auto& stored = std::get<BlockStored>(batch->events[0]);
    EXPECT_EQ(stored.cache_salt, "tenant-b");
    EXPECT_EQ(stored.token_ids, (std::vector<std::uint32_t>{5, 70000}));
    EXPECT_EQ(stored.medium, Medium::kGpu);
  }
}

TEST(WireScanTest, MutatedBatchesDecodeAsTheTreeDecodesThem) {
  // Valid batches with bytes replaced, inserted, removed and cut: whatever the scan still
  // answers for must be what the tree decodes, and everything else the tree's answer.
  std::vector<std::string> seeds;
  for (vw::Form form : {vw::Form::kMap, vw::Form::kArray}) {
    for (vw::Hashes hashes : {vw::Hashes::kInteger, vw::Hashes::kBytes}) {
      seeds.push_back(vw::encode(
          {vw::Stored{{1, 2}, std::nullopt, mixed_width_tokens(32, 7), 16, "GPU", "s"},
           vw::Stored{{3}, 2, mixed_width_tokens(16, 8), 16, "CPU"}, vw::Removed{{1}, "GPU"},
           vw::Cleared{}},
          {.form = form, .hashes = hashes, .rank = 1, .unknown_fields = form == vw::Form::kMap}));
    }
  }
  std::mt19937 rng(20261206);
  std::size_t scanned = 0, refused = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string p = seeds[rng() % seeds.size()];
    for (int edits = 1 + static_cast<int>(rng() % 3); edits > 0 && !p.empty(); --edits) {
      const std::size_t at = rng() % p.size();
      // Bytes the format gives meaning to, more often than any byte.
      static constexpr std::uint8_t kMarkers[] = {0xc0, 0xc1, 0xc2, 0xca, 0xcb, 0xcc, 0xcd, 0xce,
                                                  0xcf, 0xd0, 0xd3, 0xd9, 0xdc, 0xde, 0x90, 0x80,
                                                  0xa0, 0xc4, 0xd4, 0xc7, 0xff, 0x00, 0x7f};
      const auto byte =
          static_cast<char>(rng() % 2 ? kMarkers[rng() % std::size(kMarkers)] : rng() % 256);
      switch (rng() % 4) {
        case 0: p[at] = byte; break;
        case 1: p.insert(p.begin() + static_cast<std::ptrdiff_t>(at), byte); break;
        case 2: p.erase(at, 1); break;
        default: p.resize(at); break;
      }
    }
    if (scanned_as_the_tree_decodes(p, "mutated")) {
      ++scanned;
    } else if (!decode_event_batch(p).ok()) {
      ++refused;
    }
    if (::testing::Test::HasFailure()) break;
  }
  // Each kind of answer many times: some mutations leave a batch the scan still reads.
  EXPECT_GT(scanned, 500U);
  EXPECT_GT(refused, 5000U);
}

}  // namespace
}  // namespace prefixgate::kv_events
