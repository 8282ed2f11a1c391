// One line of prefixgate-engine's /v1/kv_events stream (JSON lines), decoded without applying
// it: upstream_watch.cpp applies what this returns to the replica set, and the fuzz_kv_events
// program feeds it arbitrary bytes.
//
//   EngineEventLine e = parse_engine_event_line(R"({"type":"stored","seq":7,"hash":"9f3a"})");
//   // e.kind == kStored, e.seq == 7, e.hashes == {0x9f3a}
//
// Lines that are not a JSON object with a string "type" are skipped (kSkip): not ours to judge.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/replica_set.h"

namespace prefixgate::gateway::server {

struct EngineEventLine {
  enum class Kind { kSkip, kLoad, kSnapshot, kStored, kRemoved, kCleared, kUnknown };
  Kind kind = Kind::kSkip;
  std::string type;       // the line's "type", for the events metric (kind != kSkip)
  std::uint64_t seq = 0;  // 0 when absent or not a positive number
  LoadReport load;        // kLoad
  // kStored, kRemoved: how many blocks, and so sequence numbers from `seq` on, the line stands
  // for: 1 for a line with "hash", the length of "hashes" for a run of blocks on one line (an
  // engine asked with ?batch=1).
  std::size_t blocks = 1;
  // kStored, kRemoved with "hash": the block's hash, none when it is malformed (the line still
  // takes its place in the sequence). Not a vector: one-block lines come by the dozen, and an
  // allocation each would show.
  std::optional<std::uint64_t> hash;
  // kSnapshot, and kStored or kRemoved with "hashes": every block whose hash is well-formed.
  std::vector<std::uint64_t> hashes;
};

EngineEventLine parse_engine_event_line(std::string_view line);
// The same decoding with simdjson's DOM parser for every line: what parse_engine_event_line
// answers, at its cost (the tests and fuzz_kv_events compare the two).
EngineEventLine parse_engine_event_line_dom(std::string_view line);

}  // namespace prefixgate::gateway::server
