#include "prefixgate/serving/metrics.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace prefixgate::serving {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.starts_with(line + "\n");
}

TEST(MetricsTest, LabelledCountersRenderOneSeriesPerLabelSet) {
  Metrics m;
  CounterFamily& requests = m.counter("t_requests_total", "Requests.", {"route", "status"});
  requests.add({"/v1/chat/completions", "200"});
  requests.add({"/v1/chat/completions", "200"}, 2);
  requests.add({"/v1/models", "404"});
  const std::string text = m.render();
  EXPECT_TRUE(has_line(text, "# HELP t_requests_total Requests.")) << text;
  EXPECT_TRUE(has_line(text, "# TYPE t_requests_total counter")) << text;
  EXPECT_TRUE(has_line(text, R"(t_requests_total{route="/v1/chat/completions",status="200"} 3)"))
      << text;
  EXPECT_TRUE(has_line(text, R"(t_requests_total{route="/v1/models",status="404"} 1)")) << text;
}

TEST(MetricsTest, UnlabelledFamiliesRenderAtZero) {
  Metrics m;
  m.counter("t_errors_total", "Errors.");
  m.histogram("t_latency_seconds", "Latency.", {0.1, 1});
  const std::string text = m.render();
  EXPECT_TRUE(has_line(text, "t_errors_total 0")) << text;
  EXPECT_TRUE(has_line(text, R"(t_latency_seconds_bucket{le="+Inf"} 0)")) << text;
  EXPECT_TRUE(has_line(text, "t_latency_seconds_count 0")) << text;
}

TEST(MetricsTest, HistogramBucketsAreCumulativeAndInclusive) {
  Metrics m;
  Histogram& h = m.histogram("t_h", "H.", {0.1, 1, 10});
  for (double v : {0.05, 0.1, 0.5, 1.0, 20.0}) h.observe(v);
  const std::string text = m.render();
  EXPECT_TRUE(has_line(text, R"(t_h_bucket{le="0.1"} 2)")) << text;  // le is inclusive
  EXPECT_TRUE(has_line(text, R"(t_h_bucket{le="1"} 4)")) << text;
  EXPECT_TRUE(has_line(text, R"(t_h_bucket{le="10"} 4)")) << text;
  EXPECT_TRUE(has_line(text, R"(t_h_bucket{le="+Inf"} 5)")) << text;
  EXPECT_TRUE(has_line(text, "t_h_sum 21.65")) << text;
  EXPECT_TRUE(has_line(text, "t_h_count 5")) << text;
}

TEST(MetricsTest, LabelledHistogramPutsLeLast) {
  Metrics m;
  m.histogram("t_ttft", "T.", {"replica"}, {1}).observe({"http://a"}, 0.5);
  const std::string text = m.render();
  EXPECT_TRUE(has_line(text, R"(t_ttft_bucket{replica="http://a",le="1"} 1)")) << text;
  EXPECT_TRUE(has_line(text, R"(t_ttft_count{replica="http://a"} 1)")) << text;
}

TEST(MetricsTest, LabelValuesAreEscaped) {
  Metrics m;
  m.counter("t_c", "C.", {"tenant"}).add({"a\"b\\c\nd"});
  EXPECT_TRUE(has_line(m.render(), R"(t_c{tenant="a\"b\\c\nd"} 1)")) << m.render();
}

TEST(MetricsTest, CallbacksAreReadAtRenderWithTheirType) {
  Metrics m;
  double value = 1;
  m.callback("t_gauge", "G.", MetricType::kGauge, [&] { return value; });
  m.callback("t_total", "T.", MetricType::kCounter, {"replica"}, [] {
    return std::vector<Sample>{{{"a"}, 7}, {{"b"}, 0.25}};
  });
  value = 42;
  const std::string text = m.render();
  EXPECT_TRUE(has_line(text, "# TYPE t_gauge gauge")) << text;
  EXPECT_TRUE(has_line(text, "t_gauge 42")) << text;
  EXPECT_TRUE(has_line(text, "# TYPE t_total counter")) << text;
  EXPECT_TRUE(has_line(text, R"(t_total{replica="a"} 7)")) << text;
  EXPECT_TRUE(has_line(text, R"(t_total{replica="b"} 0.25)")) << text;
}

TEST(MetricsTest, FamiliesRenderInRegistrationOrder) {
  Metrics m;
  m.callback("t_b", "B.", MetricType::kGauge, [] { return 1.0; });
  m.counter("t_a", "A.");
  const std::string text = m.render();
  EXPECT_LT(text.find("t_b"), text.find("t_a"));
}

TEST(MetricsTest, ValuesUseShortestFormAndPrometheusSpecials) {
  std::string out;
  for (double v : {3.0, 0.1, 1e21, -2.5}) {
    append_metric_value(v, out);
    out += ' ';
  }
  append_metric_value(std::numeric_limits<double>::infinity(), out);
  out += ' ';
  append_metric_value(std::numeric_limits<double>::quiet_NaN(), out);
  EXPECT_EQ(out, "3 0.1 1e+21 -2.5 +Inf NaN");
}

TEST(MetricsTest, ConcurrentObservationsAreAllCounted) {
  Metrics m;
  CounterFamily& c = m.counter("t_c", "C.", {"thread"});
  Counter& shared = m.counter("t_shared", "S.");
  Histogram& h = m.histogram("t_h", "H.", {1});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10000; ++i) {
        c.add({std::to_string(t % 2)});
        shared.add();
        h.observe(0.5);
        if (i % 1000 == 0) (void)m.render();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const std::string text = m.render();
  EXPECT_TRUE(has_line(text, R"(t_c{thread="0"} 20000)")) << text;
  EXPECT_TRUE(has_line(text, R"(t_c{thread="1"} 20000)")) << text;
  EXPECT_TRUE(has_line(text, "t_shared 40000")) << text;
  EXPECT_TRUE(has_line(text, "t_h_count 40000")) << text;
}

// add() takes its series from the calling thread's cache of recent ones: each series counts
// only its own family's values, whether slots collide (more label sets than slots), two families
// share label values, or a family is gone and a new one takes its place in memory.
TEST(MetricsTest, AThreadsCachedSeriesAreTheirFamiliesOwn) {
  for (int round = 0; round < 3; ++round) {
    Metrics m;  // a new registry each round, likely at the last one's address
    CounterFamily& a = m.counter("t_a", "A.", {"k"});
    CounterFamily& b = m.counter("t_b", "B.", {"k"});
    HistogramFamily& h = m.histogram("t_h", "H.", {"k"}, {1});
    for (int pass = 0; pass < 2; ++pass) {
      for (int i = 0; i < 1000; ++i) {
        const std::string value = std::to_string(i);
        a.add({value});
        if (i % 10 == 0) b.add({value}, 5);
        h.observe({value}, 0.5);
      }
    }
    const std::string text = m.render();
    for (int i : {0, 1, 255, 256, 511, 999}) {
      const std::string k = std::to_string(i);
      EXPECT_TRUE(has_line(text, "t_a{k=\"" + k + "\"} 2")) << k;
      EXPECT_TRUE(has_line(text, "t_h_count{k=\"" + k + "\"} 2")) << k;
    }
    EXPECT_TRUE(has_line(text, R"(t_b{k="10"} 10)"));
    EXPECT_EQ(text.find(R"(t_b{k="11"})"), std::string::npos);
  }
}

// Values that differ in one byte anywhere (in a whole eight-byte word or in the tail), or only
// in where one value ends and the next begins, are different series.
TEST(MetricsTest, CachedSeriesTellApartValuesDifferingInOneByte) {
  Metrics m;
  CounterFamily& c = m.counter("t_c", "C.", {"a", "b"});
  for (int pass = 0; pass < 3; ++pass) {
    for (std::size_t len = 1; len <= 20; ++len) {
      for (std::size_t at = 0; at < len; ++at) {
        std::string value(len, 'a');
        value[at] = 'b';
        c.add({value, ""});
      }
    }
    c.add({"ab", "c"});
    c.add({"a", "bc"});
    c.add({"", "abc"});
  }
  const std::string text = m.render();
  EXPECT_TRUE(has_line(text, R"(t_c{a="aaaaaaaaab",b=""} 3)"));
  EXPECT_TRUE(has_line(text, R"(t_c{a="aaaaaaaaaaaaaaaaaaab",b=""} 3)"));
  EXPECT_TRUE(has_line(text, R"(t_c{a="baaaaaaaaaaaaaaaaaaa",b=""} 3)"));
  EXPECT_TRUE(has_line(text, R"(t_c{a="ab",b="c"} 3)"));
  EXPECT_TRUE(has_line(text, R"(t_c{a="a",b="bc"} 3)"));
  EXPECT_TRUE(has_line(text, R"(t_c{a="",b="abc"} 3)"));
  // One series per value: 210 of one byte changed, three split differently.
  std::size_t series = 0;
  for (std::size_t at = text.find("\nt_c{"); at != std::string::npos;
       at = text.find("\nt_c{", at + 1)) {
    ++series;
  }
  EXPECT_EQ(series, 213u);
}

// A LabelledTable's values: made once per label set whichever thread asks first, then the same
// value (at the same address) for every thread, through slots shared with the families' series
// and with other tables; a table made where a destroyed one was never hands out the old values.
TEST(MetricsTest, ALabelledTableMakesOneValuePerLabelSet) {
  struct Value {
    std::string labels;
  };
  for (int round = 0; round < 3; ++round) {
    std::atomic<int> made{0};
    const auto make = [&made, round](const LabelValues& v) {
      ++made;
      return std::make_unique<Value>(Value{std::to_string(round) + ":" + v.at(0) + "/" + v.at(1)});
    };
    LabelledTable<Value> table(make);
    LabelledTable<Value> other(make);
    Metrics m;
    CounterFamily& family = m.counter("t_l", "L.", {"a", "b"});
    constexpr int kKeys = 600;  // more than the thread's slots
    std::vector<std::vector<const Value*>> seen(4, std::vector<const Value*>(kKeys));
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int pass = 0; pass < 2; ++pass) {
          for (int k = 0; k < kKeys; ++k) {
            const std::string a = std::to_string(k), b = k % 2 == 0 ? "even" : "odd";
            const Value& v = table.at({a, b});
            family.add({a, b});
            EXPECT_EQ(v.labels, std::to_string(round) + ":" + a + "/" + b);
            if (pass == 0) seen[t][k] = &v;
            EXPECT_EQ(seen[t][k], &v);
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (int t = 1; t < 4; ++t) EXPECT_EQ(seen[t], seen[0]);
    EXPECT_EQ(made.load(), kKeys);
    EXPECT_NE(&other.at({"1", "odd"}), &table.at({"1", "odd"}));
    EXPECT_EQ(made.load(), kKeys + 1);
    EXPECT_TRUE(has_line(m.render(), R"(t_l{a="7",b="odd"} 8)"));
  }
}

}  // namespace
}  // namespace prefixgate::serving
