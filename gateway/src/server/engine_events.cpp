#include "server/engine_events.h"

#include <charconv>
#include <cmath>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::gateway::server {
namespace {

bool parse_hash(const json::Value* v, std::uint64_t& out) {
  if (!v || !v->is_string()) return false;
  const std::string& s = v->as_string();
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
  return ec == std::errc() && end == s.data() + s.size();
}

// A count field: a positive number, clamped to what size_t holds; 0 otherwise. (A plain cast of
// a double past 2^64, or of NaN, is undefined behaviour.)
std::size_t count(const json::Value& o, std::string_view key) {
  const json::Value* v = o.find(key);
  if (!v || !v->is_number()) return 0;
  const double d = v->as_number().value;
  if (!(d > 0)) return 0;
  if (d >= 18446744073709551615.0) return static_cast<std::size_t>(-1);
  return static_cast<std::size_t>(d);
}

// A rate field: a positive finite number, else 0 (not announced).
double rate(const json::Value& o, std::string_view key) {
  const json::Value* v = o.find(key);
  if (!v || !v->is_number()) return 0;
  const double x = v->as_number().value;
  return x > 0 && std::isfinite(x) ? x : 0;
}

}  // namespace

EngineEventLine parse_engine_event_line(std::string_view line) {
  EngineEventLine e;
  auto doc = json::parse(line);
  if (!doc || !doc->is_object()) return e;
  const json::Value* type = doc->find("type");
  if (!type || !type->is_string()) return e;
  e.type = type->as_string();
  if (e.type == "load") {
    e.kind = EngineEventLine::Kind::kLoad;
    e.load = LoadReport{count(*doc, "running"),
                        count(*doc, "waiting"),
                        count(*doc, "kv_pages_used"),
                        count(*doc, "kv_pages_total"),
                        count(*doc, "tokens_queued_for_prefill"),
                        count(*doc, "preemptions_total"),
                        rate(*doc, "prefill_seconds_per_token"),
                        rate(*doc, "decode_seconds_per_sequence"),
                        rate(*doc, "admission_wait_seconds"),
                        count(*doc, "batch_slots"),
                        rate(*doc, "admission_interval_seconds")};
    return e;
  }
  e.seq = count(*doc, "seq");
  std::uint64_t h = 0;
  if (e.type == "snapshot") {
    e.kind = EngineEventLine::Kind::kSnapshot;
    if (const json::Value* blocks = doc->find("blocks"); blocks && blocks->is_array()) {
      for (const json::Value& b : blocks->as_array()) {
        if (b.is_object() && parse_hash(b.find("hash"), h)) e.hashes.push_back(h);
      }
    }
  } else if (e.type == "stored" || e.type == "removed") {
    e.kind = e.type == "stored" ? EngineEventLine::Kind::kStored : EngineEventLine::Kind::kRemoved;
    if (parse_hash(doc->find("hash"), h)) e.hashes.push_back(h);
  } else if (e.type == "cleared") {
    e.kind = EngineEventLine::Kind::kCleared;
  } else {
    e.kind = EngineEventLine::Kind::kUnknown;
  }
  return e;
}

}  // namespace prefixgate::gateway::server
