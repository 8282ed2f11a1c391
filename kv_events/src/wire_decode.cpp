// decode_event_batch: the common batches by a cursor over their bytes (wire_scan.h); the others
// by msgpack-c++, which parses the payload into an object tree under limits derived from the
// payload's size (no count in the input can make it allocate more than a small multiple of that
// size), then the tree is read field by field into typed events. msgpack-c++ throws on malformed
// input; every exception stops here and becomes an Error.
#include <xxhash.h>

#include <limits>
#include <msgpack.hpp>
#include <new>

#include "prefixgate/kv_events/wire.h"
#include "wire_scan.h"

namespace prefixgate::kv_events {
namespace {

using msgpack::object;
namespace t = msgpack::type;

// Deeper than any batch (batch, events, event, extra_keys, one block's keys, a key's tuple).
constexpr std::size_t kMaxDepth = 16;

Error bad(const std::string& what) {
  return make_error(ErrorCode::kInvalidValue, "kv event batch: " + what);
}

bool is_nil(const object* o) {
  return o == nullptr || o->type == t::NIL;
}

std::optional<std::string_view> as_str(const object& o) {
  if (o.type != t::STR) return std::nullopt;
  return std::string_view(o.via.str.ptr, o.via.str.size);
}

std::optional<std::uint64_t> as_uint(const object& o) {
  if (o.type != t::POSITIVE_INTEGER) return std::nullopt;
  return o.via.u64;
}

std::optional<double> as_number(const object& o) {
  switch (o.type) {
    case t::FLOAT32:
    case t::FLOAT64: return o.via.f64;
    case t::POSITIVE_INTEGER: return static_cast<double>(o.via.u64);
    case t::NEGATIVE_INTEGER: return static_cast<double>(o.via.i64);
    default: return std::nullopt;
  }
}

std::optional<EngineHash> as_hash(const object& o) {
  switch (o.type) {
    case t::POSITIVE_INTEGER: return o.via.u64;
    case t::NEGATIVE_INTEGER: return static_cast<EngineHash>(o.via.i64);
    case t::BIN:
      return fold_digest(
          std::span(reinterpret_cast<const std::uint8_t*>(o.via.bin.ptr), o.via.bin.size));
    case t::STR:
      return fold_digest(
          std::span(reinterpret_cast<const std::uint8_t*>(o.via.str.ptr), o.via.str.size));
    default: return std::nullopt;
  }
}

std::span<const object> as_array(const object& o) {
  return std::span<const object>(o.via.array.ptr, o.via.array.size);
}

// An event's fields, however they were encoded: by position after the tag (array form) or by
// name (map form).
class Fields {
 public:
  static Fields of_array(std::span<const object> after_tag) { return Fields(after_tag, nullptr); }
  static Fields of_map(const object& map) { return Fields({}, &map); }

  // The field at `position` (array form) or named `name` (map form); null when absent.
  const object* get(std::size_t position, std::string_view name) const {
    if (map_ == nullptr) return position < array_.size() ? &array_[position] : nullptr;
    for (std::uint32_t i = 0; i < map_->via.map.size; ++i) {
      const msgpack::object_kv& kv = map_->via.map.ptr[i];
      if (as_str(kv.key) == name) return &kv.val;
    }
    return nullptr;
  }

 private:
  Fields(std::span<const object> array, const object* map) : array_(array), map_(map) {}
  std::span<const object> array_;
  const object* map_;
};

Result<std::vector<EngineHash>> read_hashes(const object* o, const char* event) {
  if (o == nullptr || o->type != t::ARRAY) {
    return bad(std::string(event) + ".block_hashes: expected an array");
  }
  std::vector<EngineHash> out;
  out.reserve(o->via.array.size);
  for (const object& h : as_array(*o)) {
    auto v = as_hash(h);
    if (!v) return bad(std::string(event) + ".block_hashes: expected integers or bytes");
    out.push_back(*v);
  }
  return out;
}

Result<Medium> read_medium(const object* o, const char* event) {
  if (is_nil(o)) return Medium::kGpu;
  auto s = as_str(*o);
  if (!s) return bad(std::string(event) + ".medium: expected a string or nil");
  return *s == "GPU" || *s == "gpu" ? Medium::kGpu : Medium::kOffload;
}

Result<std::uint32_t> read_group(const object* o, const char* event) {
  if (is_nil(o)) return 0U;
  auto v = as_uint(*o);
  if (!v || *v > std::numeric_limits<std::uint32_t>::max()) {
    return bad(std::string(event) + ".group_idx: expected a small non-negative integer");
  }
  return static_cast<std::uint32_t>(*v);
}

// vLLM's extra_keys: one entry per block, each nil or a tuple (LoRA name, multimodal ids, the
// cache salt on the first block of a request, prompt-embedding hashes). The first block's
// string entry, when the chain starts at the root, is taken as the cache salt.
std::string salt_from_extra_keys(const object* o) {
  if (is_nil(o) || o->type != t::ARRAY || o->via.array.size == 0) return {};
  const object& first = o->via.array.ptr[0];
  if (first.type != t::ARRAY) return {};
  std::string salt;
  for (const object& k : as_array(first)) {
    if (auto s = as_str(k)) salt = std::string(*s);
  }
  return salt;
}

Result<BlockStored> read_stored(const Fields& f) {
  BlockStored e;
  auto hashes = read_hashes(f.get(0, "block_hashes"), "BlockStored");
  if (!hashes) return hashes.error();
  e.block_hashes = std::move(*hashes);
  if (const object* p = f.get(1, "parent_block_hash"); !is_nil(p)) {
    auto h = as_hash(*p);
    if (!h) return bad("BlockStored.parent_block_hash: expected an integer, bytes or nil");
    e.parent = *h;
  }
  if (const object* tok = f.get(2, "token_ids"); !is_nil(tok)) {
    if (tok->type != t::ARRAY) return bad("BlockStored.token_ids: expected an array");
    e.token_ids.reserve(tok->via.array.size);
    for (const object& id : as_array(*tok)) {
      auto v = as_uint(id);
      if (!v || *v > std::numeric_limits<std::uint32_t>::max()) {
        return bad("BlockStored.token_ids: expected non-negative 32-bit integers");
      }
      e.token_ids.push_back(static_cast<std::uint32_t>(*v));
    }
  }
  if (const object* bs = f.get(3, "block_size"); !is_nil(bs)) {
    auto v = as_uint(*bs);
    if (!v || *v > (1U << 20)) return bad("BlockStored.block_size: expected a block size");
    e.block_size = static_cast<std::size_t>(*v);
  }
  if (const object* lora = f.get(4, "lora_id"); !is_nil(lora)) {
    if (lora->type != t::POSITIVE_INTEGER && lora->type != t::NEGATIVE_INTEGER) {
      return bad("BlockStored.lora_id: expected an integer or nil");
    }
    e.lora = true;
  }
  auto medium = read_medium(f.get(5, "medium"), "BlockStored");
  if (!medium) return medium.error();
  e.medium = *medium;
  // Position 6: vLLM's lora_name (a string) or SGLang's metadata ({"cache_salt": ...}).
  if (const object* o = f.get(6, "lora_name"); !is_nil(o)) {
    if (o->type == t::STR) {
      e.lora = true;
    } else if (o->type == t::MAP) {
      if (const object* salt = Fields::of_map(*o).get(0, "cache_salt"); salt && as_str(*salt)) {
        e.cache_salt = std::string(*as_str(*salt));
      }
    } else {
      return bad("BlockStored.lora_name: expected a string or nil");
    }
  }
  if (const object* meta = f.get(SIZE_MAX, "metadata"); meta && meta->type == t::MAP) {
    if (const object* salt = Fields::of_map(*meta).get(0, "cache_salt"); salt && as_str(*salt)) {
      e.cache_salt = std::string(*as_str(*salt));
    }
  }
  if (!e.parent) {
    if (std::string salt = salt_from_extra_keys(f.get(7, "extra_keys")); !salt.empty()) {
      e.cache_salt = std::move(salt);
    }
  }
  auto group = read_group(f.get(8, "group_idx"), "BlockStored");
  if (!group) return group.error();
  e.group = *group;
  return e;
}

Result<BlockRemoved> read_removed(const Fields& f) {
  BlockRemoved e;
  auto hashes = read_hashes(f.get(0, "block_hashes"), "BlockRemoved");
  if (!hashes) return hashes.error();
  e.block_hashes = std::move(*hashes);
  auto medium = read_medium(f.get(1, "medium"), "BlockRemoved");
  if (!medium) return medium.error();
  e.medium = *medium;
  auto group = read_group(f.get(2, "group_idx"), "BlockRemoved");
  if (!group) return group.error();
  e.group = *group;
  return e;
}

// One event, array or map form. nullopt (with `unknown` counted) for a type this decoder does
// not know.
Result<std::optional<Event>> read_event(const object& o, std::size_t& unknown) {
  std::optional<std::string_view> tag;
  Fields fields = Fields::of_array({});
  if (o.type == t::ARRAY && o.via.array.size > 0) {
    tag = as_str(o.via.array.ptr[0]);
    fields = Fields::of_array(as_array(o).subspan(1));
  } else if (o.type == t::MAP) {
    fields = Fields::of_map(o);
    if (const object* type = fields.get(0, "type")) tag = as_str(*type);
  }
  if (!tag) return bad("an event is neither [tag, ...] nor {\"type\": tag, ...}");
  if (*tag == "BlockStored") {
    auto e = read_stored(fields);
    if (!e) return e.error();
    return std::optional<Event>(std::move(*e));
  }
  if (*tag == "BlockRemoved") {
    auto e = read_removed(fields);
    if (!e) return e.error();
    return std::optional<Event>(std::move(*e));
  }
  if (*tag == "AllBlocksCleared") return std::optional<Event>(AllBlocksCleared{});
  ++unknown;
  return std::optional<Event>();
}

Result<EventBatch> read_batch(const object& root) {
  const object* ts = nullptr;
  const object* events = nullptr;
  const object* rank = nullptr;
  if (root.type == t::ARRAY) {
    const auto items = as_array(root);
    if (items.size() < 2) return bad("expected [ts, events, ...]");
    ts = &items[0];
    events = &items[1];
    if (items.size() > 2) rank = &items[2];
  } else if (root.type == t::MAP) {
    const Fields f = Fields::of_map(root);
    ts = f.get(0, "ts");
    events = f.get(0, "events");
    rank = f.get(0, "data_parallel_rank");
    if (rank == nullptr) rank = f.get(0, "attn_dp_rank");
  } else {
    return bad("expected an array or a map");
  }
  EventBatch batch;
  if (ts == nullptr || !as_number(*ts)) return bad("ts: expected a number");
  batch.ts = *as_number(*ts);
  if (events == nullptr || events->type != t::ARRAY) return bad("events: expected an array");
  if (!is_nil(rank)) {
    if (rank->type == t::POSITIVE_INTEGER) {
      batch.data_parallel_rank = static_cast<std::int64_t>(
          std::min<std::uint64_t>(rank->via.u64, std::numeric_limits<std::int64_t>::max()));
    } else if (rank->type == t::NEGATIVE_INTEGER) {
      batch.data_parallel_rank = rank->via.i64;
    } else {
      return bad("data_parallel_rank: expected an integer or nil");
    }
  }
  batch.events.reserve(events->via.array.size);
  for (const object& o : as_array(*events)) {
    auto e = read_event(o, batch.unknown_events);
    if (!e) return e.error();
    if (*e) batch.events.push_back(std::move(**e));
  }
  return batch;
}

}  // namespace

Result<EventBatch> decode_event_batch(std::span<const std::uint8_t> payload) {
  if (auto batch = internal::scan_event_batch(payload)) return std::move(*batch);
  return internal::decode_event_batch_tree(payload);
}

Result<EventBatch> internal::decode_event_batch_tree(std::span<const std::uint8_t> payload) {
  if (payload.empty()) return bad("empty payload");
  // Every array element, map entry or string byte takes at least one byte of input.
  const std::size_t n = payload.size();
  const msgpack::unpack_limit limit(n, n / 2 + 1, n, n, n, kMaxDepth);
  try {
    std::size_t offset = 0;
    const msgpack::object_handle handle = msgpack::unpack(
        reinterpret_cast<const char*>(payload.data()), n, offset, nullptr, nullptr, limit);
    if (offset != n) return bad("trailing bytes after the batch");
    return read_batch(handle.get());
  } catch (const std::bad_alloc&) {
    return bad("too large to decode");
  } catch (const std::exception& e) {
    return bad(std::string("not msgpack (") + e.what() + ")");
  } catch (...) {
    return bad("not msgpack");
  }
}

EngineHash fold_digest(std::span<const std::uint8_t> digest) {
  return XXH3_64bits(digest.data(), digest.size());
}

std::optional<std::int64_t> decode_sequence(std::string_view frame) {
  if (frame.size() != 8) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : frame) v = (v << 8) | static_cast<std::uint8_t>(c);
  return static_cast<std::int64_t>(v);
}

std::string encode_sequence(std::int64_t seq) {
  std::string out(8, '\0');
  auto v = static_cast<std::uint64_t>(seq);
  for (int i = 7; i >= 0; --i) {
    out[static_cast<std::size_t>(i)] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  return out;
}

std::optional<std::string> endpoint_for_rank(std::string_view endpoint, std::size_t rank) {
  if (rank == 0) return std::string(endpoint);
  if (endpoint.starts_with("inproc://")) {
    return std::string(endpoint) + "_dp" + std::to_string(rank);
  }
  if (!endpoint.starts_with("tcp://")) return std::nullopt;
  const std::size_t colon = endpoint.rfind(':');
  if (colon == std::string_view::npos || colon < 6) return std::nullopt;
  const std::string_view digits = endpoint.substr(colon + 1);
  unsigned long port = 0;
  if (digits.empty() || digits.size() > 5) return std::nullopt;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    port = port * 10 + static_cast<unsigned long>(c - '0');
  }
  if (port + rank > 65535) return std::nullopt;
  return std::string(endpoint.substr(0, colon + 1)) + std::to_string(port + rank);
}

}  // namespace prefixgate::kv_events
