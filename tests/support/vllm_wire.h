// The tests' own encoder of vLLM's and SGLang's KV-event batches, written from their Python
// definitions (msgspec structs in vllm/distributed/kv_events.py and
// sglang/srt/disaggregation/kv_events.py) rather than from kv_events/'s encoder, so that the
// decoder is checked against a second reading of the format. Both encodings (array form: tag
// first, fields by position; map form: "type" key, fields by name, defaults left out) and both
// hash forms (64-bit integers; 32-byte digests as msgpack bin).
//
//   std::string payload = vllm_wire::encode({vllm_wire::Stored{{1, 2}, std::nullopt, tokens, 16}},
//                                           {.form = vllm_wire::Form::kArray});
#pragma once

#define MSGPACK_NO_BOOST
#include <cstdint>
#include <msgpack.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace prefixgate::testing::vllm_wire {

enum class Form { kMap, kArray };
enum class Hashes { kInteger, kBytes };

struct Stored {
  std::vector<std::uint64_t> hashes = {};
  std::optional<std::uint64_t> parent = {};
  std::vector<std::uint32_t> tokens = {};
  std::size_t block_size = 16;
  std::string medium = "GPU";  // "" = nil
  std::string salt = {};       // the first block's extra key (vLLM) or metadata (SGLang, array)
  std::optional<std::int64_t> lora_id = {};
};
struct Removed {
  std::vector<std::uint64_t> hashes = {};
  std::string medium = "GPU";
};
struct Cleared {};
using Event = std::variant<Stored, Removed, Cleared>;

struct Options {
  Form form = Form::kMap;
  Hashes hashes = Hashes::kInteger;
  double ts = 1700000000.5;
  std::optional<std::int64_t> rank = {};
  bool unknown_fields = false;  // add fields and an event type a newer engine might send
  bool sglang = false;          // array form: SGLang's layout (metadata after medium)
};

// A 32-byte digest standing in for vLLM's sha256 block hash: 24 fixed bytes, then `h` big-endian.
inline std::string digest_of(std::uint64_t h) {
  std::string d(32, '\x5a');
  for (int i = 0; i < 8; ++i) d[24 + i] = static_cast<char>((h >> (56 - 8 * i)) & 0xff);
  return d;
}

namespace detail {
using Packer = msgpack::packer<msgpack::sbuffer>;
inline void str(Packer& p, const std::string& s) {
  p.pack_str(static_cast<std::uint32_t>(s.size()));
  p.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
}
inline void hash(Packer& p, std::uint64_t h, Hashes form) {
  if (form == Hashes::kInteger) {
    p.pack_uint64(h);
  } else {
    const std::string d = digest_of(h);
    p.pack_bin(32);
    p.pack_bin_body(d.data(), 32);
  }
}
inline void hashes(Packer& p, const std::vector<std::uint64_t>& hs, Hashes form) {
  p.pack_array(static_cast<std::uint32_t>(hs.size()));
  for (std::uint64_t h : hs) hash(p, h, form);
}
inline void medium(Packer& p, const std::string& m) {
  if (m.empty()) {
    p.pack_nil();
  } else {
    str(p, m);
  }
}
}  // namespace detail

inline std::string encode(const std::vector<Event>& events, const Options& o = {}) {
  using namespace detail;
  msgpack::sbuffer buf;
  Packer p(buf);
  const bool map = o.form == Form::kMap;
  const std::size_t extra_events = o.unknown_fields ? 1 : 0;
  if (map) {
    p.pack_map((o.rank ? 3 : 2) + (o.unknown_fields ? 1 : 0));
    str(p, "ts");
  } else {
    p.pack_array(o.rank ? 3 : 2);
  }
  p.pack_double(o.ts);
  if (map) str(p, "events");
  p.pack_array(static_cast<std::uint32_t>(events.size() + extra_events));
  for (const Event& ev : events) {
    if (const auto* s = std::get_if<Stored>(&ev)) {
      const bool salted = !s->salt.empty();
      if (map) {
        p.pack_map(8 + (salted ? 1 : 0) + (o.unknown_fields ? 2 : 0));
        str(p, "type");
        str(p, "BlockStored");
      } else if (o.sglang) {
        p.pack_array(salted ? 8 : 7);
        str(p, "BlockStored");
      } else {
        p.pack_array(salted ? 9 : 7);
        str(p, "BlockStored");
      }
      if (map) str(p, "block_hashes");
      hashes(p, s->hashes, o.hashes);
      if (map) str(p, "parent_block_hash");
      if (s->parent) {
        hash(p, *s->parent, o.hashes);
      } else {
        p.pack_nil();
      }
      if (map) str(p, "token_ids");
      p.pack_array(static_cast<std::uint32_t>(s->tokens.size()));
      for (std::uint32_t t : s->tokens) p.pack_uint32(t);
      if (map) str(p, "block_size");
      p.pack_uint64(s->block_size);
      if (map) str(p, "lora_id");
      if (s->lora_id) {
        p.pack_int64(*s->lora_id);
      } else {
        p.pack_nil();
      }
      if (map) str(p, "medium");
      medium(p, s->medium);
      if (!map && o.sglang) {
        if (salted) {
          p.pack_map(1);
          str(p, "cache_salt");
          str(p, s->salt);
        }
        continue;
      }
      if (map || salted) {
        if (map) str(p, "lora_name");
        p.pack_nil();
      }
      if (salted) {
        if (map) str(p, "extra_keys");
        p.pack_array(static_cast<std::uint32_t>(s->hashes.size()));
        for (std::size_t i = 0; i < s->hashes.size(); ++i) {
          if (i == 0) {
            p.pack_array(1);
            str(p, s->salt);
          } else {
            p.pack_nil();
          }
        }
      }
      if (map && o.unknown_fields) {
        str(p, "kv_cache_spec_kind");
        str(p, "full_attention");
        str(p, "a_field_from_the_future");
        p.pack_array(2);
        p.pack_uint32(1);
        p.pack_map(0);
      }
    } else if (const auto* r = std::get_if<Removed>(&ev)) {
      if (map) {
        p.pack_map(3);
        str(p, "type");
        str(p, "BlockRemoved");
        str(p, "block_hashes");
      } else {
        p.pack_array(3);
        str(p, "BlockRemoved");
      }
      hashes(p, r->hashes, o.hashes);
      if (map) str(p, "medium");
      medium(p, r->medium);
    } else {
      if (map) {
        p.pack_map(1);
        str(p, "type");
      } else {
        p.pack_array(1);
      }
      str(p, "AllBlocksCleared");
    }
  }
  if (o.unknown_fields) {  // an event type this consumer does not know
    if (map) {
      p.pack_map(2);
      str(p, "type");
      str(p, "BlockPinned");
      str(p, "block_hashes");
      p.pack_array(0);
    } else {
      p.pack_array(2);
      str(p, "BlockPinned");
      p.pack_array(0);
    }
  }
  if (o.rank) {
    if (map) str(p, "data_parallel_rank");
    p.pack_int64(*o.rank);
  }
  if (map && o.unknown_fields) {
    str(p, "publisher_version");
    str(p, "9.9");
  }
  return std::string(buf.data(), buf.size());
}

}  // namespace prefixgate::testing::vllm_wire
