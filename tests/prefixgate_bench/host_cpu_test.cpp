#include "host_cpu.h"

#include <gtest/gtest.h>

#include <chrono>

namespace bench = prefixgate::bench;

TEST(HostCpuTest, ParsesTheAggregateLineOfProcStat) {
  // user nice system idle iowait irq softirq steal guest guest_nice
  auto t = bench::parse_proc_stat("cpu  100 5 50 800 20 3 2 10 0 0\ncpu0 1 2 3 4\n");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->busy, 100u + 5 + 50 + 3 + 2 + 10);
  EXPECT_EQ(t->total, t->busy + 800 + 20);
}

TEST(HostCpuTest, AcceptsOldKernelsWithFourFields) {
  auto t = bench::parse_proc_stat("cpu 10 0 10 80");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->busy, 20u);
  EXPECT_EQ(t->total, 100u);
}

TEST(HostCpuTest, RejectsWhatIsNotTheAggregateLine) {
  EXPECT_FALSE(bench::parse_proc_stat("cpu0 1 2 3 4").has_value());
  EXPECT_FALSE(bench::parse_proc_stat("intr 1 2 3").has_value());
  EXPECT_FALSE(bench::parse_proc_stat("cpu  1 2").has_value());
  EXPECT_FALSE(bench::parse_proc_stat("cpu  1 x 3 4").has_value());
}

TEST(HostCpuTest, BusyShareIsTheBusyFractionOfElapsedJiffies) {
  const bench::CpuTimes before{.busy = 100, .total = 1000};
  EXPECT_DOUBLE_EQ(bench::busy_share(before, {.busy = 190, .total = 1100}), 0.9);
  EXPECT_DOUBLE_EQ(bench::busy_share(before, {.busy = 100, .total = 1200}), 0.0);
  EXPECT_DOUBLE_EQ(bench::busy_share(before, before), 0.0);  // no time passed
}

TEST(HostCpuTest, SaturatedWhenBusyMostOfTheRun) {
  bench::HostCpuUse use;
  use.available = true;
  use.busy_mean = 0.5;
  EXPECT_FALSE(use.saturated());
  use.saturated_share = 0.3;
  EXPECT_TRUE(use.saturated());
  use.saturated_share = 0;
  use.busy_mean = 0.85;
  EXPECT_TRUE(use.saturated());
  use.available = false;
  EXPECT_FALSE(use.saturated());
}

TEST(HostCpuTest, MonitorReadsThisHost) {
  bench::HostCpuMonitor monitor(std::chrono::milliseconds(20));
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  volatile unsigned long spin = 0;
  while (std::chrono::steady_clock::now() < until) spin = spin + 1;
  const bench::HostCpuUse use = monitor.stop();
  ASSERT_TRUE(use.available);  // Linux
  EXPECT_GT(use.busy_mean, 0.0);
  EXPECT_LE(use.busy_mean, 1.0);
  EXPECT_GE(use.intervals, 1u);
  EXPECT_EQ(monitor.stop().intervals, use.intervals);  // stop is idempotent
}
