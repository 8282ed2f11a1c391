// Live statistics behind GET /stats and the /dashboard page: a fixed ring of one-second samples
// (hit rate, tokens, TTFT of hits and misses, routing decisions, per replica and per tenant),
// running totals, the replicas' current load, and bounded top-K tables of the prefix-breaking
// findings and canonicalization changes seen in live traffic. The format is documented in
// gateway/STATS.md.
//
// Memory is bounded however long the gateway runs: `capacity` samples, at most `max_tenants`
// tenants (the rest fold into "(other)"), `max_findings` findings and changes. The request path
// takes one short mutex per call; tick() closes the current interval once a second.
//
//   LiveStats stats(LiveStatsOptions{}, replica_names);
//   stats.record_decision(RouteReason::kCacheHit);                 // per routing decision
//   stats.record_request({.replica = 0, .tenant = "a", .status = 200, ...});
//   stats.tick(unix_ms(), replicas.status());                     // from a 1 s timer
//   std::string body = stats.to_json(/*since_ms=*/0);             // GET /stats
//
// Pure: no sockets, no threads, no clock of its own (times are passed in), so tests drive it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/gateway/routing.h"
#include "server/replica_set.h"

namespace prefixgate::gateway::server {

struct LiveStatsOptions {
  std::size_t capacity = 900;            // samples kept: 15 minutes at one per second
  std::int64_t interval_ms = 1000;       // the period tick() is called with (reported only)
  std::size_t window_samples = 60;       // the "window" section: the last minute
  std::size_t ttft_window_samples = 10;  // each sample's TTFT percentiles cover this many samples
  std::size_t max_tenants = 32;          // tenants tracked by name; later ones fold into "(other)"
  std::size_t max_findings = 64;         // rows of the findings and canonicalization tables
  // A streamed request counts as a cache hit for TTFT when the engine served at least this
  // fraction of its prompt from cache. Not "> 0": with a shared chat-template header nearly
  // every prompt shares its first block with something.
  double ttft_hit_fraction = 0.5;
};

// One proxied completion at its end (the request path's record_done).
struct CompletedRequest {
  ReplicaId replica = 0;
  std::string_view tenant;  // "" = no tenant
  int status = 0;           // 499 = client went away
  bool usage_seen = false;  // the engine reported usage
  std::size_t prompt_tokens = 0;
  std::size_t cached_tokens = 0;
  std::size_t predicted_cached_tokens = 0;
  double ttft_seconds = -1;  // arrival to first streamed event; < 0 when not streamed
};

// A volatile-content finding in a live prompt (the prompt linter's rule ids).
struct LiveFinding {
  std::string_view rule;     // "volatile-timestamp"
  std::string_view field;    // "messages[0].content"
  std::string_view excerpt;  // the matched text, as sent: redacted before it is stored
  std::size_t token_offset = 0;
  std::size_t byte_offset = 0;  // in the rendered prompt
};

// A canonicalization change (rule applied in observe or rewrite mode).
struct LiveChange {
  std::string_view rule;
  std::string_view mode;  // "observe" | "rewrite"
  std::string_view path;
};

// Masks an excerpt for display: digits become '9', and so do the letters ('x') of any run of
// letters and digits that holds a digit or is longer than 12 (ids, hashes, nonces); plain words
// and punctuation stay, so "Mon, 20 Aug 2026 req_8f3a" reads "Mon, 99 Aug 9999 req_9x9x". At most
// `max_bytes` bytes of the input, "..." when cut; control and non-ASCII bytes become '?'.
inline constexpr std::size_t kExcerptBytes = 60;
std::string redact_excerpt(std::string_view text, std::size_t max_bytes = kExcerptBytes);
// The same, appended to `out` (whose capacity a caller may reuse).
void append_redacted_excerpt(std::string_view text, std::size_t max_bytes, std::string& out);

// Wall-clock milliseconds since the Unix epoch, the time base of /stats.
std::int64_t unix_now_ms();

class LiveStats {
 public:
  LiveStats(LiveStatsOptions options, std::vector<std::string> replica_names,
            std::string policy_name, std::int64_t started_ms);

  void record_decision(RouteReason reason);
  void record_request(const CompletedRequest& r);
  void record_finding(const LiveFinding& f, std::int64_t now_ms);
  void record_change(const LiveChange& c, std::int64_t now_ms);

  // Records one request's findings and changes under a single lock: as record_finding() and
  // record_change() would, one call each.
  //
  //   LiveStats::PrepRecorder rec = stats.prep_recorder(now_ms);
  //   for (...) rec.finding({...});
  //   for (...) rec.change({...});
 private:
  struct FindingRow;

 public:
  class PrepRecorder {
   public:
    void finding(const LiveFinding& f);
    void change(const LiveChange& c);
    ~PrepRecorder() { write_excerpt(); }
    PrepRecorder(const PrepRecorder&) = delete;
    PrepRecorder& operator=(const PrepRecorder&) = delete;

   private:
    friend class LiveStats;
    PrepRecorder(LiveStats& stats, std::int64_t now_ms)
        : stats_(stats), lock_(stats.mu_), now_ms_(now_ms) {}
    // A row keeps its last finding's excerpt: of a request's run of findings in one row (a
    // system prompt's several times), only the last is redacted into it, here.
    void write_excerpt();
    LiveStats& stats_;
    std::lock_guard<std::mutex> lock_;
    std::int64_t now_ms_;
    FindingRow* row_ = nullptr;  // the last finding's row, its excerpt not yet written
    std::string_view excerpt_;
  };
  PrepRecorder prep_recorder(std::int64_t now_ms) { return PrepRecorder(*this, now_ms); }

  // Closes the current interval into a sample stamped `now_ms` (unix milliseconds), with the
  // replicas' load as of now.
  void tick(std::int64_t now_ms, const std::vector<ReplicaStatus>& replicas);

  // The /stats document; only samples stamped after `since_ms` (0: all of them).
  std::string to_json(std::int64_t since_ms = 0) const;

  std::size_t sample_count() const;
  const LiveStatsOptions& options() const { return options_; }
  // Whether a request whose engine served `cached` of `prompt` tokens from cache is a hit.
  bool is_cache_hit(std::size_t prompt, std::size_t cached) const {
    return prompt > 0 &&
           static_cast<double>(cached) >= options_.ttft_hit_fraction * static_cast<double>(prompt);
  }

  // TTFT histogram: log-spaced buckets from 1 ms (x1.2 each, the last ~2 min and beyond).
  static constexpr std::size_t kTtftBuckets = 64;
  using TtftHistogram = std::array<std::uint32_t, kTtftBuckets>;
  static std::size_t ttft_bucket(double seconds);
  // The q-quantile in milliseconds, interpolated inside its bucket; < 0 when empty.
  static double ttft_quantile_ms(const TtftHistogram& h, double q);

 private:
  struct Counts {
    std::uint64_t requests = 0;
    std::uint64_t errors = 0;         // status >= 500, or 499 (client gone)
    std::uint64_t prompt_tokens = 0;  // engine-reported, of requests with usage
    std::uint64_t cached_tokens = 0;  // engine-reported
    std::uint64_t predicted_cached_tokens = 0;
    void add(const Counts& o);
  };
  static constexpr std::size_t kReasons =
      static_cast<std::size_t>(RouteReason::kNoHealthyReplica) + 1;
  struct Interval {
    Counts all;
    std::vector<Counts> replicas;
    std::vector<Counts> tenants;  // by tenant slot
    std::array<std::uint64_t, kReasons> decisions{};
    TtftHistogram ttft_hit{}, ttft_miss{};
    std::uint64_t findings = 0;
    std::uint64_t changes = 0;
    void add(const Interval& o);
  };
  struct ReplicaLoad {
    bool healthy = false;
    double kv_usage = 0;  // kv_pages_used / kv_pages_total, 0 when unknown
    std::size_t running = 0, waiting = 0;
  };
  struct Sample {
    std::int64_t t_ms = 0;
    Interval data;
    std::string json;  // serialized once, at tick time
  };
  struct FindingRow {
    std::string rule, field, excerpt;
    std::size_t token_offset = 0, byte_offset = 0;
    std::uint64_t count = 0;
    std::int64_t first_seen_ms = 0, last_seen_ms = 0;
  };
  struct ChangeRow {
    std::string rule, mode, path;
    std::uint64_t count = 0;
    std::int64_t first_seen_ms = 0, last_seen_ms = 0;
  };

  std::size_t tenant_slot_locked(std::string_view tenant);
  const Sample& sample_at(std::size_t age) const;  // 0 = newest
  Interval window_locked(std::size_t samples) const;
  std::string sample_json_locked(const Sample& s) const;
  template <class Row>
  Row& top_k_row_locked(std::vector<Row>& rows, std::string_view key_a, std::string_view key_b,
                        std::int64_t now_ms);

  const LiveStatsOptions options_;
  const std::vector<std::string> replica_names_;
  const std::string policy_name_;
  const std::int64_t started_ms_;

  mutable std::mutex mu_;
  Interval current_;
  Interval totals_;
  std::vector<Sample> ring_;  // capacity slots, written round robin
  std::size_t head_ = 0;      // next slot to write
  std::size_t size_ = 0;
  std::int64_t last_tick_ms_ = 0;
  std::vector<ReplicaStatus> replicas_now_;
  std::map<std::string, std::size_t, std::less<>> tenant_slots_;
  std::vector<std::string> tenant_names_;
  std::size_t other_slot_ = SIZE_MAX;
  std::vector<FindingRow> findings_;
  std::vector<ChangeRow> changes_;
};

}  // namespace prefixgate::gateway::server
