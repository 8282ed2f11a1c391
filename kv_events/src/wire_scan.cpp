#include "wire_scan.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <string_view>

#include "prefixgate/kv_events/wire.h"

namespace prefixgate::kv_events::internal {
namespace {

// Nesting a value may have below the batch: deeper than any batch vLLM or SGLang sends (batch,
// events, event, extra_keys, a block's keys, a key's tuple), and under the tree's own limit
// (wire_decode.cpp), so that nothing the scan accepts is something the tree would refuse.
constexpr int kMaxDepth = 12;

// A read position in a payload. Each read takes one value of its kind and answers nullopt (or
// false) for anything else, its position then unspecified: the caller gives up on the payload.
class Cursor {
 public:
  Cursor(const std::uint8_t* at, const std::uint8_t* end) : at_(at), end_(end) {}

  const std::uint8_t* at() const { return at_; }
  bool at_end() const { return at_ == end_; }
  std::optional<std::uint8_t> peek() const {
    return at_ < end_ ? std::optional<std::uint8_t>(*at_) : std::nullopt;
  }
  bool nil() {
    if (peek() != 0xc0) return false;
    ++at_;
    return true;
  }

  // A non-negative integer in an unsigned format (positive fixint, uint 8-64).
  std::optional<std::uint64_t> uint() {
    const auto b = peek();
    if (!b) return std::nullopt;
    if (*b <= 0x7f) {
      ++at_;
      return *b;
    }
    switch (*b) {
      case 0xcc: return big_endian(1);
      case 0xcd: return big_endian(2);
      case 0xce: return big_endian(4);
      case 0xcf: return big_endian(8);
      default: return std::nullopt;
    }
  }
  // out.size() non-negative integers of at most 32 bits, each in an unsigned format: uint()
  // in a loop of its own, since a BlockStored's token ids are most of a batch's values.
  bool uints32(std::span<std::uint32_t> out) {
    const std::uint8_t* p = at_;
    for (std::uint32_t& v : out) {
      if (p == end_) return false;
      const std::uint8_t b = *p;
      if (b <= 0x7f) {
        v = b;
        ++p;
        continue;
      }
      if (b < 0xcc || b > 0xce || end_ - p < 5) {  // uint 64, not an unsigned integer, the end
        at_ = p;
        const auto u = uint();
        if (!u || *u > std::numeric_limits<std::uint32_t>::max()) return false;
        v = static_cast<std::uint32_t>(*u);
        p = at_;
        continue;
      }
      // uint 8, 16 or 32: four bytes loaded (the rest of the payload has them) and the value's
      // 1, 2 or 4 kept.
      const unsigned width = 1U << (b - 0xcc);
      std::uint32_t x = 0;
      std::memcpy(&x, p + 1, sizeof x);
      if constexpr (std::endian::native == std::endian::little) x = __builtin_bswap32(x);
      v = width == 4 ? x : x >> (32 - 8 * width);
      p += 1 + width;
    }
    at_ = p;
    return true;
  }
  // A float (32 or 64 bits) or a non-negative integer, as a double.
  std::optional<double> number() {
    const auto b = peek();
    if (b == 0xca) {
      const auto bits = big_endian(4);
      if (!bits) return std::nullopt;
      float f = 0;
      const auto u = static_cast<std::uint32_t>(*bits);
      std::memcpy(&f, &u, sizeof f);
      return f;
    }
    if (b == 0xcb) {
      const auto bits = big_endian(8);
      if (!bits) return std::nullopt;
      double d = 0;
      std::memcpy(&d, &*bits, sizeof d);
      return d;
    }
    const auto u = uint();
    if (!u) return std::nullopt;
    return static_cast<double>(*u);
  }
  std::optional<std::uint32_t> array_header() { return header(0x90, 0xdc, 0xdd); }
  std::optional<std::uint32_t> map_header() { return header(0x80, 0xde, 0xdf); }
  bool is_array() const {
    const auto b = peek();
    return b && ((*b & 0xf0) == 0x90 || *b == 0xdc || *b == 0xdd);
  }
  bool is_map() const {
    const auto b = peek();
    return b && ((*b & 0xf0) == 0x80 || *b == 0xde || *b == 0xdf);
  }
  std::optional<std::string_view> str() {
    const auto b = peek();
    if (!b) return std::nullopt;
    std::optional<std::uint64_t> n;
    if ((*b & 0xe0) == 0xa0) {
      ++at_;
      n = *b & 0x1f;
    } else if (*b == 0xd9 || *b == 0xda || *b == 0xdb) {
      n = big_endian(std::size_t{1} << (*b - 0xd9));
    }
    const auto bytes = body(n);
    if (!bytes) return std::nullopt;
    return std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  }
  std::optional<std::span<const std::uint8_t>> bin() {
    const auto b = peek();
    if (!b || *b < 0xc4 || *b > 0xc6) return std::nullopt;
    return body(big_endian(std::size_t{1} << (*b - 0xc4)));
  }

  // Steps over one value of any type, nested at most `depth` deep.
  bool skip(int depth) {
    if (at_ >= end_ || depth < 0) return false;
    const std::uint8_t b = *at_;
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
      ++at_;
      return true;
    }
    if (b <= 0x9f || b == 0xdc || b == 0xdd || b == 0xde || b == 0xdf) {
      const bool map = b <= 0x8f || b == 0xde || b == 0xdf;
      const auto n = map ? map_header() : array_header();
      if (!n) return false;
      const std::uint64_t values = map ? 2 * std::uint64_t{*n} : *n;
      for (std::uint64_t i = 0; i < values; ++i) {
        if (!skip(depth - 1)) return false;
      }
      return true;
    }
    switch (b) {
      case 0xd9:
      case 0xda:
      case 0xdb: return str().has_value();
      case 0xc4:
      case 0xc5:
      case 0xc6: return bin().has_value();
      case 0xca: return fixed(1 + 4);
      case 0xcb: return fixed(1 + 8);
      case 0xcc:
      case 0xd0: return fixed(1 + 1);
      case 0xcd:
      case 0xd1: return fixed(1 + 2);
      case 0xce:
      case 0xd2: return fixed(1 + 4);
      case 0xcf:
      case 0xd3: return fixed(1 + 8);
      case 0xd4: return fixed(2 + 1);  // fixext: a type byte, then 1-16 bytes
      case 0xd5: return fixed(2 + 2);
      case 0xd6: return fixed(2 + 4);
      case 0xd7: return fixed(2 + 8);
      case 0xd8: return fixed(2 + 16);
      case 0xc7:
      case 0xc8:
      case 0xc9: {
        const auto n = big_endian(std::size_t{1} << (b - 0xc7));
        return n && fixed(1 + static_cast<std::size_t>(*n));  // the type byte, then the data
      }
      default: return (b & 0xe0) == 0xa0 && str().has_value();  // fixstr; 0xc1 is never used
    }
  }

 private:
  // The `n`-byte big-endian number after the format byte, which is consumed with it.
  std::optional<std::uint64_t> big_endian(std::size_t n) {
    if (static_cast<std::size_t>(end_ - at_) < 1 + n) return std::nullopt;
    std::uint64_t v = 0;
    for (std::size_t i = 1; i <= n; ++i) v = v << 8 | at_[i];
    at_ += 1 + n;
    return v;
  }
  std::optional<std::uint32_t> header(std::uint8_t fix, std::uint8_t b16, std::uint8_t b32) {
    const auto b = peek();
    if (!b) return std::nullopt;
    if ((*b & 0xf0) == fix) {
      ++at_;
      return *b & 0x0f;
    }
    std::optional<std::uint64_t> n;
    if (*b == b16) n = big_endian(2);
    if (*b == b32) n = big_endian(4);
    if (!n) return std::nullopt;
    return static_cast<std::uint32_t>(*n);
  }
  std::optional<std::span<const std::uint8_t>> body(std::optional<std::uint64_t> n) {
    if (!n || *n > static_cast<std::uint64_t>(end_ - at_)) return std::nullopt;
    const std::span<const std::uint8_t> out(at_, static_cast<std::size_t>(*n));
    at_ += *n;
    return out;
  }
  bool fixed(std::size_t n) {
    if (static_cast<std::size_t>(end_ - at_) < n) return false;
    at_ += n;
    return true;
  }

  const std::uint8_t* at_;
  const std::uint8_t* end_;
};

// An event's fields, by position after the tag (array form) or by name (map form).
enum Field : std::size_t {
  kBlockHashes,
  kParent,
  kTokenIds,
  kBlockSize,
  kLoraId,
  kMedium,
  kLoraName,  // array form: vLLM's lora_name or SGLang's metadata
  kExtraKeys,
  kGroupIdx,
  kMetadata,  // map form only
  kFieldCount
};

std::optional<Field> field_named(std::string_view name) {
  static constexpr std::array<std::string_view, kFieldCount> kNames = {
      "block_hashes", "parent_block_hash", "token_ids",  "block_size", "lora_id",
      "medium",       "lora_name",         "extra_keys", "group_idx",  "metadata"};
  for (std::size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<Field>(i);
  }
  return std::nullopt;
}

class BatchScan {
 public:
  explicit BatchScan(std::span<const std::uint8_t> payload)
      : begin_(payload.data()), end_(payload.data() + payload.size()) {}

  std::optional<EventBatch> run() {
    Cursor c(begin_, end_);
    EventBatch batch;
    if (c.is_map()) {
      if (!root_map(c, batch)) return std::nullopt;
    } else if (c.is_array()) {
      if (!root_array(c, batch)) return std::nullopt;
    } else {
      return std::nullopt;
    }
    if (!c.at_end()) return std::nullopt;
    return batch;
  }

 private:
  bool root_map(Cursor& c, EventBatch& batch) {
    const auto n = c.map_header();
    if (!n) return false;
    bool ts = false, events = false, dp_rank = false, attn_rank = false;
    std::optional<std::int64_t> attn;
    for (std::uint32_t i = 0; i < *n; ++i) {
      const auto key = c.str();
      if (!key) return false;
      if (*key == "ts") {
        if (ts || !(ts = read_ts(c, batch))) return false;
      } else if (*key == "events") {
        if (events || !(events = read_events(c, batch))) return false;
      } else if (*key == "data_parallel_rank") {
        if (dp_rank || !(dp_rank = read_rank(c, batch.data_parallel_rank))) return false;
      } else if (*key == "attn_dp_rank") {
        if (attn_rank || !(attn_rank = read_rank(c, attn))) return false;
      } else if (!c.skip(kMaxDepth - 1)) {
        return false;
      }
    }
    if (!dp_rank) batch.data_parallel_rank = attn;
    return ts && events;
  }

  bool root_array(Cursor& c, EventBatch& batch) {
    const auto n = c.array_header();
    if (!n || *n < 2 || !read_ts(c, batch) || !read_events(c, batch)) return false;
    if (*n > 2 && !read_rank(c, batch.data_parallel_rank)) return false;
    for (std::uint32_t i = 3; i < *n; ++i) {
      if (!c.skip(kMaxDepth - 1)) return false;
    }
    return true;
  }

  static bool read_ts(Cursor& c, EventBatch& batch) {
    const auto ts = c.number();
    if (!ts) return false;
    batch.ts = *ts;
    return true;
  }
  static bool read_rank(Cursor& c, std::optional<std::int64_t>& rank) {
    if (c.nil()) {
      rank.reset();
      return true;
    }
    const auto v = c.uint();
    if (!v) return false;
    rank = static_cast<std::int64_t>(
        std::min<std::uint64_t>(*v, std::numeric_limits<std::int64_t>::max()));
    return true;
  }

  bool read_events(Cursor& c, EventBatch& batch) {
    const auto n = c.array_header();
    if (!n) return false;
    batch.events.reserve(std::min<std::size_t>(*n, static_cast<std::size_t>(end_ - c.at())));
    for (std::uint32_t i = 0; i < *n; ++i) {
      if (!read_event(c, batch)) return false;
    }
    return true;
  }

  // One event: its tag first (as vLLM and SGLang write it), then its fields read as they come.
  bool read_event(Cursor& c, EventBatch& batch) {
    const bool map = c.is_map();
    if (!map && !c.is_array()) return false;
    const auto n = map ? c.map_header() : c.array_header();
    if (!n || *n == 0) return false;
    if (map && c.str() != std::string_view("type")) return false;  // a tag elsewhere: the tree's
    const auto tag = c.str();
    if (!tag) return false;
    if (*tag == "BlockStored") return read_stored(c, map, *n - 1, batch);
    if (*tag == "BlockRemoved") return read_removed(c, map, *n - 1, batch);
    if (*tag == "AllBlocksCleared") {
      batch.events.emplace_back(AllBlocksCleared{});
    } else {
      ++batch.unknown_events;
    }
    return skip_fields(c, map, *n - 1);
  }

  static bool skip_fields(Cursor& c, bool map, std::uint32_t n) {
    for (std::uint32_t i = 0; i < n; ++i) {
      if ((map && !c.str()) || !c.skip(kMaxDepth - 3)) return false;
    }
    return true;
  }

  // The next field of an event with `n` after its tag: its name or position, and the cursor on
  // its value. Unknown names and positions past `positions` are stepped over; nullopt at the
  // end; false in `ok` on anything malformed or a name seen twice.
  template <std::size_t kPositions>
  static std::optional<Field> next_field(Cursor& c, bool map, std::uint32_t n, std::uint32_t& i,
                                         const std::array<Field, kPositions>& positions,
                                         std::uint32_t& seen, bool& ok) {
    for (; i < n; ++i) {
      std::optional<Field> f;
      if (map) {
        const auto key = c.str();
        if (!key) break;
        f = field_named(*key);
      } else if (i < kPositions) {
        f = positions[i];
      }
      if (f) {
        if (seen & (1U << *f)) break;
        seen |= 1U << *f;
        ++i;
        return f;
      }
      if (!c.skip(kMaxDepth - 3)) break;
    }
    ok = i == n;
    return std::nullopt;
  }

  static std::optional<EngineHash> hash(Cursor& c) {
    if (const auto v = c.uint()) return *v;
    if (const auto b = c.bin()) return fold_digest(*b);
    if (const auto s = c.str()) {
      return fold_digest(std::span(reinterpret_cast<const std::uint8_t*>(s->data()), s->size()));
    }
    return std::nullopt;
  }
  bool read_hashes(Cursor& c, std::vector<EngineHash>& out) const {
    const auto n = c.array_header();
    if (!n || *n > static_cast<std::size_t>(end_ - c.at())) return false;  // a byte each at least
    out.reserve(*n);
    for (std::uint32_t i = 0; i < *n; ++i) {
      const auto h = hash(c);
      if (!h) return false;
      out.push_back(*h);
    }
    return true;
  }
  static bool read_medium(Cursor& c, Medium& medium) {
    if (c.nil()) return true;
    const auto s = c.str();
    if (!s) return false;
    medium = *s == "GPU" || *s == "gpu" ? Medium::kGpu : Medium::kOffload;
    return true;
  }
  static bool read_group(Cursor& c, std::uint32_t& group) {
    if (c.nil()) return true;
    const auto v = c.uint();
    if (!v || *v > std::numeric_limits<std::uint32_t>::max()) return false;
    group = static_cast<std::uint32_t>(*v);
    return true;
  }

  bool read_stored(Cursor& c, bool map, std::uint32_t n, EventBatch& batch) const {
    static constexpr std::array<Field, 9> kPositions = {kBlockHashes, kParent,    kTokenIds,
                                                        kBlockSize,   kLoraId,    kMedium,
                                                        kLoraName,    kExtraKeys, kGroupIdx};
    BlockStored e;
    std::string salt;  // from extra_keys, taken when the chain starts at the root
    std::uint32_t i = 0, seen = 0;
    bool ok = true;
    while (const auto f = next_field(c, map, n, i, kPositions, seen, ok)) {
      bool read = true;
      switch (*f) {
        case kBlockHashes: read = read_hashes(c, e.block_hashes); break;
        case kParent:
          if (!c.nil()) {
            const auto h = hash(c);
            read = h.has_value();
            if (h) e.parent = *h;
          }
          break;
        case kTokenIds: read = c.nil() || read_tokens(c, e.token_ids); break;
        case kBlockSize:
          if (!c.nil()) {
            const auto v = c.uint();
            read = v && *v <= (1U << 20);
            if (read) e.block_size = static_cast<std::size_t>(*v);
          }
          break;
        case kLoraId:
          // A negative id, or a type the tree refuses: the tree's.
          if (!c.nil()) read = (e.lora = c.uint().has_value());
          break;
        case kMedium: read = read_medium(c, e.medium); break;
        case kLoraName:
          // SGLang's metadata, or a type the tree refuses: the tree's.
          if (!c.nil()) read = (e.lora = c.str().has_value());
          break;
        case kExtraKeys: read = read_salt(c, salt); break;
        case kGroupIdx: read = read_group(c, e.group); break;
        case kMetadata: read = !c.is_map() && c.skip(kMaxDepth - 3); break;  // a map: SGLang's
        case kFieldCount: read = false; break;
      }
      if (!read) return false;
    }
    if (!ok || !(seen & (1U << kBlockHashes))) return false;
    if (!e.parent && !salt.empty()) e.cache_salt = std::move(salt);
    batch.events.emplace_back(std::move(e));
    return true;
  }

  bool read_removed(Cursor& c, bool map, std::uint32_t n, EventBatch& batch) const {
    static constexpr std::array<Field, 3> kPositions = {kBlockHashes, kMedium, kGroupIdx};
    BlockRemoved e;
    std::uint32_t i = 0, seen = 0;
    bool ok = true;
    while (const auto f = next_field(c, map, n, i, kPositions, seen, ok)) {
      bool read = true;
      if (*f == kBlockHashes) {
        read = read_hashes(c, e.block_hashes);
      } else if (*f == kMedium) {
        read = read_medium(c, e.medium);
      } else if (*f == kGroupIdx) {
        read = read_group(c, e.group);
      } else {
        read = c.skip(kMaxDepth - 3);  // another event's field: not read
      }
      if (!read) return false;
    }
    if (!ok || !(seen & (1U << kBlockHashes))) return false;
    batch.events.emplace_back(std::move(e));
    return true;
  }

  bool read_tokens(Cursor& c, std::vector<std::uint32_t>& out) const {
    const auto n = c.array_header();
    if (!n || *n > static_cast<std::size_t>(end_ - c.at())) return false;  // a byte each at least
    out.resize(*n);
    return c.uints32(out);
  }

  // vLLM's extra_keys, stepped over: the last string of the first block's tuple, when that is an
  // array, in `salt`.
  static bool read_salt(Cursor& c, std::string& salt) {
    if (c.nil()) return true;
    const auto n = c.array_header();
    if (!n) return false;
    for (std::uint32_t b = 0; b < *n; ++b) {
      if (b > 0 || !c.is_array()) {
        if (!c.skip(kMaxDepth - 4)) return false;
        continue;
      }
      const auto m = c.array_header();
      if (!m) return false;
      for (std::uint32_t k = 0; k < *m; ++k) {
        if (const auto s = c.str()) {
          salt = std::string(*s);
        } else if (!c.skip(kMaxDepth - 5)) {
          return false;
        }
      }
    }
    return true;
  }

  const std::uint8_t* begin_;
  const std::uint8_t* end_;
};

}  // namespace

std::optional<EventBatch> scan_event_batch(std::span<const std::uint8_t> payload) {
  return BatchScan(payload).run();
}

}  // namespace prefixgate::kv_events::internal
