#include "run_result.h"

#include <algorithm>

namespace prefixgate::bench {

RunResult summarize_run(const std::string& policy, const std::vector<RequestRecord>& records,
                        std::size_t replicas) {
  RunResult r;
  r.policy = policy;
  std::vector<double> ttft, itl, e2e;
  double first_sent = -1, last_done = 0;
  for (const RequestRecord& rec : records) {
    if (rec.warmup) continue;
    ++r.requests;
    if (first_sent < 0 || rec.sent_s < first_sent) first_sent = rec.sent_s;
    last_done = std::max(last_done, rec.done_s);
    if (!rec.error.empty()) {
      ++r.errors;
      ++r.errors_by_kind[rec.error];
      if (!rec.error_detail.empty()) r.error_examples.emplace(rec.error, rec.error_detail);
      continue;
    }
    r.prompt_tokens += rec.prompt_tokens;
    r.cached_tokens += rec.cached_tokens;
    r.output_tokens += rec.completion_tokens;
    if (rec.first_token_s >= 0) ttft.push_back(rec.first_token_s - rec.sent_s);
    itl.insert(itl.end(), rec.gaps_s.begin(), rec.gaps_s.end());
    e2e.push_back(rec.done_s - rec.sent_s);
    ++r.requests_per_replica[rec.replica.empty() ? "direct" : rec.replica];
    if (!rec.route_reason.empty()) ++r.route_reasons[rec.route_reason];
  }
  r.hit_rate = r.prompt_tokens == 0
                   ? 0
                   : static_cast<double>(r.cached_tokens) / static_cast<double>(r.prompt_tokens);
  r.ttft_s = summarize(std::move(ttft));
  r.itl_s = summarize(std::move(itl));
  r.e2e_s = summarize(std::move(e2e));
  r.duration_s = first_sent < 0 ? 0 : last_done - first_sent;
  const std::size_t ok = r.requests - r.errors;
  if (r.duration_s > 0) {
    r.throughput_rps = static_cast<double>(ok) / r.duration_s;
    r.output_tps = static_cast<double>(r.output_tokens) / r.duration_s;
  }
  // Tokens emitted while requests arrived: each request's content chunks at first_token_s plus
  // the running sum of its gaps, its completion tokens spread evenly over its chunks.
  double last_sent = first_sent;
  for (const RequestRecord& rec : records) {
    if (!rec.warmup) last_sent = std::max(last_sent, rec.sent_s);
  }
  if (first_sent >= 0 && last_sent > first_sent) {
    double tokens = 0;
    for (const RequestRecord& rec : records) {
      if (rec.warmup || !rec.error.empty() || rec.first_token_s < 0) continue;
      const double per_chunk =
          static_cast<double>(rec.completion_tokens) / static_cast<double>(rec.gaps_s.size() + 1);
      double t = rec.first_token_s;
      for (std::size_t i = 0;; ++i) {
        if (t > last_sent) break;
        if (t >= first_sent) tokens += per_chunk;
        if (i == rec.gaps_s.size()) break;
        t += rec.gaps_s[i];
      }
    }
    r.output_tps_arrivals = tokens / (last_sent - first_sent);
  }
  const std::size_t n = std::max(replicas, r.requests_per_replica.size());
  std::size_t most = 0;
  for (const auto& [name, count] : r.requests_per_replica) most = std::max(most, count);
  if (n > 0 && ok > 0) {
    r.imbalance = static_cast<double>(most) / (static_cast<double>(ok) / static_cast<double>(n));
  }
  return r;
}

}  // namespace prefixgate::bench
