// prefixgate-bench soak's pure part: /proc and /metrics readers, error attribution, and the
// verdict on made-up samples (a leak, a restarted engine, descriptors in flight, an index that
// keeps growing, errors).
#include "soak.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "soak_report.h"

namespace prefixgate::bench {
namespace {

TEST(SoakTest, ParsesVmRssFromProcStatus) {
  EXPECT_EQ(parse_vm_rss_kb("Name:\tprefixgate\nVmPeak:\t  200 kB\nVmRSS:\t   13232 kB\n"), 13232);
  EXPECT_EQ(parse_vm_rss_kb("Name:\tzombie\n"), std::nullopt);
  EXPECT_EQ(parse_vm_rss_kb("VmRSS:\tkB\n"), std::nullopt);
}

TEST(SoakTest, ReadsThisProcesssMemoryAndDescriptors) {
  EXPECT_GT(read_rss_kb(getpid()), 0);
  const long before = count_fds(getpid());
  ASSERT_GT(before, 0);
  const int fd = open("/dev/null", O_RDONLY);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(count_fds(getpid()), before + 1);
  close(fd);
  EXPECT_EQ(read_rss_kb(-1), -1);
  EXPECT_EQ(count_fds(-1), -1);
}

TEST(SoakTest, CountsThisProcesssEstablishedConnections) {
  const long before = count_established(getpid());
  ASSERT_GE(before, 0);
  // A connected pair over loopback: both ends are this process's, both established.
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const int server = accept(listener, nullptr, nullptr);
  ASSERT_GE(server, 0);
  EXPECT_EQ(count_established(getpid()), before + 2);  // the listener is not established
  close(server);
  close(client);
  close(listener);
  EXPECT_EQ(count_established(-1), -1);
}

TEST(SoakTest, ReadsMetricValuesAndCountsSeries) {
  const std::string text =
      "# HELP prefixgate_index_blocks blocks\n"
      "# TYPE prefixgate_index_blocks gauge\n"
      "prefixgate_index_blocks 1234\n"
      "prefixgate_index_blocks_extra 7\n"
      "prefixgate_requests_total{replica=\"a\"} 3\n"
      "prefixgate_requests_total{replica=\"b\"} 4.5\n"
      "\n";
  EXPECT_EQ(metric_value(text, "prefixgate_index_blocks"), 1234);
  EXPECT_EQ(metric_value(text, "prefixgate_requests_total"), 7.5);
  EXPECT_EQ(metric_value(text, "prefixgate_missing"), std::nullopt);
  EXPECT_EQ(metric_series(text), 4u);
}

TEST(SoakTest, ParsesDurations) {
  EXPECT_EQ(parse_duration_s("30m"), 1800);
  EXPECT_EQ(parse_duration_s("20s"), 20);
  EXPECT_EQ(parse_duration_s("1h"), 3600);
  EXPECT_EQ(parse_duration_s("90"), 90);
  EXPECT_EQ(parse_duration_s("1.5m"), 90);
  EXPECT_EQ(parse_duration_s("0"), 0);
  EXPECT_EQ(parse_duration_s(""), std::nullopt);
  EXPECT_EQ(parse_duration_s("m"), std::nullopt);
  EXPECT_EQ(parse_duration_s("-3s"), std::nullopt);
  EXPECT_EQ(parse_duration_s("ten"), std::nullopt);
}

TEST(SoakTest, AnErrorIsInjectedOnlyWhenItsStreamWasOnTheKilledReplicaAtTheKill) {
  const SoakRestart kill{.t_s = 100, .replica = 0};
  RequestRecord cut;
  cut.sent_s = 99;
  cut.done_s = 100.01;
  cut.replica = "http://127.0.0.1:4000";
  cut.error = "stream_error";
  EXPECT_TRUE(is_injected_error(cut, kill, 4000));
  EXPECT_FALSE(is_injected_error(cut, kill, 5000));  // another replica
  EXPECT_TRUE(was_in_flight_at(cut, kill, 4000));
  RequestRecord later = cut;  // sent after the kill: the gateway should have routed elsewhere
  later.sent_s = 101;
  later.done_s = 102;
  EXPECT_FALSE(is_injected_error(later, kill, 4000));
  RequestRecord status = cut;  // an HTTP error: failed before the first byte, should be retried
  status.error = "http_502";
  EXPECT_FALSE(is_injected_error(status, kill, 4000));
  RequestRecord fine = cut;  // streaming at the kill, yet not cut: in flight, and not failed
  fine.error.clear();
  fine.first_token_s = 99.5;
  fine.done_s = 100.2;
  EXPECT_FALSE(is_injected_error(fine, kill, 4000));
  EXPECT_TRUE(was_in_flight_at(fine, kill, 4000));
  RequestRecord ended = fine;  // ended as the kill time was taken, before the signal: not cut
  ended.done_s = 100.01;
  EXPECT_FALSE(was_in_flight_at(ended, kill, 4000));
  RequestRecord retried = fine;  // no answer before the kill: retried by the gateway, served
  retried.first_token_s = 100.005;
  EXPECT_FALSE(was_in_flight_at(retried, kill, 4000));
  RequestRecord port_prefix = cut;  // :40000 is not :4000
  port_prefix.replica = "http://127.0.0.1:40000";
  EXPECT_FALSE(is_injected_error(port_prefix, kill, 4000));
}

// Samples every 10 s for `n` samples: a gateway and one engine, each from rss(t)/fds(t); the
// engine restarted (a new pid) at `restart_s` when > 0.
std::vector<SoakSample> samples(std::size_t n, long (*gateway_rss)(double),
                                long (*engine_rss)(double), double restart_s = -1,
                                long (*gateway_fds)(double) = nullptr,
                                double (*index)(double) = nullptr) {
  std::vector<SoakSample> out;
  for (std::size_t i = 0; i < n; ++i) {
    const double t = 10.0 * static_cast<double>(i);
    SoakSample s{.t_s = t};
    s.processes.push_back({.name = "gateway",
                           .pid = 100,
                           .rss_kb = gateway_rss(t),
                           .fds = gateway_fds != nullptr ? gateway_fds(t) : 30});
    const bool restarted = restart_s > 0 && t >= restart_s;
    s.processes.push_back({.name = "engine-0",
                           .pid = restarted ? 201 : 200,
                           .started_s = restarted ? restart_s : 0,
                           .rss_kb = engine_rss(restarted ? t - restart_s : t),
                           .fds = 14});
    s.gateway.index_blocks = index != nullptr ? index(t) : 1000;
    s.gateway.index_hashes = s.gateway.index_blocks;
    s.gateway.metrics_series = 300;
    s.gateway.metrics_bytes = 30000;
    s.gateway.stats_bytes = 50000;
    out.push_back(s);
  }
  return out;
}

const SoakCheck* find_check(const SoakVerdict& v, const std::string& what,
                            const std::string& subject_prefix) {
  for (const SoakCheck& c : v.checks) {
    if (c.what == what && c.subject.rfind(subject_prefix, 0) == 0) return &c;
  }
  return nullptr;
}

const SoakVerdictOptions kOptions{.warmup_s = 60, .lifetime_warmup_s = 30};

TEST(SoakVerdictTest, FlatProcessesPass) {
  // Memory that grows during the warm-up, then wobbles by 2 %.
  auto gateway = [](double t) -> long {
    return t < 60 ? 5000 + 100 * static_cast<long>(t)
                  : 12000 + (static_cast<long>(t) % 20 == 0 ? 240 : 0);
  };
  auto engine = [](double) -> long { return 160000; };
  const SoakVerdict v = judge_soak(samples(60, gateway, engine), 0, kOptions);
  EXPECT_TRUE(v.pass);
  const SoakCheck* rss = find_check(v, "rss_kb", "gateway");
  ASSERT_NE(rss, nullptr);
  EXPECT_EQ(rss->samples, 54u);  // 600 s of samples, the first 60 s left out
  EXPECT_EQ(rss->min, 12000);
  EXPECT_EQ(rss->max, 12240);
}

TEST(SoakVerdictTest, AGatewayThatGrowsPastFivePercentFails) {
  // 1 kB per 10 s on 12 MB: 10 minutes later 6 % more.
  auto gateway = [](double t) -> long { return 12000 + static_cast<long>(t / 10) * 13; };
  auto engine = [](double) -> long { return 160000; };
  const SoakVerdict v = judge_soak(samples(60, gateway, engine), 0, kOptions);
  EXPECT_FALSE(v.pass);
  const SoakCheck* rss = find_check(v, "rss_kb", "gateway");
  ASSERT_NE(rss, nullptr);
  EXPECT_FALSE(rss->pass);
  EXPECT_TRUE(find_check(v, "rss_kb", "engine-0")->pass);
}

TEST(SoakVerdictTest, EachEngineLifetimeIsJudgedOnItsOwn) {
  auto gateway = [](double) -> long { return 12000; };
  // A restarted engine starts smaller and grows during its first 20 s: across lifetimes the
  // spread is 30 %, within each it is flat once its lifetime warm-up has passed.
  auto engine = [](double since_start) -> long { return since_start < 20 ? 120000 : 160000; };
  const SoakVerdict v = judge_soak(samples(60, gateway, engine, 300), 0, kOptions);
  EXPECT_TRUE(v.pass);
  int lifetimes = 0;
  for (const SoakCheck& c : v.checks) {
    if (c.what == "rss_kb" && c.subject.rfind("engine-0", 0) == 0) {
      ++lifetimes;
      EXPECT_TRUE(c.judged);
      EXPECT_EQ(c.min, 160000) << c.subject;
    }
  }
  EXPECT_EQ(lifetimes, 2);
  // Without the lifetime warm-up the restarted engine's first samples count, and it fails.
  SoakVerdictOptions no_lifetime_warmup = kOptions;
  no_lifetime_warmup.lifetime_warmup_s = 0;
  EXPECT_FALSE(judge_soak(samples(60, gateway, engine, 300), 0, no_lifetime_warmup).pass);
}

TEST(SoakVerdictTest, DescriptorsMayMoveWithRequestsInFlightButNotLeak) {
  auto gateway = [](double) -> long { return 12000; };
  auto engine = [](double) -> long { return 160000; };
  // 30 idle, up to 34 with requests in flight, and one burst of 60.
  auto in_flight = [](double t) -> long {
    return t == 300 ? 60 : 30 + static_cast<long>(t / 10) % 5;
  };
  const SoakVerdict ok = judge_soak(samples(60, gateway, engine, -1, in_flight), 0, kOptions);
  EXPECT_TRUE(ok.pass);
  EXPECT_EQ(find_check(ok, "fds_not_connections", "gateway")->max, 60);
  // One descriptor every 30 s never closed: the level rises by 13 over the judged samples.
  auto leak = [](double t) -> long { return 30 + static_cast<long>(t / 30); };
  const SoakVerdict v = judge_soak(samples(60, gateway, engine, -1, leak), 0, kOptions);
  EXPECT_FALSE(v.pass);
  const SoakCheck* fds = find_check(v, "fds_not_connections", "gateway");
  EXPECT_FALSE(fds->pass);
  EXPECT_EQ(fds->first, 34);  // median of 60..180 s
  EXPECT_EQ(fds->last, 47);   // median of 470..590 s
}

// An engine that the gateway's pool keeps more connections to later in the run (traffic moved to
// it when another engine restarted) is not leaking: established connections are not judged.
// Descriptors that are not connections (a socket whose peer left, a file) still are.
TEST(SoakVerdictTest, MorePooledConnectionsAreNotALeakOtherDescriptorsAre) {
  auto gateway = [](double) -> long { return 12000; };
  auto engine = [](double) -> long { return 160000; };
  std::vector<SoakSample> pooled = samples(60, gateway, engine);
  std::vector<SoakSample> leaking = samples(60, gateway, engine);
  for (std::size_t i = 0; i < pooled.size(); ++i) {
    const double t = pooled[i].t_s;
    const long connections = t < 300 ? 4 : 10;
    pooled[i].processes[1].fds = 12 + connections;
    pooled[i].processes[1].connections = connections;
    leaking[i].processes[1].fds = 12 + 4 + static_cast<long>(t / 60);
    leaking[i].processes[1].connections = 4;
  }
  const SoakVerdict ok = judge_soak(pooled, 0, kOptions);
  EXPECT_TRUE(ok.pass);
  EXPECT_EQ(find_check(ok, "fds_not_connections", "engine-0")->max, 12);
  EXPECT_FALSE(judge_soak(leaking, 0, kOptions).pass);
  // The same descriptors judged whole (connections unknown) fail on the pool's growth.
  for (SoakSample& s : pooled) s.processes[1].connections = -1;
  EXPECT_FALSE(judge_soak(pooled, 0, kOptions).pass);
}

TEST(SoakVerdictTest, AnIndexThatKeepsGrowingFailsOneThatLevelsOffPasses) {
  auto gateway = [](double) -> long { return 12000; };
  auto engine = [](double) -> long { return 160000; };
  auto levels_off = [](double t) { return std::min(t * 10, 3000.0) + (static_cast<long>(t) % 30); };
  EXPECT_TRUE(judge_soak(samples(60, gateway, engine, -1, nullptr, levels_off), 0, kOptions).pass);
  auto grows = [](double t) { return t * 10; };
  const SoakVerdict v = judge_soak(samples(60, gateway, engine, -1, nullptr, grows), 0, kOptions);
  EXPECT_FALSE(v.pass);
  EXPECT_FALSE(find_check(v, "index_blocks", "gateway")->pass);
}

TEST(SoakVerdictTest, ErrorsButInjectedOnesFail) {
  auto gateway = [](double) -> long { return 12000; };
  auto engine = [](double) -> long { return 160000; };
  EXPECT_FALSE(judge_soak(samples(60, gateway, engine), 1, kOptions).pass);
}

TEST(SoakVerdictTest, ARunTooShortToJudgeFails) {
  auto gateway = [](double) -> long { return 12000; };
  auto engine = [](double) -> long { return 160000; };
  const SoakVerdict v = judge_soak(samples(8, gateway, engine), 0, kOptions);  // 2 judged samples
  EXPECT_FALSE(v.pass);
  EXPECT_FALSE(find_check(v, "rss_kb", "gateway")->judged);
}

TEST(SoakVerdictTest, TheGatewayIsJudgedOnceItsStatsRingIsFull) {
  // Grows until its ring is full at 300 s, flat after.
  auto gateway = [](double t) -> long { return 12000 + static_cast<long>(std::min(t, 300.0)) * 5; };
  auto engine = [](double) -> long { return 160000; };
  SoakVerdictOptions o = kOptions;
  EXPECT_FALSE(judge_soak(samples(60, gateway, engine), 0, o).pass);
  o.gateway_warmup_s = 300;
  const SoakVerdict v = judge_soak(samples(60, gateway, engine), 0, o);
  EXPECT_TRUE(v.pass);
  EXPECT_EQ(find_check(v, "rss_kb", "gateway")->samples, 30u);   // 300..590 s
  EXPECT_EQ(find_check(v, "rss_kb", "engine-0")->samples, 54u);  // the engines from 60 s
}

TEST(SoakReportTest, TheJsonReadsBackForAnotherVerdict) {
  auto gateway = [](double) -> long { return 12000; };
  auto engine = [](double) -> long { return 160000; };
  SoakReport report{.title = "t",
                    .samples = samples(20, gateway, engine, 100),
                    .restarts = {SoakRestart{.t_s = 100,
                                             .replica = 0,
                                             .old_pid = 200,
                                             .new_pid = 201,
                                             .in_flight = 2,
                                             .in_flight_failed = 2}},
                    .requests = 50,
                    .injected_by_kind = {{"stream_error", 2}}};
  report.flags.duration_s = 200;
  report.verdict = judge_soak(report.samples, 0, kOptions);
  auto back = parse_soak_json(soak_json(report));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->duration_s, 200);
  EXPECT_EQ(back->requests, 50u);
  EXPECT_EQ(back->errors, 0u);
  EXPECT_EQ(back->injected_errors, 2u);
  ASSERT_EQ(back->samples.size(), 20u);
  ASSERT_EQ(back->restarts.size(), 1u);
  EXPECT_EQ(back->restarts[0].new_pid, 201);
  EXPECT_EQ(back->restarts[0].in_flight, 2u);
  const SoakSample& last = back->samples.back();
  ASSERT_EQ(last.processes.size(), 2u);
  EXPECT_EQ(last.processes[1].pid, 201);
  EXPECT_EQ(last.processes[1].started_s, 100);
  EXPECT_EQ(last.processes[1].rss_kb, 160000);
  EXPECT_EQ(last.gateway.index_blocks, 1000);
  EXPECT_EQ(judge_soak(back->samples, back->errors, kOptions).checks.size(),
            report.verdict.checks.size());
  EXPECT_FALSE(parse_soak_json("{\"samples\":[]}").ok());
}

}  // namespace
}  // namespace prefixgate::bench
