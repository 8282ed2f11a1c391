// parse_engine_event_line: the common lines by a plain scan (engine_event_scan.h), the others
// with simdjson's DOM parser, read field by field from the parser's tape with no tree of values.
#include "server/engine_events.h"

#include <simdjson.h>

#include <charconv>
#include <cmath>
#include <optional>
#include <utility>

#include "server/engine_event_scan.h"

namespace prefixgate::gateway::server {
namespace {

namespace dom = simdjson::dom;

// Lines up to this size reuse the thread's parser; a larger one (the snapshot of a large cache)
// gets a parser of its own, so that its buffers do not stay for the thread's life.
constexpr std::size_t kReusableParserBytes = std::size_t{1} << 16;

bool parse_hash(dom::element v, std::uint64_t& out) {
  std::string_view s;
  if (v.get_string().get(s)) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
  return ec == std::errc() && end == s.data() + s.size();
}

// A member's hash; false when it is absent or malformed.
bool parse_hash(simdjson::simdjson_result<dom::element> v, std::uint64_t& out) {
  dom::element e;
  return !v.get(e) && parse_hash(e, out);
}

// A number field as a double; nullopt when absent or not a number.
std::optional<double> number(dom::object o, std::string_view key) {
  dom::element v;
  if (o.at_key(key).get(v)) return std::nullopt;
  double d = 0;
  if (v.get_double().get(d)) return std::nullopt;  // converts integers too
  return d;
}

// A count field: a positive number, clamped to what size_t holds; 0 otherwise. Integers are
// read exactly; a double past 2^64, or NaN, clamps instead of being cast (undefined behaviour).
std::size_t count(dom::object o, std::string_view key) {
  dom::element v;
  if (o.at_key(key).get(v)) return 0;
  std::uint64_t u = 0;
  if (!v.get_uint64().get(u)) return static_cast<std::size_t>(u);
  double d = 0;
  if (v.get_double().get(d) || !(d > 0)) return 0;
  if (d >= 18446744073709551615.0) return static_cast<std::size_t>(-1);
  return static_cast<std::size_t>(d);
}

// A rate field: a positive finite number, else 0 (not announced).
double rate(dom::object o, std::string_view key) {
  const auto x = number(o, key);
  return x && *x > 0 && std::isfinite(*x) ? *x : 0;
}

EngineEventLine decode(dom::object doc) {
  EngineEventLine e;
  std::string_view type;
  if (doc.at_key("type").get_string().get(type)) return e;
  e.type = type;
  if (type == "load") {
    e.kind = EngineEventLine::Kind::kLoad;
    e.load = LoadReport{count(doc, "running"),
                        count(doc, "waiting"),
                        count(doc, "kv_pages_used"),
                        count(doc, "kv_pages_total"),
                        count(doc, "tokens_queued_for_prefill"),
                        count(doc, "preemptions_total"),
                        rate(doc, "prefill_seconds_per_token"),
                        rate(doc, "decode_seconds_per_sequence"),
                        rate(doc, "admission_wait_seconds"),
                        count(doc, "batch_slots"),
                        rate(doc, "admission_interval_seconds"),
                        rate(doc, "next_end_seconds")};
    return e;
  }
  e.seq = count(doc, "seq");
  std::uint64_t h = 0;
  if (type == "snapshot") {
    e.kind = EngineEventLine::Kind::kSnapshot;
    dom::array blocks;
    if (!doc.at_key("blocks").get_array().get(blocks)) {
      e.hashes.reserve(blocks.size());
      for (dom::element b : blocks) {
        if (b.is_object() && parse_hash(b["hash"], h)) e.hashes.push_back(h);
      }
    }
  } else if (type == "stored" || type == "removed") {
    e.kind = type == "stored" ? EngineEventLine::Kind::kStored : EngineEventLine::Kind::kRemoved;
    dom::array run;
    if (!doc.at_key("hashes").get_array().get(run)) {
      // A run of blocks: each element takes its place in the sequence, well-formed or not.
      e.blocks = run.size();
      e.hashes.reserve(e.blocks);
      for (dom::element b : run) {
        if (parse_hash(b, h)) e.hashes.push_back(h);
      }
    } else if (parse_hash(doc["hash"], h)) {
      e.hash = h;
    }
  } else if (type == "cleared") {
    e.kind = EngineEventLine::Kind::kCleared;
  } else {
    e.kind = EngineEventLine::Kind::kUnknown;
  }
  return e;
}

}  // namespace

EngineEventLine parse_engine_event_line(std::string_view line) {
  if (std::optional<EngineEventLine> e = scan_flat_event_line(line)) return std::move(*e);
  return parse_engine_event_line_dom(line);
}

EngineEventLine parse_engine_event_line_dom(std::string_view line) {
  thread_local dom::parser reused;
  std::optional<dom::parser> once;
  dom::parser& parser = line.size() <= kReusableParserBytes ? reused : once.emplace();
  dom::object doc;
  // Not JSON (bad syntax or UTF-8, a number out of range) or not an object: not ours to judge.
  if (parser.parse(line.data(), line.size()).get_object().get(doc)) return {};
  return decode(doc);
}

}  // namespace prefixgate::gateway::server
