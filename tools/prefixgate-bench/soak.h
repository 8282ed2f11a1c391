// prefixgate-bench soak: a gateway in front of N sim engines for a long run at steady moderate
// load, one replica killed (SIGKILL) and started again with an empty cache every few minutes,
// and every process's resident memory and open descriptors sampled on the way, with the
// gateway's index and stats sizes. The pure part lives here (what a sample holds, reading /proc
// and /metrics, the verdict) so that tests can feed it made-up samples; soak.cpp runs it and
// soak_report.cpp writes the CSV, the JSON and the SVG chart.
//
//   std::vector<bench::SoakSample> samples = ...;            // one every 10 s
//   bench::SoakVerdict v = bench::judge_soak(samples, restarts, errors, options);
//   if (!v.pass) return 1;
//
// The verdict, precisely (every threshold a flag of `soak`):
// - Judged samples are those taken after the run's warm-up (`warmup_s`, 20 % of the run by
//   default; for the gateway's RSS and descriptors, `gateway_warmup_s` when later: by default
//   the span of its /stats ring, 900 one-second samples that fill in 15 minutes) and, for a
//   restarted process, at least `lifetime_warmup_s` after it started again (a restarted engine
//   begins a new lifetime with an empty cache; each lifetime is judged on its own). A lifetime with
//   fewer than `min_samples` judged samples is listed but not judged.
// - RSS flat: max <= min * (1 + rss_tolerance) over a lifetime's judged samples (VmRSS).
// - Descriptors flat: no rise, median of the last quarter of a lifetime's judged samples <= the
//   median of its first quarter * (1 + fd_tolerance) + fd_slack (/proc/PID/fd entries). Not
//   max/min as for RSS: a count of 15-40 moves by two sockets per request in flight at the
//   sampling instant (client and upstream) and by the upstream pool's idle connections, so the
//   peak measures the load; a leak raises the level. Its min and max are reported.
// - Bounded (the gateway's index blocks and hashes, /metrics series and bytes, /stats bytes): no
//   new high late in the run, max over the second half of the judged samples <= max over the
//   first half * (1 + bound_tolerance). /stats holds a ring of samples (15 minutes at 1 s) that
//   fills once, so a run shorter than twice that plus the warm-up sees it grow.
// - Errors: none but the injected ones. An error is injected when its response named the killed
//   replica (x-prefixgate-replica), it was in flight at the kill (sent before, ended after), and
//   it failed after the response's head (a stream cut: stream_error, read, bad_response), not with
//   an HTTP error status (the gateway retries what fails before the first byte).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http_client.h"

namespace prefixgate::bench {

// One process at one sampling instant. rss_kb / fds < 0: could not be read (it had exited).
struct ProcessSample {
  std::string name;  // "gateway", "engine-0", ...
  pid_t pid = -1;
  double started_s = 0;  // when this lifetime started, run seconds (0: with the run, before it)
  long rss_kb = -1;
  long fds = -1;
  // Of those, TCP sockets in ESTABLISHED state: connections in use or pooled, which come and go
  // with the traffic. A leaked socket is not one of them (its peer has gone: CLOSE_WAIT), so the
  // descriptors judged for a leak are fds - connections.
  long connections = -1;
};

// The gateway's sizes from /metrics and /stats; -1 when not read.
struct GatewaySizes {
  double index_blocks = -1;  // prefixgate_index_blocks (all replicas)
  double index_hashes = -1;  // prefixgate_index_size_hashes
  double tokenizer_cache_bytes = -1;
  double metrics_series = -1;  // sample lines in /metrics
  double metrics_bytes = -1;
  // GET /stats?since=T, T the previous scrape's now_ms: the whole document but the ring samples
  // already read (totals, replicas, the tenant, findings and canonicalization tables that must
  // stay bounded, and the samples taken since).
  double stats_bytes = -1;   // /stats?since= the last scrape, scaled to 10 s of samples
  double stats_ring_s = -1;  // /stats: capacity x interval_ms, the span its ring fills in
};

struct SoakSample {
  double t_s = 0;                             // run seconds
  std::vector<ProcessSample> processes = {};  // the gateway, then engine 0..N-1
  GatewaySizes gateway = {};
  // From the load generator's records, filled in after the run (by done_s <= t_s).
  std::size_t requests_done = 0;
  std::size_t errors = 0;
  std::size_t injected_errors = 0;
};

struct SoakRestart {
  double t_s = 0;  // when SIGKILL was sent
  std::size_t replica = 0;
  pid_t old_pid = -1;
  pid_t new_pid = -1;
  double listening_after_s = 0;  // SIGKILL to the new process listening
  double healthy_after_s = -1;   // SIGKILL to the gateway's /health counting it again; -1: never
  // From the records after the run: requests the killed replica was serving at the kill (sent
  // before, ended after, named by x-prefixgate-replica), and how many of them failed.
  std::size_t in_flight = 0;
  std::size_t in_flight_failed = 0;
};

// VmRSS in kB from /proc/PID/status text; nullopt when absent.
std::optional<long> parse_vm_rss_kb(std::string_view proc_status);
// VmRSS of a running process, and its open descriptors (/proc/PID/fd entries); -1 when gone.
long read_rss_kb(pid_t pid);
long count_fds(pid_t pid);
// Descriptors of `pid` that are TCP sockets in ESTABLISHED state (from /proc/PID/fd and the
// process's /proc/PID/net/tcp{,6}); -1 when unreadable.
long count_established(pid_t pid);
// A Prometheus text exposition: the value of the sample named `name` with no labels, or the sum
// over its labelled series; nullopt when there is none.
std::optional<double> metric_value(std::string_view exposition, std::string_view name);
// Sample lines (not comments, not blank) of an exposition.
std::size_t metric_series(std::string_view exposition);

// Did a failed request die because of the restart `r` of the replica whose URL ends with `port`?
bool is_injected_error(const RequestRecord& rec, const SoakRestart& r, std::uint16_t port);
// Was the request being served by that replica when it was killed: sent before and ended
// after, and either failed or streaming already and ended clearly after (50 ms)? (One still
// waiting for its answer can be retried by the gateway and succeed.)
bool was_in_flight_at(const RequestRecord& rec, const SoakRestart& r, std::uint16_t port);

struct SoakVerdictOptions {
  double warmup_s = 0;
  // The gateway's own warm-up when longer (its /stats ring's span: a fixed number of one-second
  // samples, so its memory grows, bounded, until that ring is full).
  double gateway_warmup_s = 0;
  double lifetime_warmup_s = 60;
  double rss_tolerance = 0.05;
  double fd_tolerance = 0.05;
  double fd_slack = 4;
  double bound_tolerance = 0.05;
  std::size_t min_samples = 3;
};

struct SoakCheck {
  std::string what;     // "rss_kb", "fds", "index_blocks", ..., "errors"
  std::string subject;  // "gateway", "engine-2 (pid 1234)", ...
  double first = 0;     // rss/fds: medians of the first and last quarter; bounded: max of each half
  double last = 0;
  double min = 0;
  double max = 0;
  double limit = 0;  // what `max` (or the late max, or the error count) must not exceed
  std::size_t samples = 0;
  bool judged = true;  // false: too few samples (listed, not counted)
  bool pass = true;
};

struct SoakVerdict {
  bool pass = true;
  std::vector<SoakCheck> checks;
};

SoakVerdict judge_soak(const std::vector<SoakSample>& samples, std::size_t other_errors,
                       const SoakVerdictOptions& options);

// The samples, restarts and error counts of a soak's JSON (soak_json), to judge again.
struct SoakRecording {
  std::vector<SoakSample> samples;
  std::vector<SoakRestart> restarts;
  std::size_t requests = 0;
  std::size_t errors = 0;  // not injected
  std::size_t injected_errors = 0;
  double duration_s = 0;
};
Result<SoakRecording> parse_soak_json(std::string_view text);

// "30m", "20s", "1h", "90" (seconds), "1.5m"; nullopt when malformed or negative.
std::optional<double> parse_duration_s(std::string_view text);

}  // namespace prefixgate::bench
