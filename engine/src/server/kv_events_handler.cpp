// GET /v1/kv_events[?since=SEQ]: the replica's cache contents for a gateway's prefix index, as
// a chunked stream of newline-delimited JSON.
//
//   {"type":"snapshot","seq":N,"model":...,"block_size":16,"blocks":[{"hash","parent","salt"}]}
//   {"type":"stored","seq":N,"hash":...,"parent":...,"salt":...}
//   {"type":"removed","seq":N,"hash":...,"salt":...}
//   {"type":"cleared","seq":N}
//   with ?batch=1, runs of blocks as one line each (a stored run: each block the next's parent):
//   {"type":"stored","seq":N,"hashes":[...],"parent":...,"salt":...}   blocks N, N+1, ...
//   {"type":"removed","seq":N,"hashes":[...],"salt":...}
//   {"type":"load","running":..,"waiting":..,"kv_pages_used":..,"kv_pages_total":..,
//    "tokens_queued_for_prefill":..,"preemptions_total":..[,"prefill_seconds_per_token":..,
//    "decode_seconds_per_sequence":..]}   at least every load_report_interval
//
// A reader that reconnects with ?since=SEQ gets the deltas after SEQ when the log still holds
// them, otherwise a fresh snapshot (and so does one that falls behind mid-stream).
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <charconv>
#include <chrono>
#include <optional>
#include <span>

#include "prefixgate/canonicalize/block_hash.h"
#include "prefixgate/canonicalize/json.h"
#include "server/http_common.h"

namespace prefixgate::engine::server {
namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
constexpr std::chrono::milliseconds kPollInterval{10};

double num(std::uint64_t v) {
  return static_cast<double>(v);
}

// `since` from the query string, if present and a number.
std::optional<std::uint64_t> since_param(std::string_view target) {
  const std::optional<std::string_view> digits = serving::query_param(target, "since");
  if (!digits) return std::nullopt;
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(digits->data(), digits->data() + digits->size(), v);
  if (ec != std::errc() || end != digits->data() + digits->size()) return std::nullopt;
  return v;
}

std::string snapshot_line(const CacheSnapshot& snap, const ServerContext& ctx) {
  json::Array blocks;
  blocks.reserve(snap.blocks.size());
  for (const CachedBlock& b : snap.blocks) {
    blocks.push_back(json::Object{{"hash", canon::hash_hex(b.block_hash)},
                                  {"parent", canon::hash_hex(b.parent_hash)},
                                  {"salt", b.salt}});
  }
  return json::to_json(json::Object{{"type", "snapshot"},
                                    {"seq", num(snap.seq)},
                                    {"model", ctx.model.name},
                                    {"block_size", num(ctx.engine->config().page_tokens)},
                                    {"blocks", std::move(blocks)}}) +
         "\n";
}

std::string event_line(const KvEventLog::Entry& entry) {
  const CacheEvent& e = entry.event;
  json::Object o{{"type", e.kind == CacheEvent::Kind::kStored    ? "stored"
                          : e.kind == CacheEvent::Kind::kRemoved ? "removed"
                                                                 : "cleared"},
                 {"seq", num(entry.seq)}};
  if (e.kind == CacheEvent::Kind::kStored) {
    o.push_back({"hash", canon::hash_hex(e.block_hash)});
    o.push_back({"parent", canon::hash_hex(e.parent_hash)});
    o.push_back({"salt", e.salt});
  } else if (e.kind == CacheEvent::Kind::kRemoved) {
    o.push_back({"hash", canon::hash_hex(e.block_hash)});
    o.push_back({"salt", e.salt});
  }
  return json::to_json(o) + "\n";
}

// The most blocks one batched line lists: a long prompt's prefill stores thousands at once, and
// a line stays a few KB for the reader's buffer.
constexpr std::size_t kMaxBlocksPerLine = 256;

// Whether `e` continues the run of blocks that `prev` ended, on one batched line.
bool continues_run(const KvEventLog::Entry& prev, const KvEventLog::Entry& e) {
  const CacheEvent& a = prev.event;
  const CacheEvent& b = e.event;
  if (b.kind != a.kind || b.kind == CacheEvent::Kind::kCleared || b.salt != a.salt ||
      e.seq != prev.seq + 1) {
    return false;
  }
  return b.kind == CacheEvent::Kind::kRemoved || b.parent_hash == a.block_hash;
}

// One line for the run `run` (at least two blocks) that continues_run() joined.
std::string run_line(std::span<const KvEventLog::Entry> run) {
  const CacheEvent& first = run.front().event;
  const bool stored = first.kind == CacheEvent::Kind::kStored;
  json::Array hashes;
  hashes.reserve(run.size());
  for (const KvEventLog::Entry& e : run) hashes.push_back(canon::hash_hex(e.event.block_hash));
  json::Object o{{"type", stored ? "stored" : "removed"},
                 {"seq", num(run.front().seq)},
                 {"hashes", std::move(hashes)}};
  if (stored) o.push_back({"parent", canon::hash_hex(first.parent_hash)});
  o.push_back({"salt", first.salt});
  return json::to_json(o) + "\n";
}

// The lines of `entries`, one per event, or with `batch` a line per run of blocks.
void append_event_lines(std::span<const KvEventLog::Entry> entries, bool batch, std::string& out) {
  for (std::size_t i = 0; i < entries.size();) {
    std::size_t end = i + 1;
    while (batch && end < entries.size() && end - i < kMaxBlocksPerLine &&
           continues_run(entries[end - 1], entries[end])) {
      ++end;
    }
    out += end - i == 1 ? event_line(entries[i]) : run_line(entries.subspan(i, end - i));
    i = end;
  }
}

std::string load_line(const EngineStats& s) {
  json::Object o{{"type", "load"},
                 {"running", num(s.scheduler.running)},
                 {"waiting", num(s.scheduler.waiting)},
                 {"kv_pages_used", num(s.kv_pages_used)},
                 {"kv_pages_total", num(s.kv_pages_total)},
                 {"tokens_queued_for_prefill", num(s.scheduler.tokens_queued_for_prefill)},
                 {"preemptions_total", num(s.scheduler.preemptions_total)}};
  // How long a request arriving now would wait for a place in the batch: a full replica's real
  // queue, which its count of short queued prefills does not show.
  o.push_back({"batch_slots", num(s.scheduler.batch_slots)});
  if (s.scheduler.steps_until_admission > 0 && s.step_seconds > 0) {
    o.push_back({"admission_wait_seconds",
                 static_cast<double>(s.scheduler.steps_until_admission) * s.step_seconds});
  }
  if (s.scheduler.steps_per_admission > 0 && s.step_seconds > 0) {
    o.push_back({"admission_interval_seconds", s.scheduler.steps_per_admission * s.step_seconds});
  }
  if (s.scheduler.steps_until_next_end > 0 && s.step_seconds > 0) {
    o.push_back({"next_end_seconds",
                 static_cast<double>(s.scheduler.steps_until_next_end) * s.step_seconds});
  }
  // The device's speed, when it knows it (the sim device from its profile): routers compare
  // replicas of different speeds in seconds.
  if (s.speed.prefill_seconds_per_token > 0 && s.speed.decode_seconds_per_sequence > 0) {
    o.push_back({"prefill_seconds_per_token", s.speed.prefill_seconds_per_token});
    o.push_back({"decode_seconds_per_sequence", s.speed.decode_seconds_per_sequence});
  }
  return json::to_json(o) + "\n";
}

// Takes a snapshot on the blocking pool: cache_snapshot() waits for the engine thread.
Awaitable<CacheSnapshot> take_snapshot(ServerContext& ctx) {
  EngineLoop* engine = ctx.engine;
  co_return co_await asio::co_spawn(
      *ctx.blocking, [engine]() -> Awaitable<CacheSnapshot> { co_return engine->cache_snapshot(); },
      asio::use_awaitable);
}

}  // namespace

Awaitable<bool> handle_kv_events(Connection& c, ServerContext& ctx, const Request& req) {
  using serving::write_chunk;
  KvEventLog& log = ctx.engine->kv_events();

  serving::StreamHead head =
      serving::make_stream_head(req, http::status::ok, "application/x-ndjson", false);
  if (!co_await serving::write_stream_head(c, head)) co_return false;

  // A reader that asks for runs of blocks on one line (the gateway does): a line per block
  // otherwise, as earlier readers expect.
  const bool batch =
      serving::query_param(req.target(), "batch") == std::optional<std::string_view>("1");
  // Where the reader is: the seq of the last event it has seen.
  std::uint64_t last = 0;
  bool need_snapshot = true;
  if (const auto since = since_param(req.target()); since && *since <= log.last_seq()) {
    if (auto missed = log.since(*since)) {
      std::string out;
      append_event_lines(*missed, batch, out);
      last = missed->empty() ? *since : missed->back().seq;
      need_snapshot = false;
      if (!out.empty() && !co_await write_chunk(c, out)) co_return false;
    }
  }

  asio::steady_timer timer(c.stream.get_executor());
  auto next_load = std::chrono::steady_clock::now();
  while (!ctx.draining()) {
    std::string out;
    if (need_snapshot) {
      const CacheSnapshot snap = co_await take_snapshot(ctx);
      out += snapshot_line(snap, ctx);
      last = snap.seq;
      need_snapshot = false;
    }
    if (auto deltas = log.since(last)) {
      append_event_lines(*deltas, batch, out);
      if (!deltas->empty()) last = deltas->back().seq;
    } else {
      need_snapshot = true;  // fell behind the log's history: start over
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_load) {
      out += load_line(ctx.engine->stats());
      next_load = now + ctx.options.load_report_interval;
    }
    if (!out.empty() && !co_await write_chunk(c, out)) co_return false;
    timer.expires_after(std::min<std::chrono::steady_clock::duration>(
        kPollInterval, ctx.options.load_report_interval));
    co_await timer.async_wait(kTuple);
  }
  co_await serving::write_last_chunk(c);
  co_return false;
}

}  // namespace prefixgate::engine::server
