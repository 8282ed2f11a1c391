// LiveStats, the model behind GET /stats: the ring stays bounded and wraps, samples add up,
// hit rates and TTFT percentiles are computed as documented in gateway/STATS.md, tenants and
// findings stay bounded, and the output is valid JSON.
#include "server/live_stats.h"

#include <gtest/gtest.h>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::gateway::server {
namespace {

constexpr std::int64_t kT0 = 1'700'000'000'000;

json::Value parse(const std::string& text) {
  auto doc = json::parse(text);
  EXPECT_TRUE(static_cast<bool>(doc)) << text.substr(0, 400);
  return doc ? std::move(*doc) : json::Value(json::Null{});
}

double number(const json::Value& v, std::string_view key) {
  const json::Value* n = v.find(key);
  EXPECT_NE(n, nullptr) << key;
  return n && n->is_number() ? n->as_number().value : -1;
}

const json::Array& array(const json::Value& v, std::string_view key) {
  static const json::Array empty;
  const json::Value* a = v.find(key);
  EXPECT_TRUE(a && a->is_array()) << key;
  return a && a->is_array() ? a->as_array() : empty;
}

std::vector<ReplicaStatus> replicas(std::size_t n) {
  std::vector<ReplicaStatus> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i].name = "http://r" + std::to_string(i);
    out[i].view.healthy = true;
    out[i].view.running = i + 1;
    out[i].view.kv_pages_used = 25;
    out[i].view.kv_pages_total = 100;
    out[i].preemptions_total = 7;
  }
  return out;
}

CompletedRequest request(ReplicaId replica, std::string_view tenant, std::size_t prompt,
                         std::size_t cached, std::size_t predicted, double ttft = -1) {
  CompletedRequest r;
  r.replica = replica;
  r.tenant = tenant;
  r.status = 200;
  r.usage_seen = true;
  r.prompt_tokens = prompt;
  r.cached_tokens = cached;
  r.predicted_cached_tokens = predicted;
  r.ttft_seconds = ttft;
  return r;
}

TEST(LiveStatsTest, RingIsBoundedAndKeepsTheNewestSamplesInOrder) {
  LiveStatsOptions o;
  o.capacity = 5;
  LiveStats stats(o, {"http://r0"}, "cache_aware", kT0);
  for (int i = 1; i <= 12; ++i) {
    stats.record_request(request(0, "", 100 * static_cast<std::size_t>(i), 0, 0));
    stats.tick(kT0 + 1000 * i, replicas(1));
  }
  EXPECT_EQ(stats.sample_count(), 5u);
  const json::Value doc = parse(stats.to_json());
  const json::Array& samples = array(doc, "samples");
  ASSERT_EQ(samples.size(), 5u);
  for (std::size_t k = 0; k < samples.size(); ++k) {
    EXPECT_EQ(number(samples[k], "t"), static_cast<double>(kT0 + 1000 * (8 + k)));
    EXPECT_EQ(number(samples[k], "prompt_tokens"), 100.0 * static_cast<double>(8 + k));
  }
  // Totals keep counting what the ring has forgotten.
  EXPECT_EQ(number(*doc.find("totals"), "requests"), 12);
  EXPECT_EQ(number(*doc.find("totals"), "prompt_tokens"), 100.0 * 78);
  EXPECT_EQ(number(doc, "capacity"), 5);
}

TEST(LiveStatsTest, SinceReturnsOnlyNewerSamples) {
  LiveStats stats({}, {"http://r0"}, "cache_aware", kT0);
  for (int i = 1; i <= 4; ++i) stats.tick(kT0 + 1000 * i, replicas(1));
  const json::Value doc = parse(stats.to_json(kT0 + 2000));
  const json::Array& samples = array(doc, "samples");
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(number(samples[0], "t"), static_cast<double>(kT0 + 3000));
  EXPECT_EQ(array(parse(stats.to_json(kT0 + 4000)), "samples").size(), 0u);
}

TEST(LiveStatsTest, HitRatesAreTokenWeightedOverallPerReplicaAndPerTenant) {
  LiveStats stats({}, {"http://r0", "http://r1"}, "cache_aware", kT0);
  stats.record_request(request(0, "a", 1000, 900, 800));
  stats.record_request(request(0, "b", 100, 0, 0));
  stats.record_request(request(1, "a", 900, 450, 600));
  stats.tick(kT0 + 1000, replicas(2));
  const json::Value doc = parse(stats.to_json());
  const json::Value& totals = *doc.find("totals");
  EXPECT_EQ(number(totals, "prompt_tokens"), 2000);
  EXPECT_EQ(number(totals, "cached_tokens"), 1350);
  EXPECT_DOUBLE_EQ(number(totals, "hit_rate"), 1350.0 / 2000);
  EXPECT_DOUBLE_EQ(number(totals, "predicted_hit_rate"), 1400.0 / 2000);
  const json::Value& window = *doc.find("window");
  EXPECT_DOUBLE_EQ(number(window, "hit_rate"), 1350.0 / 2000);

  const json::Array& reps = array(doc, "replicas");
  ASSERT_EQ(reps.size(), 2u);
  EXPECT_DOUBLE_EQ(number(*reps[0].find("totals"), "hit_rate"), 900.0 / 1100);
  EXPECT_DOUBLE_EQ(number(*reps[1].find("totals"), "hit_rate"), 0.5);
  EXPECT_EQ(number(reps[1], "running"), 2);
  EXPECT_DOUBLE_EQ(number(reps[1], "kv_usage"), 0.25);
  EXPECT_EQ(number(reps[1], "preemptions_total"), 7);

  const json::Array& tenants = array(doc, "tenants");
  ASSERT_EQ(tenants.size(), 2u);
  EXPECT_EQ(tenants[0].find("name")->as_string(), "a");
  EXPECT_DOUBLE_EQ(number(*tenants[0].find("totals"), "hit_rate"), 1350.0 / 1900);
  EXPECT_DOUBLE_EQ(number(*tenants[1].find("totals"), "hit_rate"), 0.0);

  const json::Value& sample = array(doc, "samples").at(0);
  EXPECT_EQ(number(sample, "cached_tokens"), 1350);
  EXPECT_EQ(array(sample, "replicas").size(), 2u);
  EXPECT_EQ(array(sample, "tenants").size(), 2u);
}

TEST(LiveStatsTest, HitRateIsNullWithoutPromptTokens) {
  LiveStats stats({}, {"http://r0"}, "cache_aware", kT0);
  stats.tick(kT0 + 1000, replicas(1));
  const json::Value doc = parse(stats.to_json());
  ASSERT_NE(doc.find("totals")->find("hit_rate"), nullptr);
  EXPECT_TRUE(doc.find("totals")->find("hit_rate")->is_null());
}

TEST(LiveStatsTest, WindowCoversOnlyTheLastWindowSamples) {
  LiveStatsOptions o;
  o.window_samples = 3;
  LiveStats stats(o, {"http://r0"}, "cache_aware", kT0);
  for (int i = 1; i <= 10; ++i) {
    stats.record_request(request(0, "", 100, i > 7 ? 100 : 0, 0));
    stats.tick(kT0 + 1000 * i, replicas(1));
  }
  const json::Value doc = parse(stats.to_json());
  EXPECT_EQ(number(*doc.find("window"), "requests"), 3);
  EXPECT_DOUBLE_EQ(number(*doc.find("window"), "hit_rate"), 1.0);
  EXPECT_DOUBLE_EQ(number(*doc.find("totals"), "hit_rate"), 0.3);
  EXPECT_EQ(number(*doc.find("window"), "seconds"), 3);
}

TEST(LiveStatsTest, CachedTokensNeverExceedPromptTokens) {
  LiveStats stats({}, {"http://r0"}, "cache_aware", kT0);
  stats.record_request(request(0, "", 100, 500, 700));
  stats.tick(kT0 + 1000, replicas(1));
  const json::Value doc = parse(stats.to_json());
  EXPECT_DOUBLE_EQ(number(*doc.find("totals"), "hit_rate"), 1.0);
  EXPECT_DOUBLE_EQ(number(*doc.find("totals"), "predicted_hit_rate"), 1.0);
}

TEST(LiveStatsTest, ErrorsAndRequestsWithoutUsageCountButCarryNoTokens) {
  LiveStats stats({}, {"http://r0"}, "cache_aware", kT0);
  CompletedRequest failed;
  failed.status = 502;
  stats.record_request(failed);
  CompletedRequest gone;
  gone.status = 499;
  stats.record_request(gone);
  stats.tick(kT0 + 1000, replicas(1));
  const json::Value doc = parse(stats.to_json());
  EXPECT_EQ(number(*doc.find("totals"), "requests"), 2);
  EXPECT_EQ(number(*doc.find("totals"), "errors"), 2);
  EXPECT_EQ(number(*doc.find("totals"), "prompt_tokens"), 0);
}

TEST(LiveStatsTest, TtftBucketsAreMonotonicAndQuantilesFallInTheRightBucket) {
  std::size_t prev = 0;
  for (double s = 0.0001; s < 500; s *= 1.07) {
    const std::size_t b = LiveStats::ttft_bucket(s);
    EXPECT_GE(b, prev);
    EXPECT_LT(b, LiveStats::kTtftBuckets);
    prev = b;
  }
  LiveStats::TtftHistogram h{};
  EXPECT_LT(LiveStats::ttft_quantile_ms(h, 0.5), 0);  // empty
  for (int i = 0; i < 99; ++i) ++h[LiveStats::ttft_bucket(0.050)];
  ++h[LiveStats::ttft_bucket(2.0)];
  const double p50 = LiveStats::ttft_quantile_ms(h, 0.5);
  const double p99 = LiveStats::ttft_quantile_ms(h, 0.99);
  const double p100 = LiveStats::ttft_quantile_ms(h, 1.0);
  // Within one bucket (x1.2) of the true value.
  EXPECT_GT(p50, 50 / 1.2);
  EXPECT_LE(p50, 50 * 1.2);
  EXPECT_LE(p99, 50 * 1.2);
  EXPECT_GT(p100, 2000 / 1.2);
  EXPECT_LE(p100, 2000 * 1.2);
}

TEST(LiveStatsTest, TtftIsSplitIntoHitsAndMissesByCachedFraction) {
  LiveStats stats({}, {"http://r0"}, "cache_aware", kT0);
  stats.record_request(request(0, "", 1000, 900, 900, 0.020));  // hit
  stats.record_request(request(0, "", 1000, 16, 0, 0.400));     // miss: a shared header only
  stats.record_request(request(0, "", 1000, 900, 900));         // not streamed: no TTFT
  stats.tick(kT0 + 1000, replicas(1));
  const json::Value doc = parse(stats.to_json());
  const json::Value& ttft = *doc.find("totals")->find("ttft_ms");
  EXPECT_EQ(number(*ttft.find("hit"), "count"), 1);
  EXPECT_EQ(number(*ttft.find("miss"), "count"), 1);
  EXPECT_LT(number(*ttft.find("hit"), "p50"), 25);
  EXPECT_GT(number(*ttft.find("miss"), "p50"), 300);
  const json::Value& sample = array(doc, "samples").at(0);
  EXPECT_TRUE(sample.find("ttft_ms")->find("hit_p50")->is_number());
}

TEST(LiveStatsTest, DecisionsAreCountedByReason) {
  LiveStats stats({}, {"http://r0"}, "cache_aware", kT0);
  stats.record_decision(RouteReason::kCacheHit);
  stats.record_decision(RouteReason::kCacheHit);
  stats.record_decision(RouteReason::kColdAffinity);
  stats.tick(kT0 + 1000, replicas(1));
  const json::Value doc = parse(stats.to_json());
  EXPECT_EQ(number(*doc.find("totals")->find("decisions"), "cache_hit"), 2);
  EXPECT_EQ(number(*doc.find("totals")->find("decisions"), "cold_affinity"), 1);
  EXPECT_EQ(number(*array(doc, "samples").at(0).find("decisions"), "cache_hit"), 2);
}

TEST(LiveStatsTest, TenantsBeyondTheCapFoldIntoOther) {
  LiveStatsOptions o;
  o.max_tenants = 3;
  LiveStats stats(o, {"http://r0"}, "cache_aware", kT0);
  for (int i = 0; i < 50; ++i) {
    stats.record_request(request(0, "tenant-" + std::to_string(i), 10, 5, 5));
  }
  stats.record_request(request(0, "tenant-1", 10, 5, 5));  // a tracked one stays itself
  stats.tick(kT0 + 1000, replicas(1));
  const json::Value doc = parse(stats.to_json());
  const json::Array& tenants = array(doc, "tenants");
  ASSERT_EQ(tenants.size(), 4u);
  EXPECT_EQ(tenants[3].find("name")->as_string(), "(other)");
  EXPECT_EQ(number(*tenants[3].find("totals"), "requests"), 47);
  EXPECT_EQ(number(*tenants[1].find("totals"), "requests"), 2);
}

TEST(LiveStatsTest, TenantNamesAreMadePrintable) {
  LiveStats stats({}, {"http://r0"}, "cache_aware", kT0);
  stats.record_request(request(0, std::string("a\x01\xff\"b", 5), 10, 5, 5));
  stats.tick(kT0 + 1000, replicas(1));
  const json::Value doc = parse(stats.to_json());
  EXPECT_EQ(array(doc, "tenants").at(0).find("name")->as_string(), "a??\"b");
}

TEST(LiveStatsTest, FindingsTableIsBoundedKeepsFrequentRowsAndRedacts) {
  LiveStatsOptions o;
  o.max_findings = 4;
  LiveStats stats(o, {"http://r0"}, "cache_aware", kT0);
  for (int i = 0; i < 10; ++i) {
    stats.record_finding(
        {"volatile-timestamp", "messages[0].content", "2026-08-20T14:33:07Z", 12, 48}, kT0 + i);
  }
  for (int i = 0; i < 100; ++i) {
    stats.record_finding(
        {"volatile-id", "messages[" + std::to_string(i) + "].content", "req_8f3a9b2c", 3, 9},
        kT0 + 100 + i);
  }
  stats.record_change({"tool-json", "rewrite", "tools[0].function.parameters"}, kT0);
  stats.tick(kT0 + 1000, replicas(1));
  const json::Value doc = parse(stats.to_json());
  const json::Array& findings = array(doc, "findings");
  ASSERT_EQ(findings.size(), 4u);
  EXPECT_EQ(findings[0].find("rule")->as_string(), "volatile-timestamp");
  EXPECT_EQ(number(findings[0], "count"), 10);
  EXPECT_EQ(findings[0].find("excerpt")->as_string(), "9999-99-99x99:99:99x");
  EXPECT_EQ(number(findings[0], "token_offset"), 12);
  EXPECT_EQ(number(findings[0], "byte_offset"), 48);
  EXPECT_EQ(number(findings[0], "last_seen_ms"), static_cast<double>(kT0 + 9));
  EXPECT_EQ(findings[1].find("excerpt")->as_string(), "req_9x9x9x9x");
  EXPECT_EQ(number(*doc.find("totals"), "findings"), 110);
  const json::Array& changes = array(doc, "canonicalization");
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].find("mode")->as_string(), "rewrite");
}

TEST(LiveStatsTest, RedactionMasksDigitsAndIdsButKeepsWords) {
  EXPECT_EQ(redact_excerpt("Mon, 20 Aug 2026 14:33:07 GMT"), "Mon, 99 Aug 9999 99:99:99 GMT");
  EXPECT_EQ(redact_excerpt("req_8f3a"), "req_9x9x");
  EXPECT_EQ(redact_excerpt("abcdefghijklmnopqrstuvwxyz"), std::string(26, 'x'));
  EXPECT_EQ(redact_excerpt("tab\there\xc3\xa9"), "tab?here??");
  EXPECT_EQ(redact_excerpt(std::string(100, '1'), 60), std::string(60, '9') + "...");
}

TEST(LiveStatsTest, RedactionAppendsToWhatTheStringHolds) {
  std::string out = "kept:";
  append_redacted_excerpt("id 8f3a\n", kExcerptBytes, out);
  EXPECT_EQ(out, "kept:id 9x9x?");
  append_redacted_excerpt(std::string(70, 'a'), kExcerptBytes, out);
  EXPECT_EQ(out, "kept:id 9x9x?" + std::string(60, 'x') + "...");
}

// A row keeps the latest excerpt of its finding, redacted into the row's own string: a shorter
// one after a longer one (and the other way) leaves nothing of the one before.
TEST(LiveStatsTest, ARecurringFindingShowsItsLatestExcerpt) {
  LiveStats stats({}, {"http://r0"}, "cache_aware", kT0);
  const auto excerpt_after = [&](std::string_view text, std::int64_t t) {
    stats.record_finding({"volatile-id", "messages[0].content", text, 1, 2}, t);
    stats.tick(t + 1000, replicas(1));
    const json::Value doc = parse(stats.to_json());
    const json::Array& findings = array(doc, "findings");
    EXPECT_EQ(findings.size(), 1u);
    return findings.empty() ? std::string() : findings[0].find("excerpt")->as_string();
  };
  EXPECT_EQ(excerpt_after("request 12345678901234567890 of user Bob", kT0),
            "request 99999999999999999999 of user Bob");
  EXPECT_EQ(excerpt_after("id 7", kT0 + 2000), "id 9");
  EXPECT_EQ(excerpt_after(std::string(61, 'z'), kT0 + 4000), std::string(60, 'x') + "...");
}

// One request's findings and changes under one lock are recorded as the calls one by one are.
TEST(LiveStatsTest, PrepRecorderRecordsAsTheSingleCallsDo) {
  LiveStatsOptions o;
  o.max_findings = 2;
  LiveStats one_by_one(o, {"http://r0"}, "cache_aware", kT0);
  LiveStats batched(o, {"http://r0"}, "cache_aware", kT0);
  // Ends with a run of findings in one row: the batch writes only the run's last excerpt.
  const LiveFinding findings[] = {{"volatile-timestamp", "messages[0].content", "2026-08-20", 4, 9},
                                  {"volatile-id", "messages[1].content", "req_8f3a", 7, 30},
                                  {"volatile-id", "messages[2].content", "abc", 8, 40},
                                  {"volatile-timestamp", "messages[0].content", "14:33", 5, 11},
                                  {"volatile-timestamp", "messages[0].content", "noon", 6, 20}};
  const LiveChange changes[] = {{"tool-json", "rewrite", "tools[0].function.parameters"},
                                {"timestamp", "observe", "messages[0].content"}};
  for (int request = 0; request < 3; ++request) {
    const std::int64_t t = kT0 + request;
    for (const LiveChange& c : changes) one_by_one.record_change(c, t);
    for (const LiveFinding& f : findings) one_by_one.record_finding(f, t);
    LiveStats::PrepRecorder rec = batched.prep_recorder(t);
    for (const LiveChange& c : changes) rec.change(c);
    for (const LiveFinding& f : findings) rec.finding(f);
  }
  one_by_one.tick(kT0 + 1000, replicas(1));
  batched.tick(kT0 + 1000, replicas(1));  // the recorders' locks are released
  EXPECT_EQ(batched.to_json(), one_by_one.to_json());
  const json::Value doc = parse(batched.to_json());
  EXPECT_EQ(number(*doc.find("totals"), "findings"), 15);
}

TEST(LiveStatsTest, MemoryStaysBoundedUnderLongRuns) {
  LiveStatsOptions o;
  o.capacity = 30;
  o.max_tenants = 4;
  o.max_findings = 8;
  LiveStats stats(o, {"http://r0", "http://r1"}, "cache_aware", kT0);
  std::size_t size_at_100 = 0;
  for (int i = 1; i <= 300; ++i) {
    for (int k = 0; k < 5; ++k) {
      stats.record_request(request(static_cast<ReplicaId>(k % 2), "t" + std::to_string(i * 5 + k),
                                   100, 50, 50, 0.01));
      stats.record_finding({"volatile-id", "f" + std::to_string(i * 5 + k), "x", 0, 0}, kT0 + i);
    }
    stats.tick(kT0 + 1000 * i, replicas(2));
    if (i == 100) size_at_100 = stats.to_json().size();
  }
  EXPECT_EQ(stats.sample_count(), 30u);
  // The document no longer grows once the ring is full (digits of the counters aside).
  EXPECT_LT(stats.to_json().size(), size_at_100 + 200);
}

}  // namespace
}  // namespace prefixgate::gateway::server
