#include "workloads/trace.h"

#include <algorithm>
#include <cmath>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::bench {

namespace {

Error line_error(std::size_t line, const std::string& message) {
  return Error{ErrorCode::kInvalidValue, "line " + std::to_string(line) + ": " + message, ""};
}

bool non_negative_integer(const json::Value* v) {
  if (v == nullptr || !v->is_number()) return false;
  const double d = v->as_number().value;
  return d >= 0 && d == std::floor(d) && d < 9.007199254740992e15;
}

}  // namespace

Result<std::vector<TraceRecord>> parse_trace(std::string_view jsonl) {
  std::vector<TraceRecord> out;
  std::size_t line_no = 0;
  while (!jsonl.empty()) {
    const std::size_t nl = jsonl.find('\n');
    std::string_view line = jsonl.substr(0, nl);
    jsonl = nl == std::string_view::npos ? std::string_view() : jsonl.substr(nl + 1);
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto doc = json::parse(line);
    if (!doc) return line_error(line_no, doc.error().message);
    if (!doc->is_object()) return line_error(line_no, "expected a JSON object");
    TraceRecord r;
    const json::Value* ts = doc->find("timestamp");
    if (ts == nullptr || !ts->is_number() || ts->as_number().value < 0) {
      return line_error(line_no, "timestamp: expected a non-negative number (ms)");
    }
    r.timestamp_ms = ts->as_number().value;
    const json::Value* in = doc->find("input_length");
    const json::Value* outl = doc->find("output_length");
    if (!non_negative_integer(in)) return line_error(line_no, "input_length: expected an integer");
    if (!non_negative_integer(outl)) {
      return line_error(line_no, "output_length: expected an integer");
    }
    r.input_length = static_cast<std::size_t>(in->as_number().value);
    r.output_length = static_cast<std::size_t>(outl->as_number().value);
    const json::Value* ids = doc->find("hash_ids");
    if (ids == nullptr || !ids->is_array()) {
      return line_error(line_no, "hash_ids: expected an array of non-negative integers");
    }
    for (const json::Value& id : ids->as_array()) {
      if (!non_negative_integer(&id)) {
        return line_error(line_no, "hash_ids: expected an array of non-negative integers");
      }
      r.hash_ids.push_back(static_cast<std::uint64_t>(id.as_number().value));
    }
    if (r.input_length == 0) return line_error(line_no, "input_length: must be positive");
    out.push_back(std::move(r));
  }
  if (out.empty()) return line_error(line_no, "the trace holds no requests");
  return out;
}

std::size_t scaled_block_tokens(const TraceOptions& o) {
  return std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(
                                      static_cast<double>(o.trace_block_tokens) * o.length_scale)));
}

std::vector<canon::TokenId> trace_prompt(const TraceRecord& r, const TraceOptions& o,
                                         std::uint64_t seed) {
  const std::size_t block = scaled_block_tokens(o);
  // Each hash id covers trace_block_tokens of input_length; the last one may be partial.
  const std::size_t length = std::max<std::size_t>(
      1,
      static_cast<std::size_t>(std::llround(static_cast<double>(r.input_length) * o.length_scale)));
  std::vector<canon::TokenId> tokens;
  tokens.reserve(length);
  for (std::uint64_t id : r.hash_ids) {
    Rng rng(seed ^ (id * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL));
    for (std::size_t i = 0; i < block && tokens.size() < length; ++i) {
      tokens.push_back(static_cast<canon::TokenId>(rng.below(256)));
    }
    if (tokens.size() >= length) break;
  }
  // A trace whose input_length exceeds its blocks (not in Mooncake's): pad with tokens of the
  // request's own, which nothing else shares.
  Rng tail(seed ^ 0x5bd1e995ULL ^ static_cast<std::uint64_t>(r.timestamp_ms * 1000));
  while (tokens.size() < length) tokens.push_back(static_cast<canon::TokenId>(tail.below(256)));
  return tokens;
}

Workload make_trace_workload(const std::vector<TraceRecord>& records, const TraceOptions& o,
                             std::uint64_t seed) {
  Workload w;
  w.name = "trace";
  w.sessions.reserve(records.size());
  const double t0 = records.empty() ? 0 : records.front().timestamp_ms;
  for (const TraceRecord& r : records) {
    const std::vector<canon::TokenId> tokens = trace_prompt(r, o, seed);
    std::size_t max_tokens = std::max<std::size_t>(1, r.output_length);
    if (o.max_output_len > 0) max_tokens = std::min(max_tokens, o.max_output_len);
    std::string body = "{\"model\":";
    json::append_quoted(o.model, body);
    body += ",\"prompt\":[";
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) body += ',';
      body += std::to_string(tokens[i]);
    }
    body += "],\"max_tokens\":" + std::to_string(max_tokens) +
            ",\"temperature\":0,\"ignore_eos\":true}";
    Session s;
    s.arrival_s = std::max(0.0, (r.timestamp_ms - t0) / 1000.0 * o.time_scale);
    s.turns.push_back(Turn{Api::kCompletions, std::move(body), max_tokens, 0});
    w.sessions.push_back(std::move(s));
  }
  // Replay in time order whatever the file's order.
  std::stable_sort(w.sessions.begin(), w.sessions.end(),
                   [](const Session& a, const Session& b) { return a.arrival_s < b.arrival_s; });
  return w;
}

}  // namespace prefixgate::bench
