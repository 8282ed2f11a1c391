// The common lines of prefixgate-engine's /v1/kv_events stream decoded by a plain scan, without
// a JSON parser: a "stored", "removed" or "cleared" line is a flat object of short ASCII strings
// and integers (or, for a run of blocks, an array of hash strings), and an engine sends one per
// block it stores or evicts (dozens per request), or per run of them with ?batch=1. Set
// up for each line, simdjson's DOM parser cost about 1,850 instructions per line, a fifth of the
// gateway's instructions on an agent conversation. This scan matches the engine's own layout
// literally first (about three times faster than the DOM parser: gateway_bench BM_EngineEventLine),
// then scans any other flat object member by member.
//
// It decodes only what it can decode exactly as the DOM parser would (engine_events.cpp): an
// object of members whose keys and string values hold no escapes, control or non-ASCII bytes,
// whose numbers are unsigned integers of at most 19 digits, with "type", "seq" and "hash" each
// at most once, and whose type is not "load" or "snapshot"; a run only in the engine's own
// layout, each hash 16 hex digits. Anything else returns nullopt and
// goes to the DOM parser, so the two cannot disagree (the fuzz_kv_events program checks it).
//
//   if (auto e = scan_flat_event_line(R"({"type":"stored","seq":7,"hash":"9f3a"})")) use(*e);
#pragma once

#include <optional>
#include <string_view>

#include "server/engine_events.h"

namespace prefixgate::gateway::server {

std::optional<EngineEventLine> scan_flat_event_line(std::string_view line);

}  // namespace prefixgate::gateway::server
