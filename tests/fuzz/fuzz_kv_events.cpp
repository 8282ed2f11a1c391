// The KV-event parsers on arbitrary bytes. The first byte picks the parser:
//   even: a vLLM/SGLang msgpack payload (kv_events::decode_event_batch); what its cursor scan
//         answers must be what msgpack-c++'s object tree decodes; a batch that decodes
//         re-encodes (map and array form) to bytes that decode and re-encode to the same bytes;
//   odd:  prefixgate-engine's /v1/kv_events JSON lines (a block or a run of blocks each), split
//         at '\n', each through the parser the gateway applies them with, which must decode it
//         as the DOM parser alone does.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "prefixgate/kv_events/wire.h"
#include "server/engine_events.h"
#include "wire_scan.h"

namespace {

using namespace prefixgate;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_kv_events: %s\n", what);
  std::abort();
}

// The scan's batch is the tree's, event for event (the time bit for bit: it may be a NaN).
bool same_batch(const kv_events::EventBatch& a, const kv_events::EventBatch& b) {
  std::uint64_t ta = 0, tb = 0;
  std::memcpy(&ta, &a.ts, sizeof ta);
  std::memcpy(&tb, &b.ts, sizeof tb);
  return ta == tb && a.data_parallel_rank == b.data_parallel_rank &&
         a.unknown_events == b.unknown_events && a.events == b.events;
}

void check_msgpack(std::string_view payload) {
  const std::span bytes(reinterpret_cast<const std::uint8_t*>(payload.data()), payload.size());
  if (const auto scanned = kv_events::internal::scan_event_batch(bytes)) {
    const auto tree = kv_events::internal::decode_event_batch_tree(bytes);
    if (!tree) fail("the scan decodes a batch the object tree refuses");
    if (!same_batch(*scanned, *tree))
      fail("the scan and the object tree decode a batch differently");
  }
  auto batch = kv_events::decode_event_batch(payload);
  if (!batch) {
    if (batch.error().message.empty()) fail("an error without a message");
    return;
  }
  for (const kv_events::WireForm form : {kv_events::WireForm::kMap, kv_events::WireForm::kArray}) {
    const std::string encoded = kv_events::encode_event_batch(*batch, form);
    auto decoded = kv_events::decode_event_batch(encoded);
    if (!decoded) fail("an encoded batch does not decode");
    if (decoded->events.size() != batch->events.size()) fail("events lost in a round trip");
    if (kv_events::encode_event_batch(*decoded, form) != encoded) fail("round trip differs");
  }
}

void check_lines(std::string_view text) {
  using Kind = gateway::server::EngineEventLine::Kind;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(pos, nl - pos);
    const auto e = gateway::server::parse_engine_event_line(line);
    const auto dom = gateway::server::parse_engine_event_line_dom(line);
    if (e.kind != dom.kind || e.type != dom.type || e.seq != dom.seq || e.hash != dom.hash ||
        e.hashes != dom.hashes || e.blocks != dom.blocks) {
      fail("the scan and the DOM parser decode a line differently");
    }
    if ((e.kind == Kind::kStored || e.kind == Kind::kRemoved) &&
        ((e.hash && !e.hashes.empty()) || e.hashes.size() > e.blocks)) {
      fail("a stored/removed line with both a hash and a run, or more hashes than blocks");
    }
    if (e.kind == Kind::kSkip && !e.type.empty()) fail("a skipped line with a type");
    pos = nl + 1;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    check_msgpack(rest);
  } else {
    check_lines(rest);
  }
  return 0;
}
